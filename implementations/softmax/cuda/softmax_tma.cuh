// softmax.cu's plans on clusters of CTAs whose slices arrive by bulk copy
// (cp.async.bulk): 4 and 5 (one row a cluster), 8-10 (persistent, the
// slices in shared memory), 18-22 and 29-33 (persistent, the slices in
// registers).  softmax.cu's header says what each plan is for.
#pragma once

#include <cooperative_groups.h>

#include "softmax_common.cuh"

namespace {

// ------------------------------------------------ cluster + TMA (bulk copy)

constexpr int kSoftmaxTmaThreads = 256;


// CTA `rank` of the cluster owns packs [rank * chunk, (rank + 1) * chunk) of
// its row and keeps them in dynamic shared memory as loaded: one read and one
// write of the row, the whole slice in flight from one bulk copy and no
// registers.  bf16 131072 columns (256 KB a row): 8 x 32 KB slices (plan 4,
// up to 7 CTAs an SM, so one CTA's load overlaps the others' math) or
// 4 x 64 KB (plan 5, 3 an SM).
template <typename T>
__global__ void __launch_bounds__(kSoftmaxTmaThreads)
softmax_tma_kernel(const T* __restrict__ x, T* __restrict__ y, int n, int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  namespace cg = cooperative_groups;
  constexpr int VEC = ksuite::vec16<T>();
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(128) uint4 tma_slice[];
  __shared__ __align__(8) uint64_t bar;
  __shared__ float2 red[32];
  __shared__ float2 partial;  // this CTA's (max, sum), read by the whole cluster
  const unsigned ctas = cluster.num_blocks();
  const int64_t row = blockIdx.x / ctas;
  const int p0 = static_cast<int>(cluster.block_rank()) * chunk;
  const int count = max(0, min(n / VEC - p0, chunk));
  const uint32_t bar_addr = smem_addr(&bar);
  if (threadIdx.x == 0) {
    mbar_init(bar_addr);
    mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t bytes = static_cast<uint32_t>(count) * 16u;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr), "r"(bytes)
                 : "memory");
    const char* src = reinterpret_cast<const char*>(x + row * n + int64_t(p0) * VEC);
    const uint32_t dst = smem_addr(tma_slice);
    constexpr uint32_t kPiece = 16384;
    for (uint32_t off = 0; off < bytes; off += kPiece) {
      const uint32_t size = min(kPiece, bytes - off);
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
              dst + off),
          "l"(src + off), "r"(size), "r"(bar_addr)
          : "memory");
    }
  }
  // Wait for the slice (phase 0 of the barrier).
  {
    uint32_t done = 0;
    while (!done) {
      asm volatile(
          "{.reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;}"
          : "=r"(done)
          : "r"(bar_addr)
          : "memory");
    }
  }
  // Running (max, sum) over this thread's packs, rescaled when a pack raises the max.
  float mx = -INFINITY, sum = 0.0f;
  for (int i = threadIdx.x; i < count; i += kSoftmaxTmaThreads) {
    float v[VEC];
    ksuite::raw_to_floats<T>(tma_slice[i], v);
    online_add(v, mx, sum);
  }
  const float2 cta = ksuite::group_reduce(make_float2(mx, sum), kSoftmaxTmaThreads, red, make_float2(-INFINITY, 0.0f),
                                          MergeMS{});
  if (threadIdx.x == 0) partial = cta;
  cluster.sync();  // every CTA's partial is written
  float2 tot = make_float2(-INFINITY, 0.0f);
  for (unsigned q = 0; q < ctas; ++q) tot = MergeMS{}(tot, *cluster.map_shared_rank(&partial, q));
  cluster.sync();  // no CTA leaves while another may still read its `partial`
  const float row_mx = tot.x, inv = 1.0f / tot.y;
  T* yr = y + row * n + int64_t(p0) * VEC;
  for (int i = threadIdx.x; i < count; i += kSoftmaxTmaThreads) {
    float v[VEC];
    ksuite::raw_to_floats<T>(tma_slice[i], v);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = ksuite::exp_approx(v[k] - row_mx) * inv;
    ksuite::st16_global(yr + i * VEC, ksuite::floats_to_raw<T>(v));
  }
#endif
}

// ------------------------- persistent cluster + TMA, double-buffered slices
//
// Plans 4/5 give a CTA one slice of one row: its load, reductions, cluster
// barrier and output pass run back to back, so an SM's loads stop while it
// computes.  Here a cluster stays resident and walks rows cluster_id,
// cluster_id + clusters, ...; each CTA keeps STAGES slice buffers and the
// bulk copies of the next STAGES - 1 rows are in flight while it reduces and
// writes the current one.  Bytes a row: load + store of the slice; with two
// 64 KB buffers an SM holds one CTA and 64-128 KB of loads in flight.
//
// Synchronisation a row: the stage's mbarrier (phase parity flips each time
// the stage wraps); the (max, sum) exchange without a cluster barrier (whose
// release is a MEMBAR.GPU: it waits for the thread's own stores of the
// previous row): each CTA pushes its pair into slot [i & 1][rank] of every
// CTA of the cluster with st.async, counted by that CTA's mbarrier
// xbar[i & 1] (ctas x 8 bytes a phase), and each reads the pairs from its own
// shared memory.  A CTA overwrites slot parity b for row i + 2 only after
// its xbar[b ^ 1] phase of row i + 1 completed, i.e. after every CTA sent
// row i + 1, which each does after a block barrier that follows its reads of
// row i's pairs.  One block barrier before a buffer is handed back to the
// copy engine (every thread has read it).

// Stores v at shared address `addr` of CTA `rank` of the cluster, counted as
// 8 bytes by that CTA's mbarrier at `bar` (the same offset in every CTA).
__device__ __forceinline__ void st_async_cluster(uint32_t addr, uint32_t bar, unsigned rank, float2 v) {
  uint32_t raddr, rbar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(raddr) : "r"(addr), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(bar), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(raddr),
               "f"(v.x), "f"(v.y), "r"(rbar)
               : "memory");
}

// Packs read from shared memory at once a thread (loads issued back to back).
constexpr int kPersistUnroll = 4;

// A pack of -inf in T's bits (fills the packs past a slice's end).
template <typename T>
__device__ __forceinline__ uint4 neg_inf_pack() {
  const uint32_t w = sizeof(T) == 4 ? 0xff800000u : std::is_same_v<T, c10::Half> ? 0xfc00fc00u : 0xff80ff80u;
  return make_uint4(w, w, w, w);
}

// Running max of 16-bit pairs: max.bf16x2 / max.f16x2 on a raw pack's four
// words (one instruction a pair, and no floats held).  The pair is widened
// once, after the last pack: a max of rounded values is the rounded max.
template <typename T>
__device__ __forceinline__ uint32_t pair_max(uint32_t acc, uint32_t w) {
  if constexpr (std::is_same_v<T, c10::Half>)
    asm("max.f16x2 %0, %0, %1;" : "+r"(acc) : "r"(w));
  else
    asm("max.bf16x2 %0, %0, %1;" : "+r"(acc) : "r"(w));
  return acc;
}

// This thread's (max, sum of exp(v - max)) over packs threadIdx.x,
// threadIdx.x + THREADS, ... of buf: one rescale per group of packs.
template <typename T, int THREADS>
__device__ __forceinline__ float2 slice_stats(const uint4* buf, int count) {
  constexpr int VEC = ksuite::vec16<T>(), U = kPersistUnroll;
  float mx = -INFINITY, sum = 0.0f;
#pragma unroll 1
  for (int base = threadIdx.x; base < count; base += U * THREADS) {
    uint4 r[U];  // all U shared loads issued before the first is used
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = base + u * THREADS < count ? buf[base + u * THREADS] : neg_inf_pack<T>();
    float v[U][VEC];
#pragma unroll
    for (int u = 0; u < U; ++u) ksuite::raw_to_floats<T>(r[u], v[u]);
    online_add(*reinterpret_cast<const float(*)[U * VEC]>(&v[0][0]), mx, sum);  // the U packs as one
  }
  return make_float2(mx, sum);
}

// Persistent cluster kernels (plans 8-10, 18-22): one thread initialises
// the STAGES slice barriers and the two (max, sum) exchange barriers, then a
// cluster barrier (every CTA's barriers are initialised before another
// stores to it).
template <int STAGES>
__device__ __forceinline__ void init_barriers(uint32_t bar0, uint32_t xbar0) {
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s)
      mbar_init(bar0 + 8u * s);
    mbar_init(xbar0);
    mbar_init(xbar0 + 8u);
    mbar_init_fence();
  }
  cooperative_groups::this_cluster().sync();
}

// A CTA's place in the persistent cluster kernels: CTA `rank` of a cluster
// of `ctas` owns packs [p0, p0 + count) of rows first, first + clusters, ...
// and copies them into STAGES buffers of `chunk` packs (`stride` bytes) at
// shared address buf0, buffer s counted by the mbarrier at bar0 + 8 s.  The
// constructor initialises the barriers (init_barriers) and thread 0 starts
// the copies of the first STAGES rows, buffer s for row s.
template <typename T, int STAGES>
struct ClusterRows {
  int ctas, rank, p0, count;
  int64_t clusters, first, row_bytes;
  uint32_t bytes, stride, buf0, bar0, xbar0;
  const char* src;

  __device__ __forceinline__ ClusterRows(const T* x, int64_t m, int n, int chunk, const uint4* slices,
                                         const uint64_t* bars, const uint64_t* xbar) {
    constexpr int VEC = ksuite::vec16<T>();
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    ctas = static_cast<int>(cluster.num_blocks());
    rank = static_cast<int>(cluster.block_rank());
    clusters = gridDim.x / ctas;
    first = blockIdx.x / ctas;
    p0 = rank * chunk;
    count = max(0, min(n / VEC - p0, chunk));
    bytes = static_cast<uint32_t>(count) * 16u;
    stride = static_cast<uint32_t>(chunk) * 16u;
    buf0 = smem_addr(slices);
    bar0 = smem_addr(bars);
    xbar0 = smem_addr(xbar);
    src = reinterpret_cast<const char*>(x + int64_t(p0) * VEC);
    row_bytes = int64_t(n) * sizeof(T);
    init_barriers<STAGES>(bar0, xbar0);
    if (threadIdx.x == 0) {
#pragma unroll
      for (int s = 0; s < STAGES; ++s) {
        const int64_t row = first + s * clusters;
        if (row < m) load(s, row);
      }
    }
  }

  // The bulk copy of this CTA's slice of `row` into buffer `stage`.
  __device__ __forceinline__ void load(int stage, int64_t row) const {
    tma_load(buf0 + stage * stride, src + row * row_bytes, bytes, bar0 + 8u * stage);
  }
};

// Sends this CTA's (max, sum) of iteration `it` into slot [it & 1][rank] of
// every CTA of the cluster (counted by xbar[it & 1]) and returns the row's,
// merged in rank order: every CTA gets the same row total.
__device__ __forceinline__ float2 exchange_stats(float2 cta, uint32_t it, uint32_t xbar0, int ctas, int rank,
                                                 float2 (*pairs)[8]) {
  const uint32_t slot = it & 1u, xb = xbar0 + 8u * slot;
  if (threadIdx.x == 0)
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(xb), "r"(8u * ctas) : "memory");
  if (threadIdx.x < ctas) st_async_cluster(smem_addr(&pairs[slot][rank]), xb, threadIdx.x, cta);
  mbar_wait_cluster(xb, (it >> 1) & 1u);
  float2 tot = pairs[slot][0];
  for (int q = 1; q < ctas; ++q) tot = MergeMS{}(tot, pairs[slot][q]);
  return tot;
}

template <typename T, int STAGES, int THREADS, int MIN_BLOCKS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_tma_persistent_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t m, int n, int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  namespace cg = cooperative_groups;
  constexpr int VEC = ksuite::vec16<T>(), U = kPersistUnroll;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(128) uint4 slices[];  // STAGES buffers of `chunk` packs
  __shared__ __align__(8) uint64_t bars[STAGES];  // slice loads
  __shared__ __align__(8) uint64_t xbar[2];       // (max, sum) pairs of rows of even / odd iteration
  __shared__ float2 red[32];
  __shared__ float2 pairs[2][8];  // [iteration & 1][rank]: every CTA's (max, sum) of the row
  const ClusterRows<T, STAGES> cr(x, m, n, chunk, slices, bars, xbar);
  const int ctas = cr.ctas, rank = cr.rank, p0 = cr.p0, count = cr.count;
  const int64_t clusters = cr.clusters, first = cr.first;
  int stage = 0;
  uint32_t phase = 0;
  uint32_t it = 0;  // iteration: pair slot it & 1, that slot's phase (it >> 1) & 1
#pragma unroll 1
  for (int64_t row = first; row < m; row += clusters, ++it) {
    mbar_wait(cr.bar0 + 8u * stage, phase);
    const uint4* buf = slices + int64_t(stage) * chunk;
    const float2 own = slice_stats<T, THREADS>(buf, count);
    const float2 cta = ksuite::group_reduce(own, THREADS, red, make_float2(-INFINITY, 0.0f), MergeMS{});
    const float2 tot = exchange_stats(cta, it, cr.xbar0, ctas, rank, pairs);
    const float row_mx = tot.x, inv = 1.0f / tot.y;
    T* yr = y + row * n + int64_t(p0) * VEC;
#pragma unroll 1
    for (int base = threadIdx.x; base < count; base += U * THREADS) {
      uint4 r[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (base + u * THREADS < count) r[u] = buf[base + u * THREADS];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = base + u * THREADS;
        if (i < count) {
          float v[VEC];
          ksuite::raw_to_floats<T>(r[u], v);
#pragma unroll
          for (int k = 0; k < VEC; ++k) v[k] = ksuite::exp_approx(v[k] - row_mx) * inv;
          ksuite::st16_global(yr + int64_t(i) * VEC, ksuite::floats_to_raw<T>(v));
        }
      }
    }
    const int64_t next = row + STAGES * clusters;
    if (next < m) {
      __syncthreads();  // every thread has read this buffer: the copy engine may refill it
      if (threadIdx.x == 0) cr.load(stage, next);
    }
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1u;
    }
  }
  cluster.sync();  // no CTA leaves while stores to it may be in flight
#endif
}

// ------------------ persistent cluster + TMA, the slice held in registers
//
// As softmax_tma_persistent_kernel (same buffers, barriers and (max, sum)
// exchange), except that each thread copies packs threadIdx.x + j * THREADS
// (j < KP) of the slice to registers once and the buffer is refilled with
// row + STAGES * clusters right after the block barrier that follows that
// copy; the thread keeps exp(v - its max) and scales it by
// exp(its max - row max) / row sum for the output.
//
// HALF_E (16-bit T, plans 29-33): each pack's exps are kept as 4 words of
// half2 instead of 8 floats (relative error 2^-11, a quarter of a bf16
// rounding), so a CTA of 256 threads x 8 packs fits 3 an SM.  Clusters of 8
// CTAs two an SM fill only 240 of the H200's 264 CTA slots (a GPC holds 30),
// hence plans 30-33: bf16 131072 on clusters of 4 (30, 31) or 2 (32, 33).
template <typename T, int STAGES, int THREADS, int KP, int MIN_BLOCKS, bool HALF_E = false>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_tma_regs_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t m, int n, int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  namespace cg = cooperative_groups;
  constexpr int VEC = ksuite::vec16<T>();
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(128) uint4 slices[];  // STAGES buffers of `chunk` packs
  __shared__ __align__(8) uint64_t bars[STAGES];
  __shared__ __align__(8) uint64_t xbar[2];
  __shared__ float2 red[32];
  __shared__ float2 pairs[2][8];
  const ClusterRows<T, STAGES> cr(x, m, n, chunk, slices, bars, xbar);
  const int ctas = cr.ctas, rank = cr.rank, p0 = cr.p0, count = cr.count;
  const int64_t clusters = cr.clusters, first = cr.first;
  int stage = 0;
  uint32_t phase = 0;
  uint32_t it = 0;
#pragma unroll 1
  for (int64_t row = first; row < m; row += clusters, ++it) {
    mbar_wait(cr.bar0 + 8u * stage, phase);
    const uint4* buf = slices + int64_t(stage) * chunk;
    constexpr bool kHalfE = HALF_E && sizeof(T) == 2;  // (the launcher runs HALF_E for 16-bit T only)
    float e[kHalfE ? 1 : KP][VEC];  // kHalfE: one pack's floats at a time, the exps kept in raw
    uint4 raw[KP];
#pragma unroll
    for (int j = 0; j < KP; ++j) {
      const int i = threadIdx.x + j * THREADS;
      raw[j] = i < count ? buf[i] : neg_inf_pack<T>();
    }
    if constexpr (!kHalfE) {
#pragma unroll
      for (int j = 0; j < KP; ++j) ksuite::raw_to_floats<T>(raw[j], e[j]);
    }
    __syncthreads();  // every thread has its packs: the copy engine may refill the buffer
    const int64_t next = row + STAGES * clusters;
    if (threadIdx.x == 0 && next < m) cr.load(stage, next);
    float mx = -INFINITY;
    if constexpr (kHalfE) {
      uint32_t acc = raw[0].x;
#pragma unroll
      for (int j = 0; j < KP; ++j) {
        acc = pair_max<T>(pair_max<T>(acc, raw[j].x), raw[j].y);
        acc = pair_max<T>(pair_max<T>(acc, raw[j].z), raw[j].w);
      }
      float lo, hi;
      ksuite::unpack2(acc, lo, hi, (T*)nullptr);
      mx = fmaxf(lo, hi);
    } else {
#pragma unroll
      for (int j = 0; j < KP; ++j) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, e[j][k]);
      }
    }
    const float base = mx == -INFINITY ? 0.0f : mx;  // no packs (or all -inf): exps of 0, not NaN
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < KP; ++j) {
      float* f = e[kHalfE ? 0 : j];
      if constexpr (kHalfE) ksuite::raw_to_floats<T>(raw[j], *reinterpret_cast<float(*)[VEC]>(f));
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        f[k] = ksuite::exp_approx(f[k] - base);
        sum += f[k];
      }
      if constexpr (kHalfE) raw[j] = ksuite::floats_to_raw<c10::Half>(*reinterpret_cast<float(*)[VEC]>(f));
    }
    const float2 cta = ksuite::group_reduce(make_float2(mx, sum), THREADS, red, make_float2(-INFINITY, 0.0f),
                                            MergeMS{});
    const float2 tot = exchange_stats(cta, it, cr.xbar0, ctas, rank, pairs);
    const float scale = tot.x == -INFINITY ? kNoSoftmax
                        : mx == -INFINITY  ? 0.0f
                                           : ksuite::exp_approx(base - tot.x) / tot.y;
    T* yr = y + row * n + int64_t(p0) * VEC;
#pragma unroll
    for (int j = 0; j < KP; ++j) {
      const int i = threadIdx.x + j * THREADS;
      if (i < count) {
        float* f = e[kHalfE ? 0 : j];
        if constexpr (kHalfE) ksuite::raw_to_floats<c10::Half>(raw[j], *reinterpret_cast<float(*)[VEC]>(f));
#pragma unroll
        for (int k = 0; k < VEC; ++k) f[k] *= scale;
        ksuite::st16_global(yr + int64_t(i) * VEC, ksuite::floats_to_raw<T>(*reinterpret_cast<float(*)[VEC]>(f)));
      }
    }
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1u;
    }
  }
  cluster.sync();  // no CTA leaves while stores to it may be in flight
#endif
}

}  // namespace
