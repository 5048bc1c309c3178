// Helpers every softmax.cu plan uses: the running (max, sum of exp) of a
// thread, the merge of two such pairs, and the register kernel's block bound.
#pragma once

#include <cmath>

#include "ksuite/bulk.cuh"
#include "ksuite/common.cuh"
#include "ksuite/rows.cuh"

namespace {

using ksuite::Pack;
using ksuite::to_float;
using ksuite::bulk::max_active_clusters;
using ksuite::bulk::mbar_init;
using ksuite::bulk::mbar_init_fence;
using ksuite::bulk::mbar_wait;
using ksuite::bulk::mbar_wait_cluster;
using ksuite::bulk::tma_load;
using ksuite::ptx::smem_addr;

// Adds one pack to a running (max, sum of exp(v - max)), rescaling the sum
// when the pack raises the max.
template <int VEC>
__device__ __forceinline__ void online_add(const float (&v)[VEC], float& mx, float& sum) {
  float pm = v[0];
#pragma unroll
  for (int k = 1; k < VEC; ++k) pm = fmaxf(pm, v[k]);
  if (pm > mx) {
    sum = mx == -INFINITY ? 0.0f : sum * ksuite::exp_approx(mx - pm);
    mx = pm;
  }
  if (mx != -INFINITY) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum += ksuite::exp_approx(v[k] - mx);
  }
}

// (max, sum of exp(v - max)) pairs; a pair with sum 0 carries no mass.
struct MergeMS {
  __device__ __forceinline__ float2 operator()(float2 a, float2 b) const {
    const float m = fmaxf(a.x, b.x);
    // m == a.x also covers a.x == b.x == -inf (no NaN from -inf - -inf).
    const float fa = a.x == m ? 1.0f : ksuite::exp_approx(a.x - m);
    const float fb = b.x == m ? 1.0f : ksuite::exp_approx(b.x - m);
    return make_float2(m, a.y * fa + b.y * fb);
  }
};


// The scale of a row whose every element is -inf: it has no softmax, and
// its output is NaN, as torch's and the float64 reference's are.  A thread
// whose own elements are all -inf, in a row with a finite one, scales its
// exps (all 0) by 0.
constexpr float kNoSoftmax = __builtin_nanf("");

// Block size bound of the register kernel: 32 floats a thread fit the 64
// registers of a 1024-thread block; 64 floats need a 256-thread bound.
constexpr int softmax_regs_max_threads(int elems) { return elems <= 32 ? 1024 : 256; }

}  // namespace
