// GELU, x * Phi(x), in float32 on the device: the exact erff form and two
// cheaper forms of it (one for float outputs, one for 16-bit outputs), for the
// kernels that apply GELU (gelu, residual_layernorm_gelu).
// Included as "ksuite/gelu.cuh".
#pragma once

#include "ksuite/common.cuh"

namespace ksuite {

// Exact GELU: erff, not the tanh approximation (the reference is the erf form).
__device__ __forceinline__ float gelu_erf(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}

// Exact-form GELU, x * Phi(x), in ~16 instructions and two MUFU operations
// (erff costs ~25 with its coefficient selects).  h = Phi(-|x|) =
// erfc(z) / 2 with z = |x| / sqrt 2, from erfc(z) = t exp(-z^2 + P(t)),
// t = 1 / (1 + z / 2), P a degree-9 Chebyshev fit (fractional error of erfc
// < 1.2e-7 for all z >= 0; Numerical Recipes' erfcc).  log2(e) and the 1/2 are
// folded into P's coefficients.  Then GELU = max(x, 0) - |x| h (x >= 0:
// x (1 - h); x < 0: x h).  Checked against float64 over [-12, 12]: abs error
// < 2.4e-7 (half an ulp of the largest outputs), relative error < 1e-6 where
// |GELU| > 1e-20.  |x| is clamped so that +inf gives +inf, not inf * 0.
__device__ __forceinline__ float gelu_fast(float x) {
  const float ax = fminf(fabsf(x), 1.0e30f);
  const float t = rcp_approx(fmaf(ax, 0.35355339059327376f, 1.0f));
  float q = 0.24651730f;
  q = fmaf(q, t, -1.18611495f);
  q = fmaf(q, t, 2.14747446f);
  q = fmaf(q, t, -1.63775315f);
  q = fmaf(q, t, 0.40232158f);
  q = fmaf(q, t, -0.26875686f);
  q = fmaf(q, t, 0.13963006f);
  q = fmaf(q, t, 0.53970062f);
  q = fmaf(q, t, 1.44272920f);
  q = fmaf(q, t, -2.82574822f);
  const float h = t * ex2_approx(fmaf(x * -0.72134752044448170f, x, q));
  return fmaf(-ax, h, fmaxf(x, 0.0f));
}

// GELU for outputs rounded to 16 bits (ulp >= 2^-9 of the value): erfc(z)
// from Abramowitz & Stegun 7.1.26, erfc(z) = t P5(t) exp(-z^2) with
// t = 1 / (1 + p z), |error| < 1.5e-7; the halves and log2(e) are folded
// into the coefficients.  Checked in float32 against float64 over [-12, 12]:
// |error| < 3.4e-7 and < 2.5e-7 |x|, far below a bf16 or fp16 rounding.
// Five FMAs for P where gelu_fast has ten: ~13 instructions an element
// against ~18.
__device__ __forceinline__ float gelu_as(float x) {
  const float ax = fminf(fabsf(x), 1.0e30f);
  const float t = rcp_approx(fmaf(ax, 0.3275911f * 0.70710678118654752f, 1.0f));
  float q = 0.5307027145f;  // A&S's a5 .. a1, halved
  q = fmaf(q, t, -0.7265760135f);
  q = fmaf(q, t, 0.7107068705f);
  q = fmaf(q, t, -0.142248368f);
  q = fmaf(q, t, 0.127414796f);
  const float h = t * q * ex2_approx(x * x * -0.72134752044448170f);  // 0.5 erfc(|x| / sqrt 2)
  return fmaf(-ax, h, fmaxf(x, 0.0f));
}

// The GELU for an output of type T: gelu_as for 16-bit types, gelu_fast for float.
template <typename T>
__device__ __forceinline__ float gelu_out(float x) {
  if constexpr (sizeof(T) == 2) {
    return gelu_as(x);
  } else {
    return gelu_fast(x);
  }
}

}  // namespace ksuite
