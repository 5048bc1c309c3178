// residual_layernorm_gelu: h = x + r; y = gelu(layernorm(h) * w + b) over the
// last dim of contiguous M x N inputs, in float32 with exact (erf-form) GELU.
//
// Napkin math: (3*M*N + 2*N) * sizeof(T) bytes compulsory (x and r read once,
// y written once, w and b once per SM from L2).  bf16 at 0.9 x 4.2 TB/s is
// ~0.63e12 elements/s, ~0.6 an element per scheduler-clock: a budget of ~50
// instructions an element.  The old kernel spent ~25 on erff alone plus
// 64-bit index math, block barriers and one-element conversions; now
// ksuite::gelu_fast (~16; gelu_as, ~13, for 16-bit outputs), packed bf16
// conversions, 32-bit in-row indices.
//
// Plans (residual_layernorm_gelu_v's `variant`; 0 = auto):
//  1 registers, 4 packs a thread of x and of r (2 x 64 B in flight a thread)
//  2 registers, 2 packs a thread
//  3 registers, 1 pack a thread
//    h = x + r stays in registers (ksuite::plan_regs: lanes of a warp, several
//    rows a block, or a whole block a row).  Every x/r load of a thread is
//    issued first (predicated, no per-pack branch), then exact two-pass
//    statistics: the row sum, then the sum of squared deviations from the
//    row mean, one reduction (one barrier when a block holds the row) each.
//  4 cluster (sm_90): rows too long for registers split over 2..8 CTAs, each
//    holding its slice of h as float in shared memory; (count, mean, M2)
//    merged through distributed shared memory.
//  5 two reads: shifted sums, then a backwards output pass whose re-reads
//    mostly hit L2 (rows longer than the cluster holds).
//  6 plan 1 with x and r read by plain ld.global (L1-allocating, coherent)
//    instead of ld.global.nc.L1::no_allocate
//  7 plan 3 with plain loads, likewise.  (The Triton kernel's float32 rows
//    ran 3-8% faster on the H200 without a load cache hint.)
//  8 persistent TMA (sm_90): one 1024-thread CTA an SM walks rows; the raw x
//    and r of a row (<= 1024 x 4 16-byte packs of each: bf16/fp16 32768,
//    float32 16384; 128 KB) sit in shared memory, filled by cp.async.bulk;
//    each thread copies its 4 packs to registers as h = x + r, and the bulk
//    copy of the CTA's next row starts at once, so that its loads overlap
//    this row's statistics, GELU and stores (plan 1 at 32768 columns: one
//    CTA an SM alternates loading and computing).
//  9 plan 8 over a cluster of 2, 4 or 8 CTAs a row, each holding a slice
//    (float32 32768: 2 x 64 KB of x and of r), partial sums exchanged by
//    st.async.  Plans 8-12: 16-byte packs only (n % (16 / itemsize) == 0,
//    aligned pointers).
// 10 plan 9 with 512-thread CTAs, two an SM (slices of <= 512 x 4 packs)
// 11 plan 9 with 256-thread CTAs, four an SM (slices of <= 256 x 4 packs)
// 12 plan 10 as one CTA an SM with two slices of x and r in flight (the
//    next two rows) and the CTA's slice of w and b held in shared memory:
//    6 slices of <= 512 x 4 packs, <= 192 KB.  (Tried on the H200 at
//    4096 x 32768 and dropped: 1024-thread CTAs at 2 packs, one an SM;
//    512-thread CTAs at 2 packs, two an SM; 256-thread CTAs at 8 packs: all
//    slower than plan 12 in float32 and in bf16.)
// 13 plan 8 with 512-thread CTAs and 8 packs a thread (one an SM): half the
//    per-row work of a thread (barriers, reductions, addresses) an element
// 14 plan 13 with one-round statistics: each thread's own two-pass sum and
//    squared deviations over its packs, merged for the row in one reduction
//    by Chan's formula for equal groups (merge_row_stats): exact like the
//    two-pass statistics, one shuffle tree and one barrier instead of two.
//    Rows that do not fill every thread's packs take the two-pass path.
// 15 plan 8 with plan 14's one-round statistics (1024 x 4).
// 16 plan 12 with one-round statistics: one cluster exchange a row, of
//    (sum, squared deviations) pairs (cluster_merge), instead of two.
// 17 plan 10 with one-round statistics, likewise.
//    On the H200 at bf16 4096 x 32768, plan 16 takes 206-208 us where plans
//    8, 12 and 15 take 223-226 and 17 230: the second cluster exchange of
//    plan 12 was the cost, one barrier more inside a CTA (8 against 15) is
//    not.  Plans 13 and 14 lost to plan 8: 250-251 and 242 us (half the
//    warps); a 256-thread, 16-pack form of 14, 304 us, was dropped.  In
//    float32 plan 16 (clusters of 4) takes 403-407 us against plan 12's
//    389-390.
// Auto: 1 while the row fits 1024 threads, else 4, else 5.  A variant that
// cannot run a shape runs auto's plan.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cooperative_groups.h>

#include "ksuite/bulk.cuh"
#include "ksuite/common.cuh"

namespace {

using ksuite::Pack;
using ksuite::to_float;
using ksuite::bulk::bulk_copy;
using ksuite::bulk::max_active_clusters;
using ksuite::bulk::mbar_expect;
using ksuite::bulk::mbar_wait;
using ksuite::bulk::mbar_wait_cluster;
using ksuite::ptx::smem_addr;

template <typename T, int VEC>
__device__ __forceinline__ void load_pack(const T* p, float (&out)[VEC]) {
  const Pack<T, VEC> v = *reinterpret_cast<const Pack<T, VEC>*>(p);
#pragma unroll
  for (int k = 0; k < VEC; ++k) out[k] = to_float(v.v[k]);
}

// y[c..c+VEC) = gelu(((h - mean) * rstd) * w + b)
template <typename T, int VEC>
__device__ __forceinline__ void finish_pack(const float (&h)[VEC], float mean, float rstd,
                                            const T* w, const T* b, T* y) {
  float wv[VEC], bv[VEC];
  load_pack<T, VEC>(w, wv);
  load_pack<T, VEC>(b, bv);
  Pack<T, VEC> out;
#pragma unroll
  for (int k = 0; k < VEC; ++k)
    out.v[k] = ksuite::from_float<T>(ksuite::gelu_out<T>((h[k] - mean) * rstd * wv[k] + bv[k]));
  *reinterpret_cast<Pack<T, VEC>*>(y) = out;
}

template <typename T, int VEC>
__device__ __forceinline__ void load_h(const T* x, const T* r, float (&h)[VEC]) {
  float rv[VEC];
  load_pack<T, VEC>(x, h);
  load_pack<T, VEC>(r, rv);
#pragma unroll
  for (int k = 0; k < VEC; ++k) h[k] += rv[k];
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

// Block size bound of the register kernel: 32 floats of h a thread fit the
// 64 registers of a 1024-thread block; more need a 256-thread bound.
constexpr int regs_max_threads(int elems) { return elems <= 32 ? 1024 : 256; }
// Blocks an SM must hold at once: 16-byte rows of <= 8 elements a thread get
// two 1024-thread blocks (32 registers), so that one block's loads overlap the
// other's reductions; with one block an SM the SM idles through every barrier.
constexpr int regs_min_blocks(int vec, int packs) { return vec > 1 && vec * packs <= 8 ? 2 : 1; }

// w and b loaded before the reductions when their raw packs fit next to h
// (float32 packs; 16-bit rows of <= 16 elements a thread); else after, in
// the output loop (64-register bound: h alone takes 32 of them), where they
// hit L1 (the same columns for every row).
template <typename T, int VEC, int PACKS>
constexpr bool wb_early() {
  if (regs_min_blocks(VEC, PACKS) > 1) return false;  // 32 registers: no room
  return VEC * PACKS + 2 * PACKS * int(sizeof(ksuite::RawPack<T, VEC>)) / 4 <= 32;
}

// x and r: a predicated 16-byte load, by the read-only no-allocate path or,
// PLAIN, by a plain ld.global (one-element packs always take the former).
template <typename T, int VEC, bool PLAIN>
__device__ __forceinline__ ksuite::RawPack<T, VEC> ld_xr(const T* p, bool pred) {
  if constexpr (PLAIN && VEC > 1) {
    return ksuite::ld16_if<ksuite::kPlain>(p, pred);
  } else {
    return ksuite::ld_pack_if<T, VEC, true, false>(p, pred);
  }
}

// Thread t of a row owns packs c = (p * tpr + t) * VEC, p < PACKS.  Packs
// past the row's end (all packs of threads past the last row) load nothing
// (a false predicate), are left out of both sums and are not stored; those
// threads still take part in the reductions.
// lg_tpr: log2(tpr) when tpr <= 32, else 10 (one row a block);
// lg_rows: log2(rows a block) (0 when tpr > 32).
template <typename T, int VEC, int PACKS, bool PLAIN = false>
__global__ void __launch_bounds__(regs_max_threads(VEC * PACKS), regs_min_blocks(VEC, PACKS))
rlg_regs_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                const T* __restrict__ b, T* __restrict__ y, int64_t m, int n, float eps, float inv_n,
                int tpr, int lg_tpr, int lg_rows) {
  using Raw = ksuite::RawPack<T, VEC>;
  constexpr bool kEarly = wb_early<T, VEC, PACKS>();
  __shared__ float red[2][32];
  const int group = threadIdx.x >> lg_tpr;
  const int t = threadIdx.x - (group << lg_tpr);
  const int64_t row = (int64_t(blockIdx.x) << lg_rows) + group;
  const int cols = row < m ? n : 0;
  const int c0 = t * VEC, stride = tpr * VEC;
  const int64_t off = row * n + c0;
  bool ok[PACKS];
#pragma unroll
  for (int p = 0; p < PACKS; ++p) ok[p] = c0 + p * stride < cols;
  // Every load of x and r first, back to back (predicated, no branches).
  Raw rx[PACKS], rr[PACKS], rw[PACKS], rb[PACKS];
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    rx[p] = ld_xr<T, VEC, PLAIN>(x + off + p * stride, ok[p]);
    rr[p] = ld_xr<T, VEC, PLAIN>(r + off + p * stride, ok[p]);
  }
  if constexpr (kEarly) {
#pragma unroll
    for (int p = 0; p < PACKS; ++p) {
      // w and b: the same columns for every row, so cached loads (L1 hits).
      rw[p] = ksuite::ld_pack_if<T, VEC, false, false>(w + c0 + p * stride, ok[p]);
      rb[p] = ksuite::ld_pack_if<T, VEC, false, false>(b + c0 + p * stride, ok[p]);
    }
  }
  // h = x + r; the row sum in VEC independent chains (packs past the row's
  // end hold garbage and are left out by predicated adds).
  // (one chain when registers are tight: 32 a thread at two blocks an SM)
  constexpr int kChains = regs_min_blocks(VEC, PACKS) > 1 ? 1 : VEC;
  float h[PACKS][VEC], acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    float xv[VEC], rv[VEC];
    ksuite::raw_pack_to_floats<T, VEC>(rx[p], xv);
    ksuite::raw_pack_to_floats<T, VEC>(rr[p], rv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] = xv[k] + rv[k];
    if (ok[p]) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k % kChains] += h[p][k];
    }
  }
  pairwise_sum(acc);
  // Exact two-pass statistics: the mean, then squared deviations from it.
  const float mean = rlg_row_sum(acc[0], tpr, red[0]) * inv_n;
  center_and_square<kChains>(h, ok, mean, acc);
  const float rstd = rsqrtf(fmaf(rlg_row_sum(acc[0], tpr, red[1]), inv_n, eps));
  T* yr = y + off;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    if constexpr (!kEarly) {
      rw[p] = ksuite::ld_pack_if<T, VEC, false, false>(w + c0 + p * stride, ok[p]);
      rb[p] = ksuite::ld_pack_if<T, VEC, false, false>(b + c0 + p * stride, ok[p]);
    }
    float wv[VEC], bv[VEC];
    ksuite::raw_pack_to_floats<T, VEC>(rw[p], wv);
    ksuite::raw_pack_to_floats<T, VEC>(rb[p], bv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] = ksuite::gelu_out<T>(fmaf(h[p][k] * rstd, wv[k], bv[k]));
    if (ok[p]) ksuite::store_floats<T, VEC>(yr + p * stride, h[p]);
  }
}

// One 1024-thread block a row, grid-stride over rows.  STAGE: h kept as float
// in dynamic shared memory (two-pass statistics from there); otherwise shifted
// sums in one pass over x and r, then a second, backwards pass.
template <typename T, int VEC, bool STAGE>
__global__ void __launch_bounds__(1024)
rlg_wide_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                const T* __restrict__ b, T* __restrict__ y, int64_t m, int64_t n, float eps) {
  // Element k of pack i sits at row_buf[k * packs + i]: consecutive threads
  // touch consecutive words, so no bank conflicts (i * VEC + k would be
  // VEC-way conflicted).
  extern __shared__ float row_buf[];
  __shared__ float smem[32];
  const int64_t packs = n / VEC;
  for (int64_t row = blockIdx.x; row < m; row += gridDim.x) {
    const int64_t off = row * n;
    // The shift: any value near the mean keeps sum((h-K)^2) free of cancellation.
    const float shift = STAGE ? 0.0f : to_float(x[off]) + to_float(r[off]);
    float s1 = 0.0f, s2 = 0.0f;
    // Unrolled so that several packs' loads are in flight per thread.
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      float h[VEC];
      load_h<T, VEC>(x + off + i * VEC, r + off + i * VEC, h);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        if constexpr (STAGE) row_buf[k * packs + i] = h[k];
        const float d = h[k] - shift;
        s1 += d;
        s2 += d * d;
      }
    }
    s1 = ksuite::block_sum(s1, smem) / float(n);
    float mean, var;
    if constexpr (STAGE) {
      mean = s1;
      float sq = 0.0f;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sq += (row_buf[i] - mean) * (row_buf[i] - mean);
      var = ksuite::block_sum(sq, smem) / float(n);
    } else {
      mean = shift + s1;
      var = fmaxf(ksuite::block_sum(s2, smem) / float(n) - s1 * s1, 0.0f);
    }
    const float rstd = rsqrtf(var + eps);
#pragma unroll 4
    for (int64_t i = packs - 1 - threadIdx.x; i >= 0; i -= blockDim.x) {
      float h[VEC];
      if constexpr (STAGE) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) h[k] = row_buf[k * packs + i];
      } else {
        load_h<T, VEC>(x + off + i * VEC, r + off + i * VEC, h);
      }
      finish_pack<T, VEC>(h, mean, rstd, w + i * VEC, b + i * VEC, y + off + i * VEC);
    }
    // row_buf and smem are rewritten by the next row.
    __syncthreads();
  }
}

constexpr int kClusterThreads = 512;

// CTA `rank` of the cluster owns packs [rank * chunk, (rank + 1) * chunk) of
// the row; element k of its pack i is slice[k * count + i] (conflict free).
template <typename T, int VEC>
__global__ void __launch_bounds__(kClusterThreads)
rlg_cluster_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                   const T* __restrict__ b, T* __restrict__ y, int64_t n, int64_t chunk, float eps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ float slice[];
  __shared__ float smem[32];
  __shared__ float3 partial;  // this CTA's (count, mean, M2), read by the whole cluster
  const unsigned ctas = cluster.num_blocks();
  const int64_t row = blockIdx.x / ctas;
  const int64_t p0 = int64_t(cluster.block_rank()) * chunk;
  const int64_t count = std::max<int64_t>(0, std::min<int64_t>(n / VEC - p0, chunk));
  const int64_t off = row * n + p0 * VEC;

  float s = 0.0f;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    float h[VEC];
    load_h<T, VEC>(x + off + i * VEC, r + off + i * VEC, h);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      slice[k * count + i] = h[k];
      s += h[k];
    }
  }
  const float cnt = float(count * VEC);
  const float total = ksuite::block_sum(s, smem);
  const float local_mean = count ? total / cnt : 0.0f;
  float m2 = 0.0f;
  for (int64_t j = threadIdx.x; j < count * VEC; j += blockDim.x)
    m2 += (slice[j] - local_mean) * (slice[j] - local_mean);
  m2 = ksuite::block_sum(m2, smem);
  if (threadIdx.x == 0) partial = make_float3(cnt, local_mean, m2);
  cluster.sync();  // every CTA's partial is written
  float mean = 0.0f;
  for (unsigned q = 0; q < ctas; ++q) {
    const float3 p = *cluster.map_shared_rank(&partial, q);
    mean += p.x * p.y;
  }
  mean /= float(n);
  float var = 0.0f;
  for (unsigned q = 0; q < ctas; ++q) {
    const float3 p = *cluster.map_shared_rank(&partial, q);
    var += p.z + p.x * (p.y - mean) * (p.y - mean);
  }
  cluster.sync();  // no CTA leaves while another may still read its `partial`
  const float rstd = rsqrtf(var / float(n) + eps);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    float h[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[k] = slice[k * count + i];
    const int64_t c = p0 * VEC + i * VEC;
    finish_pack<T, VEC>(h, mean, rstd, w + c, b + c, y + row * n + c);
  }
#endif
}

template <typename T, int VEC>
bool launch_cluster(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n,
                    float eps, int smem_limit, cudaStream_t stream) {
  const int64_t packs = n / VEC;
  const int ctas = ksuite::cluster_ctas(packs, VEC * sizeof(float), smem_limit);
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff) || ksuite::compute_major() < 9) return false;
  const int64_t chunk = (packs + ctas - 1) / ctas;
  ksuite::launch_clustered(rlg_cluster_kernel<T, VEC>, static_cast<unsigned>(m * ctas), kClusterThreads,
                           static_cast<int>(chunk * VEC * sizeof(float)), ctas, stream, x, r, w, b, y, n,
                           chunk, eps);
  return true;
}

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
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0) : "memory");
    if constexpr (RING) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8u) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&wbar)) : "memory");
    }
    if constexpr (CLUSTER) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(xbar0) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(xbar0 + 8u) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
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

constexpr int kVariants = 17;

template <typename T, int VEC, int PACKS, bool PLAIN = false>
bool launch_regs(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n, float eps,
                 cudaStream_t stream) {
  const ksuite::RegPlan plan = ksuite::plan_regs(n, VEC, PACKS, regs_max_threads(VEC * PACKS));
  if (plan.tpr == 0 || n > 0x7fffffff) return false;
  // Shifts, not divides, in the kernel: tpr <= 32 is a power of two and the
  // block holds threads / tpr (a power of two) rows; tpr > 32 is the block.
  int lg_tpr = 10, lg_rows = 0;
  if (plan.tpr <= 32) {
    lg_tpr = 0;
    while ((1 << lg_tpr) < plan.tpr) ++lg_tpr;
    while ((plan.tpr << lg_rows) < plan.threads) ++lg_rows;
  }
  const int64_t rows_per_block = int64_t(1) << lg_rows;
  const int64_t grid = (m + rows_per_block - 1) / rows_per_block;
  if (grid > 0x7fffffff) return false;
  rlg_regs_kernel<T, VEC, PACKS, PLAIN><<<static_cast<unsigned>(grid), plan.threads, 0, stream>>>(
      x, r, w, b, y, m, static_cast<int>(n), eps, static_cast<float>(1.0 / double(n)), plan.tpr, lg_tpr, lg_rows);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

template <typename T, int VEC>
void launch_wide(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n, float eps,
                 cudaStream_t stream) {
  // Before sm_90 (no clusters), a row that fits one CTA's shared memory as float.
  const int bytes_needed = static_cast<int>(std::min<int64_t>(n * int64_t(sizeof(float)), 0x7fffffff));
  if (n * int64_t(sizeof(float)) + 1024 <= ksuite::max_smem_optin()) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(rlg_wide_kernel<T, VEC, true>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, bytes_needed));
    const auto grid = static_cast<unsigned>(std::min<int64_t>(m, 0x7fffffff));
    rlg_wide_kernel<T, VEC, true><<<grid, 1024, bytes_needed, stream>>>(x, r, w, b, y, m, n, eps);
  } else {
    const auto grid = static_cast<unsigned>(std::min<int64_t>(m, ksuite::sm_count()));
    rlg_wide_kernel<T, VEC, false><<<grid, 1024, 0, stream>>>(x, r, w, b, y, m, n, eps);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int VEC>
void launch(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n, float eps, int variant,
            cudaStream_t stream) {
  constexpr int P1 = VEC == 1 ? 8 : 4;
  switch (variant) {
    case 1: if (launch_regs<T, VEC, P1>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 2: if (launch_regs<T, VEC, VEC == 1 ? 4 : 2>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 3: if (launch_regs<T, VEC, VEC == 1 ? 2 : 1>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 4: if (launch_cluster<T, VEC>(x, r, w, b, y, m, n, eps, ksuite::max_smem_optin(), stream)) return; break;
    case 6: if (launch_regs<T, VEC, P1, true>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 7: if (launch_regs<T, VEC, VEC == 1 ? 2 : 1, true>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 8:
    case 9:
      if constexpr (VEC > 1) {
        if (variant == 8 ? launch_tma<T, false>(x, r, w, b, y, m, n, eps, stream)
                         : launch_tma<T, true>(x, r, w, b, y, m, n, eps, stream))
          return;
      }
      break;
    case 10:
    case 11:
      if constexpr (VEC > 1) {
        if (variant == 10 ? launch_tma<T, true, 512>(x, r, w, b, y, m, n, eps, stream)
                          : launch_tma<T, true, 256>(x, r, w, b, y, m, n, eps, stream))
          return;
      }
      break;
    case 12:
      if constexpr (VEC > 1) {
        if (launch_tma<T, true, 512, true>(x, r, w, b, y, m, n, eps, stream)) return;
      }
      break;
    case 13:
    case 14:
      if constexpr (VEC > 1) {
        if (variant == 13 ? launch_tma<T, false, 512, false, 8>(x, r, w, b, y, m, n, eps, stream)
                          : launch_tma<T, false, 512, false, 8, true>(x, r, w, b, y, m, n, eps, stream))
          return;
      }
      break;
    case 15:
    case 16:
    case 17:
      if constexpr (VEC > 1) {
        if (variant == 15   ? launch_tma<T, false, kTmaThreads, false, kTmaPacks, true>(x, r, w, b, y, m, n, eps, stream)
            : variant == 16 ? launch_tma<T, true, 512, true, kTmaPacks, true>(x, r, w, b, y, m, n, eps, stream)
                            : launch_tma<T, true, 512, false, kTmaPacks, true>(x, r, w, b, y, m, n, eps, stream))
          return;
      }
      break;
    case 5: {
      const auto grid = static_cast<unsigned>(std::min<int64_t>(m, ksuite::sm_count()));
      rlg_wide_kernel<T, VEC, false><<<grid, 1024, 0, stream>>>(x, r, w, b, y, m, n, eps);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    default: break;
  }
  // float32 rows first try 2 packs a thread (more threads a row), the faster
  // plan for float32 in a variant sweep on the H200 (see residual_layernorm_gelu_v).
  if constexpr (VEC == 4) {
    if (launch_regs<T, VEC, 2>(x, r, w, b, y, m, n, eps, stream)) return;
  }
  if (launch_regs<T, VEC, P1>(x, r, w, b, y, m, n, eps, stream)) return;
  if (launch_cluster<T, VEC>(x, r, w, b, y, m, n, eps, ksuite::max_smem_optin(), stream)) return;
  launch_wide<T, VEC>(x, r, w, b, y, m, n, eps, stream);
}

at::Tensor rlg_run(const at::Tensor& x, const at::Tensor& r, const at::Tensor& weight, const at::Tensor& bias,
                   double eps, int64_t variant, const char* op) {
  KSUITE_CHECK(x.is_cuda(), op, ": x must be a CUDA tensor, got one on ", x.device());
  KSUITE_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf ||
                   x.scalar_type() == at::kBFloat16,
               op, ": x must be float32, float16 or bfloat16, got ", x.scalar_type());
  KSUITE_CHECK(x.dim() >= 1, op, ": x must have at least one dimension, got a 0-dim tensor");
  const int64_t n = x.size(-1);
  const std::pair<const char*, const at::Tensor*> args[] = {{"r", &r}, {"weight", &weight}, {"bias", &bias}};
  for (const auto& arg : args) {
    const char* name = arg.first;
    const at::Tensor& t = *arg.second;
    KSUITE_CHECK(t.device() == x.device(), op, ": ", name, " is on ", t.device(), " but x is on ", x.device());
    KSUITE_CHECK(t.scalar_type() == x.scalar_type(), op, ": ", name, " is ", t.scalar_type(), " but x is ",
                 x.scalar_type(), "; pass all inputs in one dtype");
  }
  KSUITE_CHECK(r.sizes() == x.sizes(), op, ": r has shape ", ksuite::shape_str(r), " but x has ",
               ksuite::shape_str(x));
  KSUITE_CHECK(weight.dim() == 1 && weight.size(0) == n, op, ": weight must have shape [", n,
               "] (the last dim of x), got ", ksuite::shape_str(weight));
  KSUITE_CHECK(bias.dim() == 1 && bias.size(0) == n, op, ": bias must have shape [", n,
               "] (the last dim of x), got ", ksuite::shape_str(bias));
  KSUITE_CHECK(x.is_contiguous() && r.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), op,
               ": x, r, weight and bias must be contiguous (call .contiguous() first)");
  KSUITE_CHECK(eps > 0.0, op, ": eps must be positive, got ", eps);
  KSUITE_CHECK(variant >= 0 && variant <= kVariants, op, ": variant must be 0 (auto) .. ", kVariants,
               ", got ", variant);
  const int64_t m = n == 0 ? 0 : x.numel() / n;
  KSUITE_CHECK(m <= int64_t(0x7fffffff), op, ": too many rows (", m, ")");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  cudaStream_t stream = ksuite::current_stream();
  KSUITE_DISPATCH_FLOATS(x.scalar_type(), "ksuite_residual_layernorm_gelu", [&] {
    constexpr int VEC = ksuite::vec16<scalar_t>();
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    const scalar_t* rp = r.const_data_ptr<scalar_t>();
    const scalar_t* wp = weight.const_data_ptr<scalar_t>();
    const scalar_t* bp = bias.const_data_ptr<scalar_t>();
    scalar_t* yp = y.mutable_data_ptr<scalar_t>();
    const bool vec_ok = n % VEC == 0 && ksuite::aligned16(xp) && ksuite::aligned16(rp) &&
                        ksuite::aligned16(wp) && ksuite::aligned16(bp) && ksuite::aligned16(yp);
    const int v = static_cast<int>(variant);
    if (vec_ok) {
      launch<scalar_t, VEC>(xp, rp, wp, bp, yp, m, n, static_cast<float>(eps), v, stream);
    } else {
      launch<scalar_t, 1>(xp, rp, wp, bp, yp, m, n, static_cast<float>(eps), v, stream);
    }
  });
  return y;
}

at::Tensor rlg_cuda(const at::Tensor& x, const at::Tensor& r, const at::Tensor& weight, const at::Tensor& bias,
                    double eps) {
  return rlg_run(x, r, weight, bias, eps, 0, "kernel_suite::residual_layernorm_gelu");
}

at::Tensor rlg_v_cuda(const at::Tensor& x, const at::Tensor& r, const at::Tensor& weight, const at::Tensor& bias,
                      double eps, int64_t variant) {
  return rlg_run(x, r, weight, bias, eps, variant, "kernel_suite::residual_layernorm_gelu_v");
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("residual_layernorm_gelu(Tensor x, Tensor r, Tensor weight, Tensor bias, float eps) -> Tensor");
  m.def("residual_layernorm_gelu_v(Tensor x, Tensor r, Tensor weight, Tensor bias, float eps, int variant) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("residual_layernorm_gelu", &rlg_cuda);
  m.impl("residual_layernorm_gelu_v", &rlg_v_cuda);
}
