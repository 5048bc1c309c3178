// The end of a block of the skinny tensor-core GEMMs (gemm_skinny.cu's
// tensor-core form, gemm_skinny_tma.cu): its warps' sums added, then C or,
// where K is split, the fp32 partial, sitting in the workspace as
// [column block][split][M][COLS], and the last split's sum of them.
#pragma once

#include <cstdint>

#include "ksuite/common.cuh"
#include "split_k.cuh"

namespace ksuite_gemm_split {

// The end of a split block, after its threads stored the split's fp32
// partial (M x COLS, at W's tile [column block][split][M][COLS]): every
// thread's stores fenced, one count for the block (release: the partial is
// visible before the count); the block that brings the count to gridDim.y
// (acquire: it sees every partial) adds the partials in split order, 4
// columns a thread at a time read from L2 (.cg: never a stale L1 line),
// writes C and sets the counter back to zero for the next call (kernel
// order on the stream).  Whichever block finishes last, the sum is the same.
template <typename T, int COLS>
__device__ void finish_splits(const float* __restrict__ W, int* __restrict__ counters, T* __restrict__ C,
                              int M, int N, int n0) {
  __shared__ int last;
  const int splits = gridDim.y;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = ksuite_gemm_split::arrive(&counters[blockIdx.x]) == splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();  // every thread's reads below after thread 0's acquire
  constexpr int kQuads = COLS / 4;
  const float4* tile = reinterpret_cast<const float4*>(W + static_cast<int64_t>(blockIdx.x) * splits * M * COLS);
  const int quads = M * kQuads;  // float4s in one partial
  for (int e = threadIdx.x; e < quads; e += blockDim.x) {
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int z = 0; z < splits; ++z) {
      const float4 v = __ldcg(tile + static_cast<int64_t>(z) * quads + e);
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
    const int m = e / kQuads, n = n0 + (e % kQuads) * 4;
    T* c = C + static_cast<int64_t>(m) * N + n;
    if (n < N) c[0] = ksuite::from_float<T>(s.x);
    if (n + 1 < N) c[1] = ksuite::from_float<T>(s.y);
    if (n + 2 < N) c[2] = ksuite::from_float<T>(s.z);
    if (n + 3 < N) c[3] = ksuite::from_float<T>(s.w);
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0;
}

// The sum over WARPS warps of their [16][COLS] fp32 sums in shared memory
// (`red`, added in warp order) for the block's M <= 16 rows and COLS columns
// from n0: C where K is not split (grid.y == 1), else split blockIdx.y's
// partial in W; then, with splits, finish_splits.  THREADS: the block's.
template <typename T, int COLS, int WARPS, int THREADS>
__device__ void store_sums(const float* red, float* __restrict__ W, int* __restrict__ counters,
                           T* __restrict__ C, int M, int N, int n0) {
  const int splits = gridDim.y;
  float* part = splits > 1 ? W + (static_cast<int64_t>(blockIdx.x) * splits + blockIdx.y) * M * COLS : nullptr;
  for (int e = threadIdx.x; e < M * COLS; e += THREADS) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) s += red[w * 16 * COLS + e];
    const int m = e / COLS, n = n0 + e % COLS;
    if (splits > 1) {
      part[e] = s;
    } else if (n < N) {
      C[static_cast<int64_t>(m) * N + n] = ksuite::from_float<T>(s);
    }
  }
  if (splits > 1) finish_splits<T, COLS>(W, counters, C, M, N, n0);
}

}  // namespace ksuite_gemm_split
