// softmax.cu's plans 6 (a cluster whose CTAs load their slices with
// register loads into shared memory: 16-byte packs on 16-byte rows, one
// element a load otherwise), 36 (the same cluster over rows at any
// alignment: scalar head and tail, 16-byte body) and 7 (a block a row, the
// row read twice: rows longer than a cluster's shared memory).
#pragma once

#include <cooperative_groups.h>

#include "softmax_access.cuh"
#include "softmax_common.cuh"

namespace {

// ----------------------------------------- cluster, register loads (any VEC)

constexpr int kSoftmaxClusterThreads = 512;

// CTA `rank` of a row's cluster owns packs [rank * chunk, (rank + 1) *
// chunk) of the row: loaded into its shared memory slice, its (max, sum of
// exp) merged with the other CTAs' through distributed shared memory, then
// written from the slice.  3 CTAs an SM (64 KB slices): <= 40 registers a
// thread.
//
// SPLIT (plan 36; VEC = 16 / sizeof(T)): rows whose width is not a multiple
// of VEC start at every misalignment in turn, which plan 6 (VEC = 1) takes
// one element a load.  Here each row is split at its 16-byte boundaries
// (ksuite::split_row): the body's whole packs are the packs the CTAs divide
// (16-byte loads, slices and stores, as plan 6 on 16-byte rows), and the
// head and tail (< 2 VEC elements) are one element each on the first
// threads of rank 0, loaded before its body packs, in its (max, sum) and
// stored with its slice.  x and y must be equally misaligned (the launcher
// checks), so one split serves both.  A row's body is at most n / VEC packs
// (one fewer where its head and tail reach VEC elements together): the
// launcher sizes the slices for n / VEC.
template <typename T, int VEC, bool SPLIT = false>
__global__ void __launch_bounds__(kSoftmaxClusterThreads, 3)
softmax_cluster_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, int64_t chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();
#else
  static_assert(!SPLIT || VEC * sizeof(T) == 16, "the split body is 16-byte packs");
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
  int64_t head = 0, body = n / VEC;
  // SPLIT: this thread's head or tail element (`edge`: it has one; -inf where
  // not), `eoff` elements from the body's start (negative in the head).
  bool edge = false;
  int eoff = 0;
  float ev = -INFINITY;
  if constexpr (SPLIT) {
    const ksuite::RowSplit split = ksuite::split_row(x + row * n, static_cast<int>(n));
    head = split.head;
    body = split.body;
    edge = cluster.block_rank() == 0 && static_cast<int>(threadIdx.x) < split.edges;
    eoff = split.edge_col(static_cast<int>(threadIdx.x)) - split.head;
  }
  const int64_t count = std::max<int64_t>(0, std::min<int64_t>(body - p0, chunk));
  const P* xr = reinterpret_cast<const P*>(x + row * n + head) + p0;
  P* yr = reinterpret_cast<P*>(y + row * n + head) + p0;
  // (rank 0, the edges' CTA, has p0 == 0: xr and yr are the body's start)
  if constexpr (SPLIT)
    ev = softmax_access::ld_elem_if<T, softmax_access::kNc>(reinterpret_cast<const T*>(xr) + eoff, edge);

  // kInFlight packs a thread loaded (predicated, back to back) before any is
  // stored to shared memory: 4 x 16 B in flight a thread, 32 KB a CTA and
  // 96 KB an SM at 3 CTAs (64 KB slices), not one pack per round trip.
  // 4, not more: the 40 registers a thread that 3 CTAs of 512 leave.
  constexpr int kInFlight = 4;
  using Raw = ksuite::RawPack<T, VEC>;
  const int cnt = static_cast<int>(count);
  float mx = ev;
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
  // Pack i of the slice as floats: one 16-byte shared load a pack (a 16-bit
  // Pack read member by member is VEC 2-byte loads).
  auto slice_floats = [&](int64_t i, float (&v)[VEC]) {
    if constexpr (VEC == 1) {
      v[0] = to_float(slice[i].v[0]);
    } else {
      ksuite::raw_to_floats<T>(reinterpret_cast<const uint4*>(slice)[i], v);
    }
  };
  float sum = 0.0f;
  if (mx != -INFINITY) {
    if constexpr (SPLIT) sum = ksuite::exp_approx(ev - mx);  // 0 for ev = -inf
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      float v[VEC];
      slice_floats(i, v);
#pragma unroll
      for (int k = 0; k < VEC; ++k) sum += ksuite::exp_approx(v[k] - mx);
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
  if constexpr (SPLIT)
    softmax_access::st_elem_if(reinterpret_cast<T*>(yr) + eoff, ksuite::exp_approx(ev - row_mx) * inv, edge);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    float v[VEC];
    slice_floats(i, v);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = ksuite::exp_approx(v[k] - row_mx) * inv;
    if constexpr (VEC == 1) {
      ksuite::store_floats<T, 1>(reinterpret_cast<T*>(yr + i), v);
    } else {
      ksuite::st16_global(yr + i, ksuite::floats_to_raw<T>(v));
    }
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
