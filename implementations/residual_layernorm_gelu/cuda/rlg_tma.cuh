// residual_layernorm_gelu.cu's plans 8-17: persistent CTAs or clusters fed
// by bulk copies (TMA), the next row's x and r in flight while this one is
// reduced and written.
#pragma once

#include <cooperative_groups.h>

#include "rlg_common.cuh"
#include "rlg_rows.cuh"

namespace {

// ------------- plans 8 and 9: persistent CTAs, the next row prefetched by TMA
//
// One 1024-thread CTA an SM (or a cluster of 2..8 CTAs on different SMs a
// row, plan 9), grid-stride over rows.  Shared memory holds the CTA's slice
// of the raw x and r of one row (chunk 16-byte packs of each), filled by
// cp.async.bulk and counted by one mbarrier.  Per row: wait for the slice,
// copy this thread's packs to registers as h = x + r, block barrier, thread
// 0 issues the bulk copies of the next row into the same buffer (its loads
// overlap this row's statistics, GELU and stores), then exact two-pass
// statistics of h from registers and the output with 16-byte stores.  w and
// b come from global memory (L1/L2 hits); the output pass walks the packs
// forwards on even rows and backwards on odd ones, so that the columns it
// read last (still in L1, which is ~124 KB next to a 128 KB slice) come first.
//
// Cluster (plan 9): each CTA's partial sum and partial sum of squared
// deviations go to every CTA of the cluster by st.async into slot
// [round][rank] of its `vals`, counted by that CTA's mbarrier xbar[round]
// (round 0: sums, 1: squared deviations; one phase of each a row).  A CTA
// writes slot round of row i + 1 only after its xbar[round ^ 1] phase of the
// previous round completed, i.e. after every CTA sent that round, which each
// does after a block barrier (in rlg_row_sum) that follows all its threads'
// reads of the slot.  Every CTA adds the partials in rank order: the same
// mean and rstd everywhere.
//
// Plans 10 and 11 are plan 9 with 512- and 256-thread CTAs, two and four an
// SM (the same 64 registers a thread, the same 128 KB of slices an SM): a
// row is split over twice or four times as many CTAs, and an SM holds CTAs
// of two or four rows, so one row's loads, reductions and cluster exchanges
// overlap another's math, where plan 8/9's single CTA idles through them.
constexpr int kTmaThreads = 1024;
constexpr int kTmaPacks = 4;  // packs a thread: 1024 x 4 x 16 B = 64 KB of x and 64 KB of r at most

// The sum over the cluster of every CTA's `v` (plan 9's exchange, above).
__device__ __forceinline__ float cluster_total(float v, int ctas, int rank, float* vals, uint32_t xbar,
                                               uint32_t parity) {
  if (threadIdx.x == 0) mbar_expect(xbar, 4u * static_cast<uint32_t>(ctas));
  if (static_cast<int>(threadIdx.x) < ctas) {
    uint32_t raddr, rbar;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(raddr) : "r"(smem_addr(vals + rank)), "r"(threadIdx.x));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(xbar), "r"(threadIdx.x));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(raddr), "f"(v),
                 "r"(rbar)
                 : "memory");
  }
  mbar_wait_cluster(xbar, parity);
  float total = vals[0];
  for (int q = 1; q < ctas; ++q) total += vals[q];
  return total;
}

// Plans 16 and 17's exchange: each CTA's (sum, squared deviations from its
// own mean) of its g elements goes to slot [rank] of every CTA's `pairs` by
// one st.async, counted by that CTA's mbarrier `xbar`; every CTA then merges the
// slots in rank order (Chan's formula for a group of k g elements and one of
// g: Q += (Sa - k Sb)^2 / (k (k + 1) g)), so all get the same bits.  Rows
// alternate between two slot sets and two mbarriers: a CTA writes a set for
// row i + 1 only after every CTA sent row i, which each does after the block
// barriers that follow its reads of that set in row i - 1.
__device__ __forceinline__ void cluster_merge(float& s, float& q, float g, int ctas, int rank, float2* pairs,
                                              uint32_t xbar, uint32_t parity) {
  if (threadIdx.x == 0) mbar_expect(xbar, 8u * static_cast<uint32_t>(ctas));
  if (static_cast<int>(threadIdx.x) < ctas) {
    uint32_t raddr, rbar;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(raddr) : "r"(smem_addr(pairs + rank)), "r"(threadIdx.x));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(xbar), "r"(threadIdx.x));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(raddr),
                 "f"(s), "f"(q), "r"(rbar)
                 : "memory");
  }
  mbar_wait_cluster(xbar, parity);
  const float2 first = pairs[0];
  s = first.x;
  q = first.y;
  for (int k = 1; k < ctas; ++k) {
    const float2 o = pairs[k];
    const float kf = static_cast<float>(k), d = fmaf(-kf, o.x, s);
    q = fmaf(d * d, ksuite::rcp_approx(kf * (kf + 1.0f) * g), q + o.y);
    s += o.x;
  }
}

// 16 bytes at p by ld.global.nc (L1-allocating), ordered after `dep` is
// computed: ksuite::ld16_if's plain asm is loop-invariant for w and b, and the
// compiler hoists every pack's loads out of the row loop or up into the
// reductions (32 more registers live next to h: spills).  The input operand
// ties each load to a value of the step before it.
__device__ __forceinline__ uint4 ld_wb(const void* p, float dep) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4]; // %5"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "f"(dep));
  return v;
}

// y = gelu((h * rstd + off) * w + b) for this thread's packs (h minus the
// row mean, or minus the thread's own mean with off = (that - row mean) *
// rstd: plans 14-17), packs in reverse order when REV.  c0: the column of
// this thread's pack 0; y points at it in the output row.  Pack q's w and b are loaded
// once pack p's (the one before) have arrived, during p's GELU: two packs of
// w and b in flight at most.  Packs past the slice load columns 0..VEC-1 of
// w and b (in bounds) and store nothing.
template <typename T, int PACKS, bool REV, int THREADS>
__device__ __forceinline__ void tma_output(float (&h)[PACKS][ksuite::vec16<T>()], const bool (&ok)[PACKS],
                                           float rstd, float off, const T* w, const T* b, int64_t c0, T* y) {
  constexpr int VEC = ksuite::vec16<T>(), STRIDE = THREADS * VEC;
  constexpr int P0 = REV ? PACKS - 1 : 0;
  uint4 rw = ld_wb(w + (ok[P0] ? c0 + P0 * STRIDE : 0), rstd);
  uint4 rb = ld_wb(b + (ok[P0] ? c0 + P0 * STRIDE : 0), rstd);
#pragma unroll
  for (int j = 0; j < PACKS; ++j) {
    const int p = REV ? PACKS - 1 - j : j;
    const uint4 cw = rw, cb = rb;
    if (j + 1 < PACKS) {
      const int q = REV ? p - 1 : p + 1;
      rw = ld_wb(w + (ok[q] ? c0 + q * STRIDE : 0), __uint_as_float(cw.x));
      rb = ld_wb(b + (ok[q] ? c0 + q * STRIDE : 0), __uint_as_float(cb.x));
    }
    float wv[VEC], bv[VEC];
    ksuite::raw_to_floats<T>(cw, wv);
    ksuite::raw_to_floats<T>(cb, bv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] = ksuite::gelu_out<T>(fmaf(fmaf(h[p][k], rstd, off), wv[k], bv[k]));
    if (ok[p]) ksuite::st16_global(y + p * STRIDE, ksuite::floats_to_raw<T>(h[p]));
  }
}

// tma_output with this CTA's slices of w and b in shared memory (plan 12):
// pack i of the slice at ws[i] and bs[i].  t: this thread's first
// pack of the slice; y points at its first column in the output row.
template <typename T, int PACKS, int THREADS>
__device__ __forceinline__ void smem_wb_output(float (&h)[PACKS][ksuite::vec16<T>()], const bool (&ok)[PACKS],
                                               float rstd, float off, const uint4* ws, const uint4* bs, int t,
                                               T* y) {
  constexpr int VEC = ksuite::vec16<T>(), STRIDE = THREADS * VEC;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    if (!ok[p]) continue;
    float wv[VEC], bv[VEC];
    ksuite::raw_to_floats<T>(ws[t + p * THREADS], wv);
    ksuite::raw_to_floats<T>(bs[t + p * THREADS], bv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] = ksuite::gelu_out<T>(fmaf(fmaf(h[p][k], rstd, off), wv[k], bv[k]));
    ksuite::st16_global(y + p * STRIDE, ksuite::floats_to_raw<T>(h[p]));
  }
}

// Butterfly levels over lane offsets 1 .. LANES / 2 of merge_row_stats,
// merging groups of G, 2 G, ... elements.
template <int LANES, int G>
__device__ __forceinline__ void merge_lanes(float& s, float& q) {
#pragma unroll
  for (int off = 1, g = G; off < LANES; off <<= 1, g <<= 1) {
    const float so = __shfl_xor_sync(0xffffffffu, s, off), qo = __shfl_xor_sync(0xffffffffu, q, off);
    const float d = s - so;
    q = fmaf(d * d, 0.5f / static_cast<float>(g), q + qo);
    s += so;
  }
}

// The row's sum and sum of squared deviations from its mean, in one
// reduction (plans 14-17).  On entry each thread holds s, the sum of its
// ELEMS elements, and q, the sum of their squared deviations from its own mean
// (s / ELEMS).  Two groups of g elements each merge exactly (Chan, Golub and
// LeVeque): S = Sa + Sb, Q = Qa + Qb + (Sa - Sb)^2 / (2 g), symmetric in a and
// b, so that every lane of a butterfly ends with the same bits.  The shuffle
// levels and then the warps (through red, one barrier) merge groups of equal
// size, so every thread must hold ELEMS elements of the row.
template <int THREADS, int ELEMS>
__device__ __forceinline__ void merge_row_stats(float& s, float& q, float (&red)[2][32]) {
  constexpr int WARPS = THREADS / 32;
  static_assert(THREADS % 32 == 0 && (WARPS & (WARPS - 1)) == 0 && WARPS <= 32);
  merge_lanes<32, ELEMS>(s, q);
  if constexpr (WARPS > 1) {
    const int lane = threadIdx.x & 31;
    if (lane == 0) {
      red[0][threadIdx.x >> 5] = s;
      red[1][threadIdx.x >> 5] = q;
    }
    __syncthreads();
    s = red[0][lane & (WARPS - 1)];
    q = red[1][lane & (WARPS - 1)];
    merge_lanes<WARPS, 32 * ELEMS>(s, q);
  }
}

// Special registers read afresh (volatile: not hoisted out of the row loop),
// so that what derives from them is recomputed each row instead of held in
// registers next to h.
__device__ __forceinline__ int fresh_tid() {
  int v;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(v));
  return v;
}
template <bool CLUSTER>
__device__ __forceinline__ int fresh_rank() {
  int v = 0;
  if constexpr (CLUSTER) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(v));
  return v;
}
template <bool CLUSTER>
__device__ __forceinline__ int fresh_ctas() {
  int v = 1;
  if constexpr (CLUSTER) asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(v));
  return v;
}

// Thread 0: arms `bar` for this CTA's x and r slices of `row` and copies
// them, x to the slice buffer, r chunk packs after it.
template <typename T, bool CLUSTER>
__device__ __forceinline__ void tma_slice(const T* x, const T* r, uint32_t row, int n, int chunk, uint32_t buf,
                                          uint32_t bar) {
  constexpr int VEC = ksuite::vec16<T>();
  const int p0 = fresh_rank<CLUSTER>() * chunk;
  const uint32_t bytes = static_cast<uint32_t>(max(0, min(n / VEC - p0, chunk))) * 16u;
  const int64_t off = int64_t(row) * n + int64_t(p0) * VEC;
  mbar_expect(bar, 2u * bytes);
  bulk_copy(buf, reinterpret_cast<const char*>(x + off), bytes, bar);
  bulk_copy(buf + static_cast<uint32_t>(chunk) * 16u, reinterpret_cast<const char*>(r + off), bytes, bar);
}

// Thread 0 (plan 12): arms `bar` for this CTA's slices of w and b
// and copies them, w to wb, b chunk packs after it.
template <typename T, bool CLUSTER>
__device__ __forceinline__ void tma_wb(const T* w, const T* b, int n, int chunk, uint32_t wb, uint32_t bar) {
  constexpr int VEC = ksuite::vec16<T>();
  const int p0 = fresh_rank<CLUSTER>() * chunk;
  const uint32_t bytes = static_cast<uint32_t>(max(0, min(n / VEC - p0, chunk))) * 16u;
  mbar_expect(bar, 2u * bytes);
  bulk_copy(wb, reinterpret_cast<const char*>(w + int64_t(p0) * VEC), bytes, bar);
  bulk_copy(wb + static_cast<uint32_t>(chunk) * 16u, reinterpret_cast<const char*>(b + int64_t(p0) * VEC), bytes,
            bar);
}

// CTA `rank` of its cluster (rank 0 of 1 without CLUSTER) owns packs
// [rank * chunk, rank * chunk + count) of every row it visits; thread t holds
// packs t + j * THREADS (j < PACKS) of that slice.  m < 2^31 (rlg_run checks).
// Only the row and the iteration are carried from row to row: the rest is
// recomputed from parameters and special registers (64 registers, h takes 32).
// RING (plan 12; one CTA an SM): two x/r slice buffers, row i + 2 steps
// refilling the one row i was copied out of, and the w/b slices after them.
// Plans 13, 14: PACKS 8 (one 512-thread CTA an SM).  ONE_ROUND (14-17):
// merge_row_stats (and cluster_merge) when the row fills every thread's
// packs of every CTA; else the two-pass statistics.
template <typename T, int PACKS, bool CLUSTER, int THREADS, bool RING = false, bool ONE_ROUND = false>
__global__ void __launch_bounds__(THREADS, RING ? 1 : (kTmaThreads * kTmaPacks) / (THREADS * PACKS))
rlg_tma_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
               const T* __restrict__ b, T* __restrict__ y, uint32_t m, int n, int chunk, float eps, float inv_n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  constexpr int VEC = ksuite::vec16<T>();
  // chunk packs of x, then chunk packs of r (RING: two such buffers, then w's and b's chunk packs)
  extern __shared__ __align__(128) uint4 xr_slice[];
  __shared__ __align__(8) uint64_t bar[2];           // the slices' bulk copies (RING: one a buffer)
  __shared__ __align__(8) uint64_t wbar;             // RING: the w and b slices
  __shared__ __align__(8) uint64_t xbar[2];          // plan 9: partials of round 0 / 1
  __shared__ float red[2][32];
  __shared__ float vals[2][8];  // plan 9: [round][rank] every CTA's partial of the row
  __shared__ float2 pairs[2][8];  // plans 16, 17: [row parity][rank] every CTA's (sum, squares) of the row
  const uint32_t buf = smem_addr(xr_slice), bar0 = smem_addr(bar), xbar0 = smem_addr(xbar);
  const uint32_t first = blockIdx.x / static_cast<uint32_t>(fresh_ctas<CLUSTER>());
  if (threadIdx.x == 0) {
    mbar_init(bar0);
    if constexpr (RING) {
      mbar_init(bar0 + 8u);
      mbar_init(smem_addr(&wbar));
    }
    if constexpr (CLUSTER) {
      mbar_init(xbar0);
      mbar_init(xbar0 + 8u);
    }
    mbar_init_fence();
  }
  if constexpr (CLUSTER) {
    cooperative_groups::this_cluster().sync();  // every CTA's barriers are initialised before another sends to them
  } else {
    __syncthreads();
  }
  // RING: the buffers and the w/b slices at byte offsets 0, 32 chunk, 64 chunk
  const uint32_t ring = 32u * static_cast<uint32_t>(chunk);
  if (threadIdx.x == 0 && first < m) {
    tma_slice<T, CLUSTER>(x, r, first, n, chunk, buf, bar0);
    if constexpr (RING) {
      const uint32_t step = gridDim.x / static_cast<uint32_t>(fresh_ctas<CLUSTER>());
      if (first + step < m) tma_slice<T, CLUSTER>(x, r, first + step, n, chunk, buf + ring, bar0 + 8u);
      tma_wb<T, CLUSTER>(w, b, n, chunk, buf + 2u * ring, smem_addr(&wbar));
    }
  }
  if constexpr (RING) {
    if (first < m) mbar_wait(smem_addr(&wbar), 0u);
  }
  uint32_t it = 0;
#pragma unroll 1
  for (uint32_t row = first; row < m; ++it) {
    // rows in flight: one a cluster, RING two (unsigned: row + 2 step < 2^32 for m < 2^31)
    const uint32_t step = gridDim.x / static_cast<uint32_t>(fresh_ctas<CLUSTER>());
    const uint32_t slot = RING ? (it & 1u) : 0u;  // this row's buffer; RING: its use (it >> 1) sets the parity
    mbar_wait(bar0 + 8u * slot, RING ? (it >> 1) & 1u : it & 1u);
    const uint4* xs = xr_slice + 2 * static_cast<int>(slot) * chunk;
    int t = fresh_tid();
    int count = max(0, min(n / VEC - fresh_rank<CLUSTER>() * chunk, chunk));
    bool ok[PACKS];
#pragma unroll
    for (int p = 0; p < PACKS; ++p) ok[p] = t + p * THREADS < count;
    float h[PACKS][VEC];
    {
      uint4 rx[PACKS], rr[PACKS];  // every shared load issued before the first use
#pragma unroll
      for (int p = 0; p < PACKS; ++p) {
        const int i = t + p * THREADS;
        rx[p] = ok[p] ? xs[i] : make_uint4(0u, 0u, 0u, 0u);
        rr[p] = ok[p] ? xs[chunk + i] : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int p = 0; p < PACKS; ++p) {
        float rv[VEC];
        ksuite::raw_to_floats<T>(rx[p], h[p]);
        ksuite::raw_to_floats<T>(rr[p], rv);
#pragma unroll
        for (int k = 0; k < VEC; ++k) h[p][k] += rv[k];
      }
    }
    __syncthreads();  // every thread has its packs: the copy engine may refill the slice
    {
      const uint32_t next = row + (RING ? 2u : 1u) * step;
      if (t == 0 && next < m) tma_slice<T, CLUSTER>(x, r, next, n, chunk, buf + slot * ring, bar0 + 8u * slot);
    }
    // Exact two-pass statistics (packs past the slice are zeros: no effect on the sum).
    float acc[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
#pragma unroll
    for (int p = 0; p < PACKS; ++p)
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] += h[p][k];
    pairwise_sum(acc);
    float rstd, off = 0.0f;
    if (ONE_ROUND && n / VEC == fresh_ctas<CLUSTER>() * THREADS * PACKS) {  // uniform over the cluster
      // Each thread's own two-pass statistics, then one merge for the row.
      constexpr float kInvElems = 1.0f / static_cast<float>(PACKS * VEC);
      float s = acc[0];
      const float own = s * kInvElems;
      center_and_square<VEC>(h, ok, own, acc);
      float q = acc[0];
      merge_row_stats<THREADS, PACKS * VEC>(s, q, red);
      if constexpr (CLUSTER)
        cluster_merge(s, q, static_cast<float>(THREADS * PACKS * VEC), fresh_ctas<CLUSTER>(), fresh_rank<CLUSTER>(),
                      pairs[it & 1u], xbar0 + 8u * (it & 1u), (it >> 1) & 1u);
      rstd = rsqrtf(fmaf(q, inv_n, eps));
      off = (own - s * inv_n) * rstd;  // h holds h - own
    } else {
      float total = rlg_row_sum(acc[0], THREADS, red[0]);
      if constexpr (CLUSTER)
        total = cluster_total(total, fresh_ctas<CLUSTER>(), fresh_rank<CLUSTER>(), vals[0], xbar0, it & 1u);
      const float mean = total * inv_n;
      center_and_square<VEC>(h, ok, mean, acc);
      float sq = rlg_row_sum(acc[0], THREADS, red[1]);
      if constexpr (CLUSTER)
        sq = cluster_total(sq, fresh_ctas<CLUSTER>(), fresh_rank<CLUSTER>(), vals[1], xbar0 + 8u, it & 1u);
      rstd = rsqrtf(fmaf(sq, inv_n, eps));
    }
    // Afresh: t, count and ok are not kept through the statistics.
    t = fresh_tid();
    const int p0 = fresh_rank<CLUSTER>() * chunk;
    count = max(0, min(n / VEC - p0, chunk));
#pragma unroll
    for (int p = 0; p < PACKS; ++p) ok[p] = t + p * THREADS < count;
    const int64_t c0 = int64_t(p0 + t) * VEC;  // this thread's first column
    T* yr = y + int64_t(row) * n + c0;
    if constexpr (RING) {
      smem_wb_output<T, PACKS, THREADS>(h, ok, rstd, off, xr_slice + 4 * chunk, xr_slice + 5 * chunk, t, yr);
    } else if (it & 1u) {
      tma_output<T, PACKS, true, THREADS>(h, ok, rstd, off, w, b, c0, yr);
    } else {
      tma_output<T, PACKS, false, THREADS>(h, ok, rstd, off, w, b, c0, yr);
    }
    row += step;
  }
  if constexpr (CLUSTER) cooperative_groups::this_cluster().sync();  // no CTA leaves while a partial may still be sent to it
#endif
}

// Plans 8, 13-15 (CLUSTER false): one CTA a row, rows of <= THREADS x PACKS
// 16-byte packs.  Plans 9-12, 16, 17: the fewest CTAs (2, 4 or 8) whose
// slices hold that many packs each (plans 12 and 16, RING: six slices of
// shared memory, at most 192 KB).  16-byte packs only (n % vec16 == 0,
// aligned pointers: the caller's VEC).
template <typename T, bool CLUSTER, int THREADS = kTmaThreads, bool RING = false, int PACKS = kTmaPacks,
          bool ONE_ROUND = false>
bool launch_tma(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n, float eps,
                cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if (ksuite::compute_major() < 9 || n % VEC != 0 || n > 0x7fffffff) return false;
  const int64_t packs = n / VEC, cap = int64_t(THREADS) * PACKS;
  int ctas = CLUSTER ? 2 : 1;
  while (CLUSTER && ctas < 8 && (packs + ctas - 1) / ctas > cap) ctas *= 2;
  if ((packs + ctas - 1) / ctas > cap) return false;
  const int chunk = static_cast<int>((packs + ctas - 1) / ctas);
  const int smem = (RING ? 6 : 2) * chunk * 16;  // RING: two x/r buffers and the w/b slices
  if (smem + 2048 > ksuite::max_smem_optin()) return false;
  auto kernel = rlg_tma_kernel<T, PACKS, CLUSTER, THREADS, RING, ONE_ROUND>;
  const int clusters = max_active_clusters(kernel, THREADS, smem, ctas);
  if (clusters <= 0) return false;
  const int64_t grid = std::min<int64_t>(m, clusters) * ctas;
  ksuite::launch_clustered(kernel, static_cast<unsigned>(grid), THREADS, smem, ctas, stream, x, r, w, b, y,
                           static_cast<uint32_t>(m), static_cast<int>(n), chunk, eps, static_cast<float>(1.0 / double(n)));
  return true;
}

}  // namespace
