"""Float32 building blocks for the Triton kernels: one-MUFU exp2 and rcp.

On the GPU ``exp2`` and ``rcp`` are one MUFU instruction each (the ``.ftz``
forms: no denormal scaling around them, which Triton's own exp2 and division
add, four to six more instructions an element).  The results differ only
where an input or output is below 2^-126.  Under TRITON_INTERPRET they fall
back to tl.exp2 and a division (the interpreter has no inline PTX).  GELU
built on them is in gelu_math.py.
"""
from __future__ import annotations

import triton
import triton.language as tl

from suite.backends import interpreting

PTX = tl.constexpr(not interpreting())  # kernels may read only constexpr globals


@triton.jit
def exp2(x):
    if PTX:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return tl.exp2(x)


@triton.jit
def rcp(x):
    if PTX:
        return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return 1.0 / x
