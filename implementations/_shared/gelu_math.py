"""GELU, x * Phi(x), in float32 for the Triton kernels that apply it (gelu,
residual_layernorm_gelu): libdevice erf, or a branch-free erfc for 16-bit
outputs built on triton_math's one-MUFU exp2 and rcp.
"""
from __future__ import annotations

import triton
import triton.language as tl

from implementations._shared.triton_math import exp2, rcp

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
