"""Hand-written CUDA residual + LayerNorm + GELU: one read of x and r, one write.

Built by suite.cuda_build on first use; called as
torch.ops.kernel_suite.residual_layernorm_gelu; ``residual_layernorm_gelu_v(...,
variant)`` runs one plan by number (see the .cu; 0 = auto), for device
benchmarks that compare them.
"""
from __future__ import annotations

from pathlib import Path

from suite import cuda_build
from suite.backends import dtype_in
from suite.workload import itemsize, register

SOURCES = [Path(__file__).with_name("residual_layernorm_gelu.cu")]


def _fakes() -> None:
    import torch

    @torch.library.register_fake("kernel_suite::residual_layernorm_gelu")
    def _(x, r, weight, bias, eps):
        return torch.empty_like(x)

    @torch.library.register_fake("kernel_suite::residual_layernorm_gelu_v")
    def _(x, r, weight, bias, eps, variant):
        return torch.empty_like(x)


def ops():
    return cuda_build.load("residual_layernorm_gelu", SOURCES, fakes=_fakes)


@register("residual_layernorm_gelu", "cuda", available=cuda_build.cuda_available,
          supports=dtype_in("float32", "float16", "bfloat16"),
          config=lambda case: cuda_build.row_plan_first_fit(
              case["N"], itemsize(case.dtype), 4, (2, 4) if itemsize(case.dtype) == 4 else (4,),
              long_rows="cluster"),
          description="CUDA: row in registers (two-pass mean and variance), cluster shared memory for long rows, two reads beyond")
def residual_layernorm_gelu_cuda(x, r, weight, bias, eps):
    return ops().residual_layernorm_gelu(x, r, weight, bias, float(eps))
