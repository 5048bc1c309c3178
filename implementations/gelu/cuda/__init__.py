"""Hand-written CUDA GELU: ``cuda`` (16-byte vectors, one tile a block, cheap
exact-form GELU) and ``cuda:scalar`` (one element a thread, erff).

Built by implementations._shared.cuda_ext on first use; called as torch.ops.kernel_suite.gelu;
``gelu_v(x, variant)`` runs one design by number (see gelu.cu; 0 = auto).
"""
from __future__ import annotations

from pathlib import Path

from implementations._shared import cuda_ext, cuda_variants
from implementations._shared.cuda_variants import VariantTuner
from suite.backends import dtype_in
from suite.workload import itemsize, register

SOURCES = [Path(__file__).with_name("gelu.cu")]
_supports = dtype_in("float32", "float16", "bfloat16")


def _fakes() -> None:
    import torch

    for op in ("kernel_suite::gelu", "kernel_suite::gelu_scalar"):
        torch.library.register_fake(op)(lambda x: torch.empty_like(x))
    torch.library.register_fake("kernel_suite::gelu_v")(lambda x, variant: torch.empty_like(x))


def ops():
    return cuda_ext.load("gelu", SOURCES, fakes=_fakes)


def _config(case) -> str:
    """Mirror of gelu.cu's auto_variant (256-thread blocks, eight an SM)."""
    vec = 16 // itemsize(case.dtype)
    tiles4 = case["N"] // vec // (256 * 4)
    unroll = 4 if vec > 4 and tiles4 >= 4 * cuda_variants.device().sms * 8 else 1
    return f"16B vectors, {unroll} in flight/thread, one {256 * unroll}-pack tile a block, fast erfc GELU"


# gelu.cu's designs (gelu_v), every one a candidate
_TUNER = VariantTuner((1, 2, 4, 5, 6, 7, 8), {
    1: "tiles of 256 x 4 packs, grid = tiles",
    2: "persistent grid-stride over the tiles, grid = resident blocks",
    4: "tiles, 8 packs of 16 B in flight a thread",
    5: "tiles, 2 packs of 16 B in flight a thread",
    6: "tiles, 1 pack of 16 B a thread",
    7: "tiles of 128 threads x 2 packs, plain ld.global",
    8: "tiles, 1 pack a thread, plain ld.global"})


def _key(n: int, dtype: str) -> tuple:
    vec = 16 // itemsize(dtype)
    return (dtype, 1 << max(0, n - 1).bit_length(), n % vec == 0)


def _tuned_config(case) -> str:
    return _TUNER.config(_key(case["N"], case.dtype), at=f"N={case['N']}") or _config(case)


@register("gelu", "cuda", available=cuda_ext.cuda_available, supports=_supports, config=_tuned_config,
          description="CUDA: 16-byte vector loads, one tile a block, packed bf16 conversions, cheap "
                      "exact-form GELU; tile shape autotuned among gelu.cu's variants")
def gelu_cuda(x):
    key = _key(x.numel(), str(x.dtype).removeprefix("torch."))
    return _TUNER.run(key, lambda v: ops().gelu_v(x, v), at=f"N={x.numel()}")


@register("gelu", "cuda:scalar", available=cuda_ext.cuda_available, supports=_supports,
          config=lambda case: "1 element/thread, 256-thread blocks",
          description="CUDA: one element per thread, no vector loads (what vectorising buys)")
def gelu_cuda_scalar(x):
    return ops().gelu_scalar(x)
