// How the row kernels (softmax, residual_layernorm_gelu) spread a row of n
// columns over threads: in registers (a group of lanes or a whole block a row,
// RegPlan), or for longer rows over the CTAs of one thread-block cluster
// (cluster_ctas), and the reductions over a row's threads.
// implementations/_shared/row_plans.py mirrors these plans in Python.
// Included as "ksuite/rows.cuh".
#pragma once

#include <algorithm>
#include <cstdint>

#include "ksuite/common.cuh"

namespace ksuite {

// A row of n columns held in registers: each thread owns `packs` packs of
// `vec` elements (16 bytes when vec > 1) of one row, every load of the row
// issued before the first reduction.  tpr threads share a row:
//  - tpr <= 32: a power-of-two group of lanes, 256-thread blocks holding
//    256 / tpr rows, reductions by shuffles only;
//  - tpr > 32: a multiple of 32, the whole block (blockDim == tpr) one row,
//    one shared-memory exchange per reduction.
// tpr == 0: the row needs more than max_threads (<= 1024) threads at
// `packs` a thread.
struct RegPlan {
  int tpr;
  int threads;
};

inline RegPlan plan_regs(int64_t n, int vec, int packs, int max_threads = 1024) {
  const int64_t row_packs = (n + vec - 1) / vec;
  const int64_t t = (row_packs + packs - 1) / packs;
  if (t <= 32) {
    int lanes = 1;
    while (lanes < t) lanes <<= 1;
    return {lanes, std::min(256, max_threads)};
  }
  const int64_t tpr = (t + 31) / 32 * 32;
  if (tpr <= max_threads) return {static_cast<int>(tpr), static_cast<int>(tpr)};
  return {0, 0};
}

// Reductions over the tpr threads of one row (RegPlan above).  Every thread
// of the block calls them (threads past the last row too).  `red` is shared
// scratch of >= 32 entries, used only when tpr > 32; the leading barrier
// lets a block reuse it.
template <typename F, typename V>
__device__ __forceinline__ V group_reduce(V v, int tpr, V* red, const V& identity, F combine) {
  const int width = tpr < 32 ? tpr : 32;
  for (int off = width >> 1; off > 0; off >>= 1) v = combine(v, shfl_xor(v, off));
  if (tpr <= 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : identity;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = combine(v, shfl_xor(v, off));
  return v;
}

// Reductions over the `tpr` threads that share one row: a power-of-two group
// of lanes inside a warp (tpr <= 32; xor offsets below tpr stay in the group),
// or the whole block (tpr == blockDim.x > 32).  Every lane of the warp must
// call these, including lanes whose row is past the end.
__device__ __forceinline__ float row_sum(float v, int tpr, float* smem) {
  if (tpr > 32) return block_sum(v, smem);
  for (int off = tpr >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float row_max(float v, int tpr, float* smem) {
  if (tpr > 32) return block_max(v, smem);
  for (int off = tpr >> 1; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Thread-block clusters (sm_90+): a row too long for one CTA's shared memory
// is split over `ctas` CTAs of one cluster, which swap partial statistics
// through distributed shared memory.  Slices of <= 64 KB let three CTAs share
// an SM, so one CTA's loads overlap another's reductions.
constexpr int64_t kClusterSliceBytes = 64 * 1024;

// CTAs a cluster needs to hold `packs` packs of `pack_bytes` (0: more than 8).
inline int cluster_ctas(int64_t packs, int64_t pack_bytes, int smem_limit) {
  for (int c = 1; c <= 8; c *= 2)
    if ((packs + c - 1) / c * pack_bytes <= kClusterSliceBytes) return c;
  return (packs + 7) / 8 * pack_bytes + 1024 <= smem_limit ? 8 : 0;
}

}  // namespace ksuite
