"""Hand-written CUDA softmax: rows in registers (lanes of a warp or a block a
row, all loads before the one (max, sum) reduction), split over a
thread-block cluster's shared memory loaded by TMA bulk copies (sm_90), or
online (running max and sum, two reads) for rows longer than that.

``softmax_v(x, variant)`` runs one plan by number (see softmax.cu; 0 = auto,
what ``softmax`` runs), for device benchmarks that compare them.

Built by suite.cuda_build on first use; called as torch.ops.kernel_suite.softmax.
"""
from __future__ import annotations

from pathlib import Path

from suite import cuda_build
from suite.backends import dtype_in
from suite.workload import itemsize, register

SOURCES = [Path(__file__).with_name("softmax.cu")]


def _fakes() -> None:
    import torch

    torch.library.register_fake("kernel_suite::softmax")(lambda x: torch.empty_like(x))
    torch.library.register_fake("kernel_suite::softmax_v")(lambda x, variant: torch.empty_like(x))


def ops():
    return cuda_build.load("softmax", SOURCES, fakes=_fakes)


@register("softmax", "cuda", available=cuda_build.cuda_available,
          supports=dtype_in("float32", "float16", "bfloat16"),
          config=lambda case: cuda_build.row_plan(case["N"], itemsize(case.dtype), itemsize(case.dtype),
                                                  long_rows="tma"),
          description="CUDA: rows in registers (one (max, sum) reduction), TMA cluster shared memory for long rows, online beyond")
def softmax_cuda(x):
    return ops().softmax(x)
