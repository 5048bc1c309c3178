"""Hand-written CUDA softmax: rows in registers (a warp or a block a row),
split over a thread-block cluster's shared memory (sm_90), or online (running
max and sum, two reads) for rows longer than that.

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


def ops():
    return cuda_build.load("softmax", SOURCES, fakes=_fakes)


@register("softmax", "cuda", available=cuda_build.cuda_available,
          supports=dtype_in("float32", "float16", "bfloat16"),
          config=lambda case: cuda_build.row_plan(case["N"], itemsize(case.dtype), itemsize(case.dtype)),
          description="CUDA: warp/block per row in registers, cluster shared memory for long rows, online beyond")
def softmax_cuda(x):
    return ops().softmax(x)
