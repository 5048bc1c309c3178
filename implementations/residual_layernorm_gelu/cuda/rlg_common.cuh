// Helpers every residual_layernorm_gelu.cu plan uses: loading h = x + r a
// 16-byte pack at a time, normalising, scaling, shifting and applying GELU
// to a pack, and the sums a row's threads reduce with.
#pragma once

#include "ksuite/bulk.cuh"
#include "ksuite/common.cuh"
#include "ksuite/gelu.cuh"
#include "ksuite/rows.cuh"

namespace {

using ksuite::Pack;
using ksuite::to_float;
using ksuite::bulk::bulk_copy;
using ksuite::bulk::max_active_clusters;
using ksuite::bulk::mbar_expect;
using ksuite::bulk::mbar_init;
using ksuite::bulk::mbar_init_fence;
using ksuite::bulk::mbar_wait;
using ksuite::bulk::mbar_wait_cluster;
using ksuite::ptx::smem_addr;

template <typename T, int VEC>
__device__ __forceinline__ void load_pack(const T* p, float (&out)[VEC]) {
  const Pack<T, VEC> v = *reinterpret_cast<const Pack<T, VEC>*>(p);
#pragma unroll
  for (int k = 0; k < VEC; ++k) out[k] = to_float(v.v[k]);
}

// y[c..c+VEC) = gelu(((h - mean) * rstd) * w + b).  WORDS (16-byte packs
// only): w and b at any element, read as 32-bit words (ksuite::ld16_words_if),
// and y on a 16-byte boundary (plan 20's body, off the boundaries of w and b).
template <typename T, int VEC, bool WORDS = false>
__device__ __forceinline__ void finish_pack(const float (&h)[VEC], float mean, float rstd,
                                            const T* w, const T* b, T* y) {
  float wv[VEC], bv[VEC];
  if constexpr (WORDS) {
    static_assert(VEC * sizeof(T) == 16, "WORDS reads 16-byte packs");
    ksuite::raw_to_floats<T>(ksuite::ld16_words_if(w, true), wv);
    ksuite::raw_to_floats<T>(ksuite::ld16_words_if(b, true), bv);
  } else {
    load_pack<T, VEC>(w, wv);
    load_pack<T, VEC>(b, bv);
  }
  float out[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) out[k] = ksuite::gelu_out<T>((h[k] - mean) * rstd * wv[k] + bv[k]);
  if constexpr (WORDS) {
    ksuite::st16_global(y, ksuite::floats_to_raw<T>(out));
  } else {
    Pack<T, VEC> o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.v[k] = ksuite::from_float<T>(out[k]);
    *reinterpret_cast<Pack<T, VEC>*>(y) = o;
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void load_h(const T* x, const T* r, float (&h)[VEC]) {
  float rv[VEC];
  load_pack<T, VEC>(x, h);
  load_pack<T, VEC>(r, rv);
#pragma unroll
  for (int k = 0; k < VEC; ++k) h[k] += rv[k];
}

// A split row's head or tail element at column `col` (ksuite::RowSplit), for
// a thread that has one (`edge`): h = x + r, and w and b.  ZERO: zeros where
// not loaded (inside a loop, a predicated load's old value would stay live
// around it).
struct EdgeElem {
  float h, w, b;
};

template <typename T, bool ZERO = false>
__device__ __forceinline__ EdgeElem load_edge(const T* xrow, const T* rrow, const T* w, const T* b, int col,
                                              bool edge) {
  float xe[1], re[1], wf[1], bf[1];
  ksuite::raw_pack_to_floats<T, 1>(ksuite::ld_pack_if<T, 1, true, ZERO>(xrow + col, edge), xe);
  ksuite::raw_pack_to_floats<T, 1>(ksuite::ld_pack_if<T, 1, true, ZERO>(rrow + col, edge), re);
  ksuite::raw_pack_to_floats<T, 1>(ksuite::ld_pack_if<T, 1, false, ZERO>(w + col, edge), wf);
  ksuite::raw_pack_to_floats<T, 1>(ksuite::ld_pack_if<T, 1, false, ZERO>(b + col, edge), bf);
  return {xe[0] + re[0], wf[0], bf[0]};
}

// acc[0] = the sum of acc's VEC partial sums, added pairwise.
template <int VEC>
__device__ __forceinline__ void pairwise_sum(float (&acc)[VEC]) {
#pragma unroll
  for (int s = 1; s < VEC; s *= 2)
#pragma unroll
    for (int k = 0; k + s < VEC; k += 2 * s) acc[k] += acc[k + s];
}

// The second pass of the exact statistics: h -= mean for every pack, and the
// squared deviations of the packs inside the row (ok) summed in CHAINS
// independent chains (acc[k % CHAINS]), then pairwise into acc[0].
template <int CHAINS, int PACKS, int VEC>
__device__ __forceinline__ void center_and_square(float (&h)[PACKS][VEC], const bool (&ok)[PACKS], float mean,
                                                  float (&acc)[VEC]) {
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] -= mean;
    if (ok[p]) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k % CHAINS] = fmaf(h[p][k], h[p][k], acc[k % CHAINS]);
    }
  }
  pairwise_sum(acc);
}

// Sum over the tpr threads of one row (ksuite::plan_regs): lanes of a warp
// (tpr <= 32, a power of two: xor offsets below tpr stay in the group) or the
// whole block (tpr = blockDim.x > 32).  Every thread of the block calls it.
// `red` (32 floats) is this call's own scratch: with one scratch array per
// call a row needs one barrier per reduction, no leading one.
__device__ __forceinline__ float rlg_row_sum(float v, int tpr, float* red) {
  if (tpr > 32) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = ksuite::warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    return ksuite::warp_sum(lane < int(blockDim.x >> 5) ? red[lane] : 0.0f);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    if (off < tpr) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The exact two-pass statistics of a split row: acc holds this thread's row
// sum in VEC chains over its packs h, he its head or tail element (`edge`:
// it has one).  Centres h and he on the row's mean and returns rstd.
template <int PACKS, int VEC>
__device__ __forceinline__ float split_row_rstd(float (&h)[PACKS][VEC], const bool (&ok)[PACKS], float (&acc)[VEC],
                                                float& he, bool edge, int tpr, float (&red)[2][32], float inv_n,
                                                float eps) {
  if (edge) acc[0] += he;
  pairwise_sum(acc);
  const float mean = rlg_row_sum(acc[0], tpr, red[0]) * inv_n;
  center_and_square<VEC>(h, ok, mean, acc);
  he -= mean;
  if (edge) acc[0] = fmaf(he, he, acc[0]);
  return rsqrtf(fmaf(rlg_row_sum(acc[0], tpr, red[1]), inv_n, eps));
}

}  // namespace
