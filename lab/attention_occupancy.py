"""How many CTAs of the Triton attention kernel does an sm_90 SM hold, per tile config?

Compiles ``implementations/attention/_triton_flash._attn_fwd`` for sm_90 (Triton's
bundled ptxas, no GPU needed) over BLOCK_M x BLOCK_N x warps x stages, for D = 128
(causal and not) and D = 64, and prints per config the registers a thread, spill
bytes, shared memory, and the CTAs an SM holds by registers (64K) and by shared
memory (227 KB); ``*`` marks the configs the autotuner tries.

    python3 -m lab.attention_occupancy
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    import os

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("run without TRITON_INTERPRET (the kernel must compile for sm_90)", file=sys.stderr)
        return 2
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from sm90_compute_probe import _compile

    from implementations.attention import _triton_flash as A

    tried = {(d, c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages)
             for d, cs in A.CONFIGS.items() for c in cs}
    sig = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "O": "*bf16", "S": "i32", "qk_scale": "fp32", "S_KEY": "i32"}
    print("  D causal BLOCK_M BLOCK_N warps stages  regs spill smem_KB  CTAs/SM (by regs, by smem)")
    for d, causal in ((128, False), (128, True), (64, False)):
        for bm, bn, w, st in itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3, 4)):
            if bm < bn or (bm == 64 and w == 8):
                continue
            const = dict(BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=d, CAUSAL=causal, UPCAST=False)
            r = _compile(A._attn_fwd, sig, const, ["Q", "K", "V", "O"], w, st)
            by_regs = 65536 // (-(-r["regs"] // 8) * 8 * 32 * w)
            by_smem = 232448 // max(r["shared"], 1)
            mark = "*" if (d, bm, bn, w, st) in tried else ""
            print(f"{d:3} {int(causal):6} {bm:7} {bn:7} {w:5} {st:6} {r['regs']:5} {r['spill']:5} "
                  f"{r['shared'] / 1024:7.0f}  {min(by_regs, by_smem):2} ({by_regs}, {by_smem}) {mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
