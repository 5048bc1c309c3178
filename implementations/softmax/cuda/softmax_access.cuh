// Global-memory accesses of softmax.cu's short-row and unaligned-row plans
// (11-17): predicated single-element loads whose cache path is a template
// argument, single-element stores, and the 16-byte loads of ksuite
// (ld16_if with a LoadPath).
//
// ksuite::ld_pack_if always goes through the read-only path with
// L1::no_allocate (ld.global.nc.L1::no_allocate).  On the H200 the Triton
// softmax at 2097152 x 128 ran 5-7% slower with an L1 eviction hint on its
// loads (evict_first) than with none, so plans 11-17 can issue plain
// ld.global (kPlain) or ld.global.nc without a hint (kNc).
#pragma once

#include <cstdint>
#include <type_traits>

#include "ksuite/common.cuh"

namespace softmax_access {

using ksuite::kNc;
using ksuite::kPlain;
using ksuite::ld16_if;

// `pred ? the element at p (as float) : -inf`: one predicated 2- or 4-byte load.
template <typename T, int PATH>
__device__ __forceinline__ float ld_elem_if(const T* p, bool pred) {
  const int q = pred;
  if constexpr (sizeof(T) == 4) {
    uint32_t w = 0xff800000u;  // -inf
    if constexpr (PATH == kPlain) {
      KSUITE_LD_IF("ld.global.b32 %0, [%2]", 1, "+r"(w) : "r"(q), "l"(p));
    } else {
      KSUITE_LD_IF("ld.global.nc.b32 %0, [%2]", 1, "+r"(w) : "r"(q), "l"(p));
    }
    return __uint_as_float(w);
  } else {
    unsigned short s = std::is_same_v<T, c10::Half> ? 0xfc00u : 0xff80u;  // -inf
    if constexpr (PATH == kPlain) {
      KSUITE_LD_IF("ld.global.b16 %0, [%2]", 1, "+h"(s) : "r"(q), "l"(p));
    } else {
      KSUITE_LD_IF("ld.global.nc.b16 %0, [%2]", 1, "+h"(s) : "r"(q), "l"(p));
    }
    float f[1];
    ksuite::raw_pack_to_floats<T, 1>(static_cast<uint32_t>(s), f);
    return f[0];
  }
}

// One element, rounded to T, stored where pred.
template <typename T>
__device__ __forceinline__ void st_elem_if(T* p, float v, bool pred) {
  if (pred) *p = ksuite::from_float<T>(v);
}

// Elements of T from p up to the next 16-byte boundary (0 when p is on one).
template <typename T>
__device__ __forceinline__ int to_boundary(const T* p) {
  return static_cast<int>(((16u - (static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p)) & 15u)) & 15u) /
                          sizeof(T));
}

}  // namespace softmax_access
