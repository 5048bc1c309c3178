"""How many CTAs of the Triton attention kernel does an sm_90 SM hold, per tile config?

Compiles ``implementations/attention/_triton_flash._attn_fwd`` for sm_90 (Triton's
bundled ptxas, no GPU needed) over BLOCK_M x BLOCK_N x warps x stages, for D = 128
(causal and not) and D = 64, and prints per config the registers a thread, spill
bytes, shared memory, and the CTAs an SM holds by registers (64K) and by shared
memory (227 KB); ``*`` marks the configs the autotuner tries.  Last, per config the
autotuner tries, how its tensor-core work is synchronised: the asynchronous
wgmma groups it commits and, for each wgmma.wait_group, how many groups that
wait leaves in flight (0: the warpgroup waits for every MMA it issued); and the
same for a loop that issues the next block's QK^T first (_attention_next_qk.py).

With ``--tf32x3``: the float32 kernel instead (_triton_tf32x3.py), causal, D = 128
and 64, over BLOCK_N 16-64 and 1-3 stages; ``*`` marks its autotuner's configs.

    python3 -m lab.attention_occupancy [--tf32x3]
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

    import triton

    from implementations.attention import _triton_tf32x3 as F
    from sm90_compute_probe import tf32x3_attention_jobs

    split = "--tf32x3" in (sys.argv[1:] if argv is None else argv)
    table = F.CONFIGS if split else A.CONFIGS
    tried = {(d, c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages)
             for d, cs in table.items() for c in cs}
    sig = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "O": "*bf16", "S": "i32", "qk_scale": "fp32", "S_KEY": "i32"}
    print("  D causal BLOCK_M BLOCK_N warps stages  regs spill smem_KB  CTAs/SM (by regs, by smem)")
    grid = ((64, 128), (16, 32, 64), (4, 8), (1, 2, 3)) if split else ((64, 128), (32, 64, 128), (4, 8), (2, 3, 4))
    for d, causal in ((128, True), (64, True)) if split else ((128, False), (128, True), (64, False)):
        for bm, bn, w, st in itertools.product(*grid):
            if bm < bn or (bm == 64 and w == 8):
                continue
            if split:
                cfg = triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=st)
                (_, _, fn, fsig, const, divisible), = tf32x3_attention_jobs(causal, {d: [cfg]}, (d,))
                r = _compile(fn, fsig, const, divisible, w, st)
            else:
                const = dict(BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=d, DIM=d, CAUSAL=causal, UPCAST=False)
                r = _compile(A._attn_fwd, sig, const, ["Q", "K", "V", "O"], w, st)
            by_regs = 65536 // (-(-r["regs"] // 8) * 8 * 32 * w)
            by_smem = 232448 // max(r["shared"], 1)
            mark = "*" if (d, bm, bn, w, st) in tried else ""
            print(f"{d:3} {int(causal):6} {bm:7} {bn:7} {w:5} {st:6} {r['regs']:5} {r['spill']:5} "
                  f"{r['shared'] / 1024:7.0f}  {min(by_regs, by_smem):2} ({by_regs}, {by_smem}) {mark}")
    if split:
        return 0
    print("\n  D causal BLOCK_M BLOCK_N warps stages  wgmma groups  waits (groups left in flight)")
    for d, causal in ((128, False), (128, True), (64, False)):
        for c in A.CONFIGS[d]:
            bm, bn, w, st = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages
            const = dict(BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=d, DIM=d, CAUSAL=causal, UPCAST=False)
            r = _compile(A._attn_fwd, sig, const, ["Q", "K", "V", "O"], w, st)
            print(f"{d:3} {int(causal):6} {bm:7} {bn:7} {w:5} {st:6} {r['wgmma_commits']:13}  {r['wgmma_waits']}")
    from lab._attention_next_qk import attn_next_qk_first

    print("\nthe next block's QK^T issued before this block's softmax (lab/_attention_next_qk.py), D=128:")
    for bm, bn, w, st in ((128, 64, 8, 3), (128, 64, 8, 2), (64, 64, 4, 3)):
        r = _compile(attn_next_qk_first, {k: v for k, v in sig.items() if k != "S_KEY"},
                     dict(BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=128), ["Q", "K", "V", "O"], w, st)
        print(f"128      0 {bm:7} {bn:7} {w:5} {st:6} {r['wgmma_commits']:13}  {r['wgmma_waits']}"
              f"   ({r['regs']} registers, {r['spill']} spilled)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
