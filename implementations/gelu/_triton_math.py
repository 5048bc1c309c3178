"""Float32 building blocks shared by the Triton gelu, residual_layernorm_gelu and softmax kernels.

On the GPU ``exp2`` and ``rcp`` are one MUFU instruction each (the ``.ftz``
forms: no denormal scaling around them, which Triton's own exp2 and division
add, four to six more instructions an element).  The results differ only
where an input or output is below 2^-126.  Under TRITON_INTERPRET they fall
back to tl.exp2 and a division (the interpreter has no inline PTX).
"""
from __future__ import annotations

import triton
import triton.language as tl

from suite.backends import interpreting

PTX = tl.constexpr(not interpreting())  # kernels may read only constexpr globals
SQRT1_2 = tl.constexpr(0.7071067811865476)
# Abramowitz & Stegun 7.1.26: erfc(a) ~ t*(a1 + ... + a5*t^4) * exp(-a^2),
# t = 1/(1 + p*a), |error| < 1.5e-7; the coefficients here are halved, so the
# polynomial gives 0.5*erfc directly.
AS_P = tl.constexpr(0.3275911)
AS_C1 = tl.constexpr(0.127414796)
AS_C2 = tl.constexpr(-0.142248368)
AS_C3 = tl.constexpr(0.7107068705)
AS_C4 = tl.constexpr(-0.7265760135)
AS_C5 = tl.constexpr(0.5307027145)
# exp(-a^2) = 2^(x^2 * NEG_K2) with a = |x|/sqrt2, NEG_K2 = -log2(e)/2
NEG_K2 = tl.constexpr(-0.7213475204444817)


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


@triton.jit
def gelu_f32(x, EXACT: tl.constexpr):
    """x * Phi(x) in float32.

    EXACT: libdevice erff (~1 ulp, two branches, ~25 instructions).  Else a
    branch-free Phi(x) = 1 - 0.5*erfc(|x|/sqrt2) (or 0.5*erfc for x < 0) with
    |error| < 3e-7, 13 instructions on sm_90 (an FFMA and a MUFU for t, five
    for the polynomial, two and a MUFU for the Gaussian, a multiply, a max
    and an FFMA to finish).  16-bit outputs round at 2^-9 or coarser, so the cheaper form
    changes nothing there, and it matters: at ~0.7 T elements/s (bf16
    residual_layernorm_gelu at copy speed) an SM can issue only ~47
    instructions an element in all.
    """
    if EXACT:
        return 0.5 * x * (1.0 + tl.math.erf(x * SQRT1_2))
    else:
        # t = 1/(1 + p*|x|/sqrt2); q = 0.5*erfc(|x|/sqrt2) = poly(t) * 2^(-(K x)^2);
        # x*Phi(x) = x - |x|*q for x >= 0 and -|x|*q below: max(x, 0) - |x|*q.
        ax = tl.abs(x)
        t = rcp(1.0 + (AS_P * SQRT1_2) * ax)
        q = t * (AS_C1 + t * (AS_C2 + t * (AS_C3 + t * (AS_C4 + t * AS_C5)))) * exp2(x * (x * NEG_K2))
        return tl.maximum(x, 0.0) - ax * q
