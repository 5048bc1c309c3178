"""A user's own softmax kernel, benchmarked beside the built-in ones.

    python -m suite list --plugin examples/my_softmax.py
    python -m suite run --plugin examples/my_softmax.py --workloads softmax --impls triton:mine,torch

The kernel is the simplest row softmax in Triton: one program per row, the
whole row in one block (BLOCK = next power of two >= N, the tail masked), so
it reads each element once and writes it once: 2 * M * N * itemsize bytes,
the softmax workload's compulsory traffic.  Rows longer than MAX_BLOCK would
not fit one program's registers, so ``supports`` turns them down with the
reason.  Without a GPU it runs under TRITON_INTERPRET=1.
"""
import os

import torch
import triton
import triton.language as tl

from suite.workload import register

MAX_BLOCK = 32768


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def available(device: str) -> str | None:
    if device == "cuda" or os.environ.get("TRITON_INTERPRET") == "1":
        return None
    return "Triton on the CPU needs TRITON_INTERPRET=1"


def supports(case) -> str | None:
    if case["N"] > MAX_BLOCK:
        return f"rows longer than {MAX_BLOCK} do not fit one program"
    return None


@register("softmax", "triton:mine", available=available, supports=supports,
          description="one row per program, the row in one masked block")
def my_softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    m, n = x.shape
    y = torch.empty_like(x)
    softmax_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y
