"""Hand-written CUDA GELU: ``cuda`` (16-byte vectors, SM-sized grid) and ``cuda:scalar``.

Built by suite.cuda_build on first use; called as torch.ops.kernel_suite.gelu.
"""
from __future__ import annotations

from pathlib import Path

from suite import cuda_build
from suite.backends import dtype_in
from suite.workload import register

SOURCES = [Path(__file__).with_name("gelu.cu")]
_supports = dtype_in("float32", "float16", "bfloat16")


def _fakes() -> None:
    import torch

    for op in ("kernel_suite::gelu", "kernel_suite::gelu_scalar"):
        torch.library.register_fake(op)(lambda x: torch.empty_like(x))


def ops():
    return cuda_build.load("gelu", SOURCES, fakes=_fakes)


@register("gelu", "cuda", available=cuda_build.cuda_available, supports=_supports,
          config=lambda case: "16B vectors, 4 in flight/thread, grid = SMs x full occupancy",
          description="CUDA: 16-byte vector loads, grid-stride over an SM-sized grid, scalar tail")
def gelu_cuda(x):
    return ops().gelu(x)


@register("gelu", "cuda:scalar", available=cuda_build.cuda_available, supports=_supports,
          config=lambda case: "1 element/thread, 256-thread blocks",
          description="CUDA: one element per thread, no vector loads (what vectorising buys)")
def gelu_cuda_scalar(x):
    return ops().gelu_scalar(x)
