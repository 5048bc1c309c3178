// softmax.cu's plans 6 (a cluster whose CTAs load their slices with
// 16-byte register loads, any alignment) and 7 (a block a row, the row
// read twice: rows longer than a cluster's shared memory).
#pragma once

#include <cooperative_groups.h>

#include "softmax_common.cuh"

namespace {

// ----------------------------------------- cluster, register loads (any VEC)

constexpr int kSoftmaxClusterThreads = 512;

// 3 CTAs an SM (64 KB slices): <= 40 registers a thread.
template <typename T, int VEC>
__global__ void __launch_bounds__(kSoftmaxClusterThreads, 3)
softmax_cluster_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, int64_t chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();
#else
  namespace cg = cooperative_groups;
  using P = Pack<T, VEC>;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) unsigned char slice_raw[];
  P* slice = reinterpret_cast<P*>(slice_raw);  // consecutive threads, consecutive packs: no conflicts
  __shared__ float2 red[32];
  __shared__ float2 partial;
  const unsigned ctas = cluster.num_blocks();
  const int64_t row = blockIdx.x / ctas;
  const int64_t p0 = int64_t(cluster.block_rank()) * chunk;
  const int64_t count = std::max<int64_t>(0, std::min<int64_t>(n / VEC - p0, chunk));
  const P* xr = reinterpret_cast<const P*>(x + row * n) + p0;
  P* yr = reinterpret_cast<P*>(y + row * n) + p0;

  // kInFlight packs a thread loaded (predicated, back to back) before any is
  // stored to shared memory: 4 x 16 B in flight a thread, 32 KB a CTA and
  // 96 KB an SM at 3 CTAs (64 KB slices), not one pack per round trip.
  // 4, not more: the 40 registers a thread that 3 CTAs of 512 leave.
  constexpr int kInFlight = 4;
  using Raw = ksuite::RawPack<T, VEC>;
  const int cnt = static_cast<int>(count);
  float mx = -INFINITY;
#pragma unroll 1
  for (int base = threadIdx.x; base < cnt; base += kInFlight * kSoftmaxClusterThreads) {
    Raw raw[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kSoftmaxClusterThreads;
      raw[u] = ksuite::ld_pack_if<T, VEC, true, false>(reinterpret_cast<const T*>(xr + i), i < cnt);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kSoftmaxClusterThreads;
      if (i < cnt) {
        if constexpr (VEC == 1) {
          if constexpr (sizeof(T) == 4) {
            reinterpret_cast<uint32_t*>(slice)[i] = raw[u];
          } else {
            reinterpret_cast<uint16_t*>(slice)[i] = static_cast<uint16_t>(raw[u]);
          }
        } else {
          reinterpret_cast<uint4*>(slice)[i] = raw[u];
        }
        float v[VEC];
        ksuite::raw_pack_to_floats<T, VEC>(raw[u], v);
#pragma unroll
        for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, v[k]);
      }
    }
  }
  float sum = 0.0f;
  if (mx != -INFINITY) {
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) sum += ksuite::exp_approx(to_float(slice[i].v[k]) - mx);
    }
  }
  const float2 cta = ksuite::group_reduce(make_float2(mx, sum), kSoftmaxClusterThreads, red,
                                          make_float2(-INFINITY, 0.0f), MergeMS{});
  if (threadIdx.x == 0) partial = cta;
  cluster.sync();
  float2 tot = make_float2(-INFINITY, 0.0f);
  for (unsigned q = 0; q < ctas; ++q) tot = MergeMS{}(tot, *cluster.map_shared_rank(&partial, q));
  cluster.sync();
  const float row_mx = tot.x, inv = 1.0f / tot.y;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    P out;
#pragma unroll
    for (int k = 0; k < VEC; ++k)
      out.v[k] = ksuite::from_float<T>(ksuite::exp_approx(to_float(slice[i].v[k]) - row_mx) * inv);
    yr[i] = out;
  }
#endif
}

// ------------------------------------------------------------- streaming

// One 1024-thread block a row, grid-stride over rows; the row is read twice.
template <typename T, int VEC>
__global__ void __launch_bounds__(1024)
softmax_stream_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t m, int64_t n) {
  __shared__ float2 red[32];
  const int64_t packs = n / VEC;
  for (int64_t row = blockIdx.x; row < m; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    float mx = -INFINITY, sum = 0.0f;
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      float v[VEC];
      ksuite::load_floats<T, VEC, false>(xr + i * VEC, v);
      online_add(v, mx, sum);
    }
    const float2 tot = ksuite::group_reduce(make_float2(mx, sum), 1024, red, make_float2(-INFINITY, 0.0f),
                                            MergeMS{});
    const float row_mx = tot.x, inv = 1.0f / tot.y;
    // Backwards: the tail of the row was read last and is the likeliest L2 hit.
#pragma unroll 4
    for (int64_t i = packs - 1 - threadIdx.x; i >= 0; i -= blockDim.x) {
      float v[VEC];
      ksuite::load_floats<T, VEC, false>(xr + i * VEC, v);
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = ksuite::exp_approx(v[k] - row_mx) * inv;
      ksuite::store_floats<T, VEC>(yr + i * VEC, v);
    }
  }
}

}  // namespace
