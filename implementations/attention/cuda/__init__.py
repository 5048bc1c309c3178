"""Hand-written CUDA attention: ``cuda``, a FlashAttention-2-style forward.

flash_attention.cuh holds the kernel, a template over its tiling: each warp
owns 16 or 32 query rows (one or two m16 tiles), K/V tiles of 32-128 keys are
double buffered through shared memory by cp.async with one barrier per tile,
Q K^T and P V run on tensor cores (mma.sync m16n8k16), the online softmax in
fp32 with exp2, P goes from the S accumulators to the A operand in registers;
causal skips the tiles above the diagonal and masks only the ones crossing
it.  D = 128 has three more tilings (4-6) in a second kernel that rescales O
only when a row's max grows by more than 2^8, and (4, 6) runs P V one tile
behind Q K^T so that a warp's own softmax overlaps its tensor-core work.
D = 96 (Phi-3-mini's) has D = 128's first four tilings.  float16 and
bfloat16, head dims 64, 96 and 128.  The op
torch.ops.kernel_suite.attention_flash(q, k, v, causal, variant=-1) takes a
tiling index (VARIANTS below), -1 for the automatic one; the environment
variable KSUITE_ATTN_VARIANT, read at each call, overrides the automatic
choice of the registered implementation (for comparing tilings in a sweep).
"""
from __future__ import annotations

import os
from pathlib import Path

from implementations._shared import cuda_ext, cuda_variants
from implementations._shared.cuda_variants import VariantTuner
from suite.workload import Case, register

_HERE = Path(__file__).parent
SOURCES = [_HERE / "flash_attention.cu"] + [
    _HERE / f"flash_attention_{dt}_{part}.cu"
    for dt in ("bf16", "fp16") for part in ("d64", "d96", "d128", "d128_pipe")]

# (query rows per CTA, warps, rows per warp, keys per K/V tile, Q home, CTAs per SM,
# K/V stages, lazy rescale, P V one tile behind Q K^T); the same table as in
# flash_attention.cuh, index = the op's `variant`.  4-6 run flash_fwd_pipe_kernel.
VARIANTS = {
    128: [(128, 4, 32, 64, "smem", 2),
          (256, 8, 32, 64, "smem", 1),
          (128, 8, 16, 64, "registers", 1),
          (128, 4, 32, 32, "smem", 2),
          (128, 4, 32, 32, "smem", 2, 3, True, True),
          (128, 4, 32, 64, "smem", 2, 2, True, False),
          (128, 8, 16, 64, "registers", 1, 3, True, True)],
    96: [(128, 4, 32, 64, "smem", 2),
         (256, 8, 32, 64, "smem", 1),
         (128, 8, 16, 64, "registers", 1),
         (128, 4, 32, 32, "smem", 2)],
    64: [(128, 4, 32, 64, "registers", 2),
         (128, 4, 32, 128, "registers", 2),
         (256, 8, 32, 64, "registers", 1),
         (128, 8, 16, 64, "registers", 2)],
}
# The automatic choice (auto_variant in flash_attention.cu): D -> index.
AUTO = {128: 0, 96: 0, 64: 0}


def _fakes() -> None:
    import torch

    def fake(q, k, v, causal, variant=-1):
        torch._check(q.dim() == 4, lambda: "q must be (B, H, S, D)")
        torch._check(q.shape == k.shape and q.shape == v.shape, lambda: "q, k, v shapes differ")
        return torch.empty_like(q, memory_format=torch.contiguous_format)

    torch.library.register_fake("kernel_suite::attention_flash")(fake)


def ops():
    return cuda_ext.load("attention", SOURCES, fakes=_fakes)


def variant_for(d: int) -> int:
    """The tiling the registered implementation runs at head dim ``d``."""
    env = os.environ.get("KSUITE_ATTN_VARIANT", "")
    if env not in ("", "-1"):
        v = int(env)
        if not 0 <= v < len(VARIANTS[d]):
            raise ValueError(f"KSUITE_ATTN_VARIANT={env}: expected 0..{len(VARIANTS[d]) - 1} or -1")
        return v
    return AUTO[d]


def describe(d: int, variant: int) -> str:
    bm, warps, rows, bn, qhome, ctas, *rest = VARIANTS[d][variant]
    stages, lazy, pipe = rest or (2, False, False)
    buf = "cp.async double buffer" if stages == 2 else f"cp.async {stages} stages"
    extra = (", P V one tile behind Q K^T" if pipe else "") + (", lazy rescale" if lazy else "")
    return (f"v{variant}: BM={bm} ({warps} warps x {rows} rows), BN={bn}, Q in {qhome}, "
            f"{buf}, {ctas} CTA{'s' if ctas > 1 else ''}/SM{extra}")


def _supports(case: Case) -> str | None:
    if case.dtype not in ("float16", "bfloat16"):
        return f"{case.dtype} not supported (mma.sync tensor cores take float16 or bfloat16)"
    if case["D"] not in VARIANTS:
        return f"head dim D={case['D']} not supported (only 64, 96 and 128 are instantiated)"
    return None


def smem(d: int, variant: int) -> int:
    """Mirror of flash_attention.cuh's Cfg::SMEM: Q's tile and the K and V stages,
    rows of D + 8 two-byte elements."""
    bm, _, _, bn, _, _, *rest = VARIANTS[d][variant]
    stages = rest[0] if rest else 2
    return (bm + 2 * stages * bn) * (d + 8) * 2


def _fits(d: int, variant: int) -> bool:
    """Whether the device's shared memory a block holds the tiling (at D = 128 only
    tilings 3 and 4 on GPUs of 99 KB)."""
    return smem(d, variant) <= cuda_variants.device().smem_optin


# Without KSUITE_ATTN_VARIANT the tiling is timed at the first call of each
# (dtype, D, causal, S bucket) and the fastest kept (implementations/_shared/cuda_variants).
_TUNERS = {d: VariantTuner(tuple(range(len(VARIANTS[d]))), {i: describe(d, i) for i in range(len(VARIANTS[d]))},
                           runs=lambda v, _key, d=d: _fits(d, v))
           for d in VARIANTS}


def _key(dtype: str, s: int, causal) -> tuple:
    return (dtype, bool(causal), 1 << max(0, s - 1).bit_length())


def _config(case: Case) -> str:
    if os.environ.get("KSUITE_ATTN_VARIANT", "") in ("", "-1"):
        tuned = _TUNERS[case["D"]].config(_key(case.dtype, case["S"], case["causal"]),
                                          at=f"B{case['B']} H{case['H']} S{case['S']}")
        if tuned:
            return tuned
    return describe(case["D"], variant_for(case["D"]))


@register("attention", "cuda", available=cuda_ext.cuda_available, supports=_supports,
          config=_config,
          description="CUDA: FlashAttention-2-style forward, mma.sync, online softmax, "
                      "cp.async double-buffered K/V; tiling autotuned")
def attention_cuda(q, k, v, causal):
    d = q.shape[-1]
    if os.environ.get("KSUITE_ATTN_VARIANT", "") not in ("", "-1") or d not in _TUNERS:
        return ops().attention_flash(q, k, v, bool(causal), variant_for(d))
    key = _key(str(q.dtype).removeprefix("torch."), q.shape[-2], causal)
    b, h, s = q.shape[0], q.shape[1], q.shape[-2]
    return _TUNERS[d].run(key, lambda var: ops().attention_flash(q, k, v, bool(causal), var), at=f"B{b} H{h} S{s}")
