// softmax over the last dim of a contiguous M x N matrix, computed in float32.
//
// Napkin math: 2*M*N*sizeof(T) bytes compulsory, ~5 FLOPs an element: memory
// bound.  At the H200's ~4.2 TB/s an SM must keep ~32 KB of loads in flight
// (Little: bandwidth x ~1 us / 132 SMs).  A row kernel only has loads in
// flight between a row's first load and its first reduction, so the bytes a
// resident SM holds must be well above that.
//
// Plans (softmax_v's `variant`; 0 = auto, which softmax uses):
//  1 registers, 4 packs (64 B) a thread  } the row in registers, all its loads
//  2 registers, 2 packs a thread         } issued at once; tpr threads a row
//  3 registers, 8 packs a thread         } (ksuite::plan_regs): lanes of a
//    warp (several rows a 256-thread block, shuffles only) or a whole block
//    (one shared-memory exchange).  Each thread keeps a running (max, sum of
//    exp) over its own elements, so one (max, sum) pair reduction finishes
//    the row: one block barrier a row, not four.  With 4 packs a thread, a
//    resident SM holds 1024-2048 threads x 64 B = 64-128 KB in flight.
//  4 cluster + TMA, slices <= 32 KB  } rows too long for registers (auto
//  5 cluster + TMA, slices <= 64 KB  } beyond 4 x 16 B x 1024 threads): a
//    cluster of 2..8 CTAs holds the row in shared memory in the input dtype,
//    each CTA one slice, loaded by cp.async.bulk (the copy engine: the
//    whole slice in flight from one instruction, no registers), then
//    (max, sum) swapped through distributed shared memory: one read and one
//    write of the row.  bf16 131072 columns = 256 KB a row: 8 x 32 KB (v4,
//    up to 7 CTAs an SM, so one CTA's load overlaps the others' math) or
//    4 x 64 KB (v5, 3 an SM).
//  6 cluster, register loads (the row as the input dtype in shared memory,
//    any alignment; slices <= 64 KB): 4 predicated 16-byte loads a thread
//    issued back to back, then stored to shared memory.
//  7 streaming: online (max, sum) pass, then an output pass walking the row
//    backwards so its re-reads hit L2; for rows longer than 8 x 227 KB.
//  8 persistent cluster + TMA, 2 x slices <= 64 KB, 512 threads  } plans
//  9 persistent cluster + TMA, 2 x slices <= 32 KB, 256 threads  } 4/5 kept
// 10 persistent cluster + TMA, 3 x slices <= 64 KB, 512 threads  } resident:
//    one cluster walks rows cluster_id, + clusters, ...; each CTA keeps 2
//    or 3 slice buffers, so the next rows' bulk copies are in flight while
//    it reduces and writes the current one (plans 4/5 load, reduce, swap
//    and write back to back, and the SM's loads stop while it computes).
//    bf16 131072: 4 CTAs x 2 x 64 KB (one CTA an SM, 33 clusters) or
//    8 x 2 x 32 KB (three CTAs an SM); (max, sum) swapped by st.async into
//    every CTA of the cluster, counted by an mbarrier (no cluster barrier).
// 11 short rows, 2 packs a lane, 4-warp blocks      } rows of <= 128
// 12 short rows, 1 pack a lane, 4-warp blocks       } packs (float32 512,
// 13 short rows, 4 packs a lane, 1-warp blocks      } 16-bit 1024): a lane
// 14 as 11 with ld.global.nc loads                  } group owns R rows
//    (R * packs a row a lane = the plan's packs a lane), issues all its
//    16-byte loads of the R rows first, then R interleaved shuffle trees
//    (max, then sum); no shared memory.  Loads without a cache hint
//    (ld.global; 14: ld.global.nc), where plans 1-3 use
//    ld.global.nc.L1::no_allocate.  11 and 12 are the shapes of Triton's
//    winners at 2097152 x 128 (4 warps, 8 or 16 rows); 13 its float32 one
//    (4 rows on one warp).
// 15 any alignment, 4 packs a thread  } a row not on a 16-byte boundary
// 16 any alignment, 2 packs a thread  } (n not a multiple of the pack):
// 17 any alignment, 8 packs a thread  } scalar head up to the boundary,
//    16-byte body, scalar tail; a warp a row up to 32 threads' worth, else
//    a block.  Any n that fits K packs x 1024 (256 at 64 values a thread)
//    threads; x and y rows equally misaligned (y = empty_like(x) starts on
//    a 16-byte boundary, so x must too: a view of x that does not runs auto).
// 18 persistent cluster + TMA, slice in registers, 512 threads x 4 packs  } plans
// 19 persistent cluster + TMA, slice in registers, 256 threads x 8 packs  } 8-10
// 20 persistent cluster + TMA, slice in registers, 1024 threads x 4 packs } with
//    the slice copied once from its buffer to registers as float
//    exp(v - the thread's max): the buffer goes back to the copy engine
//    before the reductions (row i + 2 loads while row i is reduced, swapped
//    and written) and the output pass is one multiply an element, one exp
//    an element in all (plans 8-10: two, and the buffer is held to the end).
//    Slices of <= threads x packs x 16 B (18, 19: 32 KB, two CTAs an SM;
//    20: 64 KB, one), 2 buffers a CTA.
// 21 as 19 with 3 buffers a CTA (rows i + 1 and i + 2 in flight)
// 22 as 18 with 3 buffers a CTA
// 23 row (a cluster of 2-8 CTAs: a slice) in registers as raw packs, 512 x 8   } exp twice,
// 24 the same at 256 threads x 8 packs a CTA, four CTAs an SM                 } twice the
// 25 the same at 1024 threads x 8 packs, one CTA an SM                        } bytes held
// 26 as 15 (any alignment, 4 packs a thread) with the packs kept raw, exp twice
// 27 as 23 with plain ld.global loads (no cache hint)
// 28 as 27 with each pack's exps kept in its registers as half2: one exp an
//    element (16-bit types only)
// 29 as 19 with the exps kept as half2 (16-bit types only), three CTAs an SM
// 30 as 29 at 512 threads x 8 packs (64 KB slices: bf16 131072 on clusters of
//    4, not 8), one CTA an SM (80 registers).  Clusters of 8 CTAs two an SM
//    leave SMs idle: the H200's GPCs hold 30 of them (240 of 264 CTA slots;
//    Nsight Compute, plan 19 at bf16 4096 x 131072).
// 31 as 30 with one buffer: refilled as soon as the slice is in registers
// 32 as 31 at 512 threads x 16 packs (128 KB slices: bf16 131072 on clusters
//    of 2, which fill more of each GPC than clusters of 4 one an SM)
// 33 as 32 at 1024 threads x 8 packs (<= 64 registers)
//    Plans 29-33 take the row max on raw pairs (max.bf16x2 / max.f16x2):
//    bf16 131072 is bound by instructions, not by bytes, at ~1 T elements/s;
//    that step took plan 30 from 568 to 540 us (0.89 -> 0.94 of copy), while
//    32 and 33 stayed at 565 us (H200, 7e3e9cb).
// A variant that cannot run a shape (too long a row for registers, a
// misaligned row for TMA or plans 1-14) runs auto's plan instead.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cooperative_groups.h>

#include "ksuite/bulk.cuh"
#include "ksuite/common.cuh"
#include "softmax_access.cuh"

namespace {

using ksuite::Pack;
using ksuite::to_float;
using ksuite::bulk::max_active_clusters;
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


// Block size bound of the register kernel: 32 floats a thread fit the 64
// registers of a 1024-thread block; 64 floats need a 256-thread bound.
constexpr int regs_max_threads(int elems) { return elems <= 32 ? 1024 : 256; }

// ---------------------------------------------------------------- registers

template <typename T, int VEC, int PACKS>
__global__ void __launch_bounds__(regs_max_threads(VEC * PACKS))
softmax_regs_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t m, int n, int tpr) {
  __shared__ float2 red[32];
  const int group = threadIdx.x / tpr;
  const int t = threadIdx.x - group * tpr;
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / tpr) + group;
  // Threads past the last row run with an empty row: the shuffles need them.
  const int cols = row < m ? n : 0;
  const T* xr = x + row * n;
  float v[PACKS][VEC];
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    const int c = (p * tpr + t) * VEC;
    if (c < cols) {
      ksuite::load_floats<T, VEC>(xr + c, v[p]);
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[p][k] = -INFINITY;
    }
  }
  float mx = -INFINITY;
#pragma unroll
  for (int p = 0; p < PACKS; ++p)
#pragma unroll
    for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, v[p][k]);
  // Exponents relative to the thread's own max (0 if it holds no value).
  const float base = mx == -INFINITY ? 0.0f : mx;
  float sum = 0.0f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p)
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      v[p][k] = ksuite::exp_approx(v[p][k] - base);
      sum += v[p][k];
    }
  const float2 row_ms = ksuite::group_reduce(make_float2(mx, sum), tpr, red, make_float2(-INFINITY, 0.0f),
                                             MergeMS{});
  const float scale = mx == -INFINITY ? 0.0f : ksuite::exp_approx(base - row_ms.x) / row_ms.y;
  T* yr = y + row * n;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    const int c = (p * tpr + t) * VEC;
    if (c < cols) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[p][k] *= scale;
      ksuite::store_floats<T, VEC>(yr + c, v[p]);
    }
  }
}

// ------------------------------------------------ cluster + TMA (bulk copy)

constexpr int kTmaThreads = 256;


// CTA `rank` of the cluster owns packs [rank * chunk, (rank + 1) * chunk) of
// its row and keeps them in dynamic shared memory as loaded.
template <typename T>
__global__ void __launch_bounds__(kTmaThreads)
softmax_tma_kernel(const T* __restrict__ x, T* __restrict__ y, int n, int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  namespace cg = cooperative_groups;
  constexpr int VEC = ksuite::vec16<T>();
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(128) uint4 slice[];
  __shared__ __align__(8) uint64_t bar;
  __shared__ float2 red[32];
  __shared__ float2 partial;  // this CTA's (max, sum), read by the whole cluster
  const unsigned ctas = cluster.num_blocks();
  const int64_t row = blockIdx.x / ctas;
  const int p0 = static_cast<int>(cluster.block_rank()) * chunk;
  const int count = max(0, min(n / VEC - p0, chunk));
  const uint32_t bar_addr = smem_addr(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t bytes = static_cast<uint32_t>(count) * 16u;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr), "r"(bytes)
                 : "memory");
    const char* src = reinterpret_cast<const char*>(x + row * n + int64_t(p0) * VEC);
    const uint32_t dst = smem_addr(slice);
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
  for (int i = threadIdx.x; i < count; i += kTmaThreads) {
    float v[VEC];
    ksuite::raw_to_floats<T>(slice[i], v);
    online_add(v, mx, sum);
  }
  const float2 cta = ksuite::group_reduce(make_float2(mx, sum), kTmaThreads, red, make_float2(-INFINITY, 0.0f),
                                          MergeMS{});
  if (threadIdx.x == 0) partial = cta;
  cluster.sync();  // every CTA's partial is written
  float2 tot = make_float2(-INFINITY, 0.0f);
  for (unsigned q = 0; q < ctas; ++q) tot = MergeMS{}(tot, *cluster.map_shared_rank(&partial, q));
  cluster.sync();  // no CTA leaves while another may still read its `partial`
  const float row_mx = tot.x, inv = 1.0f / tot.y;
  T* yr = y + row * n + int64_t(p0) * VEC;
  for (int i = threadIdx.x; i < count; i += kTmaThreads) {
    float v[VEC];
    ksuite::raw_to_floats<T>(slice[i], v);
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
    float pm = v[0][0];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < VEC; ++k) pm = fmaxf(pm, v[u][k]);
    if (pm > mx) {
      sum = mx == -INFINITY ? 0.0f : sum * ksuite::exp_approx(mx - pm);
      mx = pm;
    }
    if (mx != -INFINITY) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < VEC; ++k) sum += ksuite::exp_approx(v[u][k] - mx);
    }
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
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8u * s) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(xbar0) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(xbar0 + 8u) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cooperative_groups::this_cluster().sync();
}

// init_barriers, then thread 0 starts the bulk copies of this CTA's slice of
// its first STAGES rows (first, first + clusters, ...), buffer s for row s.
template <int STAGES>
__device__ __forceinline__ void start_rows(uint32_t bar0, uint32_t xbar0, uint32_t buf0, uint32_t stride,
                                           const char* src, int64_t row_bytes, uint32_t bytes, int64_t first,
                                           int64_t clusters, int64_t m) {
  init_barriers<STAGES>(bar0, xbar0);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      const int64_t row = first + s * clusters;
      if (row < m) tma_load(buf0 + s * stride, src + row * row_bytes, bytes, bar0 + 8u * s);
    }
  }
}

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
  const int ctas = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t clusters = gridDim.x / ctas;
  const int64_t first = blockIdx.x / ctas;
  const int p0 = rank * chunk;
  const int count = max(0, min(n / VEC - p0, chunk));
  const uint32_t bytes = static_cast<uint32_t>(count) * 16u;
  const uint32_t stride = static_cast<uint32_t>(chunk) * 16u;  // bytes a buffer
  const uint32_t buf0 = smem_addr(slices), bar0 = smem_addr(bars), xbar0 = smem_addr(xbar);
  const char* src = reinterpret_cast<const char*>(x + int64_t(p0) * VEC);
  const int64_t row_bytes = int64_t(n) * sizeof(T);
  start_rows<STAGES>(bar0, xbar0, buf0, stride, src, row_bytes, bytes, first, clusters, m);
  int stage = 0;
  uint32_t phase = 0;
  uint32_t it = 0;  // iteration: pair slot it & 1, that slot's phase (it >> 1) & 1
#pragma unroll 1
  for (int64_t row = first; row < m; row += clusters, ++it) {
    mbar_wait(bar0 + 8u * stage, phase);
    const uint4* buf = slices + int64_t(stage) * chunk;
    const float2 own = slice_stats<T, THREADS>(buf, count);
    const float2 cta = ksuite::group_reduce(own, THREADS, red, make_float2(-INFINITY, 0.0f), MergeMS{});
    const float2 tot = exchange_stats(cta, it, xbar0, ctas, rank, pairs);
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
      if (threadIdx.x == 0)
        tma_load(buf0 + stage * stride, src + next * row_bytes, bytes, bar0 + 8u * stage);
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
// HALF_E (16-bit T, plan 29): each pack's exps are kept as 4 words of half2
// instead of 8 floats (relative error 2^-11, a quarter of a bf16 rounding),
// so a CTA of 256 threads x 8 packs fits 3 an SM.
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
  const int ctas = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t clusters = gridDim.x / ctas;
  const int64_t first = blockIdx.x / ctas;
  const int p0 = rank * chunk;
  const int count = max(0, min(n / VEC - p0, chunk));
  const uint32_t bytes = static_cast<uint32_t>(count) * 16u;
  const uint32_t stride = static_cast<uint32_t>(chunk) * 16u;
  const uint32_t buf0 = smem_addr(slices), bar0 = smem_addr(bars), xbar0 = smem_addr(xbar);
  const char* src = reinterpret_cast<const char*>(x + int64_t(p0) * VEC);
  const int64_t row_bytes = int64_t(n) * sizeof(T);
  start_rows<STAGES>(bar0, xbar0, buf0, stride, src, row_bytes, bytes, first, clusters, m);
  int stage = 0;
  uint32_t phase = 0;
  uint32_t it = 0;
#pragma unroll 1
  for (int64_t row = first; row < m; row += clusters, ++it) {
    mbar_wait(bar0 + 8u * stage, phase);
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
    if (threadIdx.x == 0 && next < m) tma_load(buf0 + stage * stride, src + next * row_bytes, bytes, bar0 + 8u * stage);
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
    const float base = mx == -INFINITY ? 0.0f : mx;  // no packs (or all -inf): zeros, not NaN
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
    const float2 tot = exchange_stats(cta, it, xbar0, ctas, rank, pairs);
    const float scale = mx == -INFINITY ? 0.0f : ksuite::exp_approx(base - tot.x) / tot.y;
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

// ----------------------------------------- cluster, register loads (any VEC)

constexpr int kClusterThreads = 512;

// 3 CTAs an SM (64 KB slices): <= 40 registers a thread.
template <typename T, int VEC>
__global__ void __launch_bounds__(kClusterThreads, 3)
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
  for (int base = threadIdx.x; base < cnt; base += kInFlight * kClusterThreads) {
    Raw raw[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kClusterThreads;
      raw[u] = ksuite::ld_pack_if<T, VEC, true, false>(reinterpret_cast<const T*>(xr + i), i < cnt);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kClusterThreads;
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
  const float2 cta = ksuite::group_reduce(make_float2(mx, sum), kClusterThreads, red,
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

// --------------------------------------- short rows: R rows a lane group

// Plans 11-14, rows of 1 to 128 packs (float32 <= 512, 16-bit <= 1024
// columns, a multiple of the pack): a group of G lanes (a power of two
// <= 32) owns a row with K packs a lane (K = 1 and G the packs rounded up
// below 32 packs, so a warp holds 32 / G rows at once; else G = 32, K =
// 2 or 4), and the group does R rows (R * K = the plan's packs a lane).
// Every lane issues all R * K of its 16-byte loads first; then the R rows'
// max trees run interleaved (R independent shuffles in flight a step), the
// exponentials, the R sum trees likewise, and the stores.  No shared
// memory, no barrier, blocks of 1 or 4 warps: a warp that is done frees
// its slot at once, and 2048 threads an SM stay resident (<= 32 registers).
// Rows of a warp's groups are consecutive, so each load instruction of a
// warp reads 32 consecutive packs (512 bytes) when G * K covers the row.
template <typename T, int K, int R, int PATH>
__global__ void __launch_bounds__(128)
softmax_warp_rows_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t m, int n, int lanes_log2) {
  constexpr int VEC = ksuite::vec16<T>();
  constexpr float kLog2e = 1.4426950408889634f;
  const int lane = threadIdx.x & 31;
  const int lanes = 1 << lanes_log2;
  const int t = lane & (lanes - 1);
  const int span = 32 >> lanes_log2;  // rows the warp's groups hold at once
  const int packs = n / VEC;
  const int64_t warp = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int64_t first = warp * (R * span) + (lane >> lanes_log2);
  uint4 raw[R][K];
  bool ok[R][K];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = first + int64_t(r) * span;
    const T* xr = x + row * n;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = k * lanes + t;
      ok[r][k] = row < m && c < packs;
      raw[r][k] = softmax_access::ld16_if<PATH>(xr + c * VEC, ok[r][k]);
    }
  }
  float v[R][K][VEC];
  float mx[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    mx[r] = -INFINITY;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      ksuite::raw_to_floats<T>(raw[r][k], v[r][k]);
      float pm = v[r][k][0];
#pragma unroll
      for (int e = 1; e < VEC; ++e) pm = fmaxf(pm, v[r][k][e]);
      if (ok[r][k]) mx[r] = fmaxf(mx[r], pm);
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    if (off < lanes) {
#pragma unroll
      for (int r = 0; r < R; ++r) mx[r] = fmaxf(mx[r], ksuite::shfl_xor(mx[r], off));
    }
  }
  // exp(v - max) = 2^(v log2 e - max log2 e); a row of -inf alone gives NaN, as torch does.
  float sum[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float mb = mx[r] * kLog2e;
    sum[r] = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        v[r][k][e] = ksuite::ex2_approx(fmaf(v[r][k][e], kLog2e, -mb));
        s += v[r][k][e];
      }
      if (ok[r][k]) sum[r] += s;
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    if (off < lanes) {
#pragma unroll
      for (int r = 0; r < R; ++r) sum[r] += ksuite::shfl_xor(sum[r], off);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float inv = ksuite::rcp_approx(sum[r]);
    T* yr = y + (first + int64_t(r) * span) * n;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (ok[r][k]) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[r][k][e] *= inv;
        ksuite::st16_global(yr + (k * lanes + t) * VEC, ksuite::floats_to_raw<T>(v[r][k]));
      }
    }
  }
}

// ------------------------------------------ rows of any length or alignment

// Plans 15-17: a row that does not start on a 16-byte boundary (n not a
// multiple of the pack, or a misaligned base) is a head of < VEC elements
// up to its first boundary, a body of 16-byte packs, and a tail of < VEC
// elements.  The body is loaded and stored as packs, K a thread (all issued
// at once, as plan 1-3); head and tail, at most 2 (VEC - 1) <= 14
// elements, one element each on the row's first threads, loaded with the
// packs.  x and y rows must be equally misaligned (x - y a multiple of 16
// bytes; the launcher checks).  Threads a row as ksuite::plan_regs with K
// packs a thread for the n / VEC packs a body has at most: one warp (4 rows a 128-thread block, shuffles only) for
// up to 32 threads, else a block of a multiple of 32 (one shared-memory
// exchange of the (max, sum) pair).
// RAW (plan 26): the packs stay in registers as loaded and exp is
// computed twice, as in plans 23-25 (a 16-bit pack is 4 registers, its
// floats 8), and the kernel is bounded to <= 48 registers (blocks of <= 256
// threads, 5 of them an SM), so that more rows an SM are in flight: 2053
// bf16 columns at 4 packs a thread are 64-thread blocks, 21 an SM (84 KB),
// where plan 15 uses 64 registers and fits 16.  (8 packs a thread spill
// at that bound.)
constexpr int kRawUnalignedThreads = 256;
constexpr int kRawUnalignedBlocks = 5;
template <typename T, int K, bool BLOCK, int PATH, bool RAW = false>
__global__ void __launch_bounds__(RAW ? kRawUnalignedThreads : BLOCK ? regs_max_threads(ksuite::vec16<T>() * K) : 128,
                                  RAW ? kRawUnalignedBlocks : 1)
softmax_unaligned_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t m, int n) {
  constexpr int VEC = ksuite::vec16<T>();
  constexpr float kLog2e = 1.4426950408889634f;
  __shared__ float2 red[32];
  const int tpr = BLOCK ? static_cast<int>(blockDim.x) : 32;
  const int t = BLOCK ? static_cast<int>(threadIdx.x) : static_cast<int>(threadIdx.x & 31);
  const int64_t row = BLOCK ? int64_t(blockIdx.x) : int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  // Threads past the last row run with an empty row: the reductions need them.
  const int cols = row < m ? n : 0;
  const T* xr = x + row * n;
  T* yr = y + row * n;
  const int head = min(cols, softmax_access::to_boundary(xr));
  const int body = (cols - head) / VEC;   // packs
  const int edges = cols - body * VEC;     // head + tail elements
  const int e = t < head ? t : t + body * VEC;  // this thread's head or tail element (t < edges)
  const T* xb = xr + head;                 // 16-byte aligned
  uint4 raw[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = k * tpr + t;
    raw[k] = softmax_access::ld16_if<PATH>(xb + c * VEC, c < body);
  }
  float ev = softmax_access::ld_elem_if<T, PATH>(xr + e, t < edges);  // -inf where none
  float v[RAW ? 1 : K][VEC];  // RAW: one pack's floats at a time
  float mx = ev;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    float* f = v[RAW ? 0 : k];
    ksuite::raw_to_floats<T>(raw[k], *reinterpret_cast<float(*)[VEC]>(f));
    float pm = f[0];
#pragma unroll
    for (int i = 1; i < VEC; ++i) pm = fmaxf(pm, f[i]);
    if (k * tpr + t < body) mx = fmaxf(mx, pm);
  }
  // Exponents relative to the thread's own max (0 if it holds no value).
  const float base = mx == -INFINITY ? 0.0f : mx;
  const float bl = base * kLog2e;
  ev = ksuite::ex2_approx(fmaf(ev, kLog2e, -bl));  // 0 for -inf
  float sum = ev;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    float* f = v[RAW ? 0 : k];
    if constexpr (RAW) ksuite::raw_to_floats<T>(raw[k], *reinterpret_cast<float(*)[VEC]>(f));
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      f[i] = ksuite::ex2_approx(fmaf(f[i], kLog2e, -bl));
      s += f[i];
    }
    if (k * tpr + t < body) sum += s;
  }
  const float2 row_ms = ksuite::group_reduce(make_float2(mx, sum), tpr, red, make_float2(-INFINITY, 0.0f),
                                             MergeMS{});
  const float scale = mx == -INFINITY ? 0.0f : ksuite::exp_approx(base - row_ms.x) * ksuite::rcp_approx(row_ms.y);
  T* yb = yr + head;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = k * tpr + t;
    if (c < body) {
      float* f = v[RAW ? 0 : k];
      if constexpr (RAW) {
        ksuite::raw_to_floats<T>(raw[k], *reinterpret_cast<float(*)[VEC]>(f));
#pragma unroll
        for (int i = 0; i < VEC; ++i) f[i] = ksuite::ex2_approx(fmaf(f[i], kLog2e, -bl));
      }
#pragma unroll
      for (int i = 0; i < VEC; ++i) f[i] *= scale;
      ksuite::st16_global(yb + c * VEC, ksuite::floats_to_raw<T>(*reinterpret_cast<float(*)[VEC]>(f)));
    }
  }
  softmax_access::st_elem_if(yr + e, ev * scale, t < edges);
}

// ------------------------------------- rows in registers as loaded (16-bit)

// The two halves of a cluster barrier: arrive once done reading other CTAs'
// shared memory, wait before leaving, so that the wait overlaps the stores.
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Plans 23-25, 27, 28: the row, or over a cluster of 2-8 CTAs one slice of it, held
// in registers as its raw 16-byte packs, K a thread, all issued at once;
// exp is computed twice (for the sum, then for the output) instead of
// being kept.  A 16-bit pack is 4 registers where its floats are 8, so a
// resident SM holds twice the bytes of plans 1-3 for the same registers:
// bf16 32768 columns are 512 threads x 8 packs, two CTAs an SM (128 KB in
// flight), where plan 1 (1024 threads x 4 packs as floats) fills the SM
// with one 64 KB row and stalls through its reductions.  The slices'
// (max, sum) pairs are swapped through distributed shared memory.
//
// PATH: the loads' cache path.  HALF_E (16-bit T only, plan 28): the second
// exp is not computed; each pack's exp(v - the thread's max), all in (0, 1],
// replaces the pack in its registers as 4 words of half2 (relative error
// 2^-11, a quarter of a bf16 rounding) and is scaled for the output.
template <typename T, int THREADS, int K, int MIN_BLOCKS, int PATH = ksuite::kNcStream, bool HALF_E = false>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
softmax_raw_kernel(const T* __restrict__ x, T* __restrict__ y, int n, int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  namespace cg = cooperative_groups;
  constexpr int VEC = ksuite::vec16<T>();
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr bool kHalfE = HALF_E && sizeof(T) == 2;  // (the launcher runs HALF_E for 16-bit T only)
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ float2 red[32];
  __shared__ float2 partial, total;
  const int ctas = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t row = blockIdx.x / ctas;
  const int p0 = rank * chunk;
  const int count = max(0, min(n / VEC - p0, chunk));
  const T* xs = x + row * n + int64_t(p0) * VEC;
  uint4 raw[K];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int i = j * THREADS + static_cast<int>(threadIdx.x);
    raw[j] = ksuite::ld16_if<PATH>(xs + int64_t(i) * VEC, i < count);
  }
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    if (j * THREADS + static_cast<int>(threadIdx.x) < count) {
      float v[VEC];
      ksuite::raw_to_floats<T>(raw[j], v);
#pragma unroll
      for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, v[k]);
    }
  }
  // Exponents relative to the thread's own max (0 if it holds no value).
  const float bl = (mx == -INFINITY ? 0.0f : mx) * kLog2e;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    if (j * THREADS + static_cast<int>(threadIdx.x) < count) {
      float v[VEC];
      ksuite::raw_to_floats<T>(raw[j], v);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        v[k] = ksuite::ex2_approx(fmaf(v[k], kLog2e, -bl));
        sum += v[k];
      }
      if constexpr (kHalfE) raw[j] = ksuite::floats_to_raw<c10::Half>(v);
    }
  }
  float2 tot = ksuite::group_reduce(make_float2(mx, sum), THREADS, red, make_float2(-INFINITY, 0.0f), MergeMS{});
  if (ctas > 1) {
    if (threadIdx.x == 0) partial = tot;
    cluster.sync();  // every CTA's pair is in its shared memory
    if (threadIdx.x < 32) {
      float2 p = static_cast<int>(threadIdx.x) < ctas ? *cluster.map_shared_rank(&partial, threadIdx.x)
                                                       : make_float2(-INFINITY, 0.0f);
#pragma unroll
      for (int off = 4; off > 0; off >>= 1) p = MergeMS{}(p, ksuite::shfl_xor(p, off));  // ctas <= 8
      if (threadIdx.x == 0) total = p;
    }
    cluster_arrive_release();  // done reading the other CTAs' pairs (waited for before exit)
    __syncthreads();
    tot = total;
  }
  // An all -inf row gives zeros, as the other plans.  y = 2^(v log2 e - c)
  // with c = log2(row max) + log2(row sum): one FMA and one exp an element.
  const float c = tot.x == -INFINITY ? 0.0f : fmaf(tot.x, kLog2e, ksuite::lg2_approx(tot.y));
  // HALF_E: y = e * 2^(the thread's max - c), e as kept
  const float scale = tot.x == -INFINITY || mx == -INFINITY ? 0.0f : ksuite::ex2_approx(bl - c);
  T* ys = y + row * n + int64_t(p0) * VEC;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int i = j * THREADS + static_cast<int>(threadIdx.x);
    if (i < count) {
      float v[VEC];
      if constexpr (kHalfE) {
        ksuite::raw_to_floats<c10::Half>(raw[j], v);
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] *= scale;
      } else {
        ksuite::raw_to_floats<T>(raw[j], v);
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = ksuite::ex2_approx(fmaf(v[k], kLog2e, -c));
      }
      ksuite::st16_global(ys + int64_t(i) * VEC, ksuite::floats_to_raw<T>(v));
    }
  }
  if (ctas > 1) cluster_wait_acquire();  // no CTA leaves while another may read its pair
#endif
}

// ------------------------------------------------------------- launchers

constexpr int kVariants = 33;

template <typename T, int VEC, int PACKS>
bool launch_regs(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  const ksuite::RegPlan plan = ksuite::plan_regs(n, VEC, PACKS, regs_max_threads(VEC * PACKS));
  if (plan.tpr == 0) return false;
  const int64_t rows_per_block = plan.threads / plan.tpr;
  const int64_t grid = (m + rows_per_block - 1) / rows_per_block;
  if (grid > 0x7fffffff) return false;
  softmax_regs_kernel<T, VEC, PACKS><<<static_cast<unsigned>(grid), plan.threads, 0, stream>>>(
      x, y, m, static_cast<int>(n), plan.tpr);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// CTAs (a power of two <= 8) for slices of <= target bytes; larger slices at
// 8 CTAs up to the shared memory a block may have; 0: does not fit.
inline int tma_ctas(int64_t packs, int64_t target, int smem_limit) {
  for (int c = 1; c <= 8; c *= 2)
    if ((packs + c - 1) / c * 16 <= target) return c;
  return (packs + 7) / 8 * 16 + 2048 <= smem_limit ? 8 : 0;
}

template <typename T>
bool launch_tma(const T* x, T* y, int64_t m, int64_t n, int64_t target, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if (ksuite::compute_major() < 9 || n % VEC != 0 || n > 0x7fffffff) return false;
  const int64_t packs = n / VEC;
  const int ctas = tma_ctas(packs, target, ksuite::max_smem_optin());
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff)) return false;
  const int chunk = static_cast<int>((packs + ctas - 1) / ctas);
  ksuite::launch_clustered(softmax_tma_kernel<T>, static_cast<unsigned>(m * ctas), kTmaThreads, chunk * 16,
                           ctas, stream, x, y, static_cast<int>(n), chunk);
  return true;
}

// CTAs (a power of two <= 8) for slices of <= target bytes, STAGES buffers a
// CTA; larger slices at 8 CTAs while STAGES of them fit a block's shared
// memory; 0: does not fit.
inline int persistent_ctas(int64_t packs, int64_t target, int stages, int smem_limit) {
  for (int c = 1; c <= 8; c *= 2)
    if ((packs + c - 1) / c * 16 <= target) return c;
  return (packs + 7) / 8 * 16 * stages + 2048 <= smem_limit ? 8 : 0;
}

// Plans 8-10: persistent clusters, STAGES slice buffers a CTA of <= target
// bytes each.  One cluster a row at most (m < clusters launches m).
template <typename T, int STAGES, int THREADS, int MIN_BLOCKS>
bool launch_tma_persistent(const T* x, T* y, int64_t m, int64_t n, int64_t target, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if (ksuite::compute_major() < 9 || n % VEC != 0 || n > 0x7fffffff) return false;
  const int64_t packs = n / VEC;
  const int ctas = persistent_ctas(packs, target, STAGES, ksuite::max_smem_optin());
  if (ctas == 0) return false;
  const int chunk = static_cast<int>((packs + ctas - 1) / ctas);
  const int smem = STAGES * chunk * 16;
  auto kernel = softmax_tma_persistent_kernel<T, STAGES, THREADS, MIN_BLOCKS>;
  const int clusters = max_active_clusters(kernel, THREADS, smem, ctas);
  if (clusters <= 0) return false;
  const int64_t grid = std::min<int64_t>(m, clusters) * ctas;
  ksuite::launch_clustered(kernel, static_cast<unsigned>(grid), THREADS, smem, ctas, stream, x, y, m,
                           static_cast<int>(n), chunk);
  return true;
}

// The fewest CTAs (a power of two <= 8) of per_cta packs each that hold a
// row of `packs`; 0 when 8 do not.
inline int fewest_ctas(int64_t packs, int64_t per_cta) {
  for (int c = 1; c <= 8; c *= 2)
    if ((packs + c - 1) / c <= per_cta) return c;
  return 0;
}

// Plans 18-22, 29: persistent clusters of the fewest CTAs whose THREADS x KP
// packs hold the row; STAGES buffers a CTA.
template <typename T, int STAGES, int THREADS, int KP, int MIN_BLOCKS, bool HALF_E = false>
bool launch_tma_regs(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if constexpr (HALF_E && sizeof(T) != 2) return false;  // half2 exps: 16-bit outputs only
  if (ksuite::compute_major() < 9 || n % VEC != 0 || n > 0x7fffffff) return false;
  const int64_t packs = n / VEC;
  const int ctas = fewest_ctas(packs, int64_t(THREADS) * KP);
  if (ctas == 0) return false;
  const int chunk = static_cast<int>((packs + ctas - 1) / ctas);
  const int smem = STAGES * chunk * 16;
  auto kernel = softmax_tma_regs_kernel<T, STAGES, THREADS, KP, MIN_BLOCKS, HALF_E>;
  const int clusters = max_active_clusters(kernel, THREADS, smem, ctas);
  if (clusters <= 0) return false;
  const int64_t grid = std::min<int64_t>(m, clusters) * ctas;
  ksuite::launch_clustered(kernel, static_cast<unsigned>(grid), THREADS, smem, ctas, stream, x, y, m,
                           static_cast<int>(n), chunk);
  return true;
}

// Plans 23-25, 27, 28: clusters of the fewest CTAs whose THREADS x K packs
// hold the row.
template <typename T, int THREADS, int K, int MIN_BLOCKS, int PATH = ksuite::kNcStream, bool HALF_E = false>
bool launch_raw(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if constexpr (HALF_E && sizeof(T) != 2) return false;  // half2 exps: 16-bit outputs only
  if (ksuite::compute_major() < 9 || n % VEC != 0 || n > 0x7fffffff) return false;
  const int64_t packs = n / VEC;
  const int ctas = fewest_ctas(packs, int64_t(THREADS) * K);
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff)) return false;
  const int chunk = static_cast<int>((packs + ctas - 1) / ctas);
  ksuite::launch_clustered(softmax_raw_kernel<T, THREADS, K, MIN_BLOCKS, PATH, HALF_E>, static_cast<unsigned>(m * ctas),
                           THREADS, 0, ctas, stream, x, y, static_cast<int>(n), chunk);
  return true;
}

template <typename T, int VEC>
bool launch_cluster(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  const int64_t packs = n / VEC;
  const int ctas = ksuite::cluster_ctas(packs, sizeof(Pack<T, VEC>), ksuite::max_smem_optin());
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff) || ksuite::compute_major() < 9) return false;
  const int64_t chunk = (packs + ctas - 1) / ctas;
  ksuite::launch_clustered(softmax_cluster_kernel<T, VEC>, static_cast<unsigned>(m * ctas), kClusterThreads,
                           static_cast<int>(chunk * sizeof(Pack<T, VEC>)), ctas, stream, x, y, n, chunk);
  return true;
}

template <typename T, int VEC>
void launch_stream(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(std::min<int64_t>(m, ksuite::sm_count()));
  softmax_stream_kernel<T, VEC><<<grid, 1024, 0, stream>>>(x, y, m, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Plans 11-14: the short-row kernel with `slots` packs a lane (R = slots / K
// rows a lane group, at least 1), `warps` warps a block.  Rows of 1..128
// packs only (K <= 4).
constexpr int kWarpRowsMaxPacks = 128;

template <typename T, int K, int R, int PATH>
bool launch_warp_rows_k(const T* x, T* y, int64_t m, int64_t n, int warps, int lanes_log2, cudaStream_t stream) {
  const int64_t rows_per_block = int64_t(warps) * R * (32 >> lanes_log2);
  const int64_t grid = (m + rows_per_block - 1) / rows_per_block;
  if (grid > 0x7fffffff) return false;
  softmax_warp_rows_kernel<T, K, R, PATH><<<static_cast<unsigned>(grid), warps * 32, 0, stream>>>(
      x, y, m, static_cast<int>(n), lanes_log2);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

template <typename T, int SLOTS, int PATH>
bool launch_warp_rows(const T* x, T* y, int64_t m, int64_t n, int warps, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  const int64_t packs = n / VEC;
  if (n % VEC != 0 || packs < 1 || packs > kWarpRowsMaxPacks) return false;
  if (packs <= 32) {
    int lanes_log2 = 0;
    while ((int64_t(1) << lanes_log2) < packs) ++lanes_log2;
    return launch_warp_rows_k<T, 1, SLOTS, PATH>(x, y, m, n, warps, lanes_log2, stream);
  }
  constexpr int R2 = SLOTS / 2 > 0 ? SLOTS / 2 : 1, R4 = SLOTS / 4 > 0 ? SLOTS / 4 : 1;
  if (packs <= 64) return launch_warp_rows_k<T, 2, R2, PATH>(x, y, m, n, warps, 5, stream);
  return launch_warp_rows_k<T, 4, R4, PATH>(x, y, m, n, warps, 5, stream);
}

// Plans 15-17: any n (K packs a thread, threads a row as plan_regs), when
// x and y rows are equally misaligned.
template <typename T, int K, bool RAW = false>
bool launch_unaligned(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  constexpr int PATH = softmax_access::kPlain;
  if (((reinterpret_cast<std::uintptr_t>(x) - reinterpret_cast<std::uintptr_t>(y)) & 15u) != 0) return false;
  // Threads for the body only: at most n / VEC packs whatever the row's
  // misalignment (2053 bf16: 256 packs, 64 threads at 4 packs; sized for
  // ceil(n / VEC) = 257 it would be 96, a third of them idle after the first
  // packs).  Head and tail go to the first <= 2 (VEC - 1) threads.
  const ksuite::RegPlan plan =
      ksuite::plan_regs(n / VEC * VEC, VEC, K, RAW ? kRawUnalignedThreads : regs_max_threads(VEC * K));
  if (plan.tpr == 0) return false;
  if (plan.tpr <= 32) {
    const int64_t grid = (m + 3) / 4;
    softmax_unaligned_kernel<T, K, false, PATH, RAW><<<static_cast<unsigned>(grid), 128, 0, stream>>>(
        x, y, m, static_cast<int>(n));
  } else {
    softmax_unaligned_kernel<T, K, true, PATH, RAW><<<static_cast<unsigned>(m), plan.tpr, 0, stream>>>(
        x, y, m, static_cast<int>(n));
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// Auto, chosen by a variant sweep on the H200 (softmax_v runs each plan): rows
// in registers at 2 packs a thread for float32 and for 16-bit rows up to 1024
// columns, else 4 packs; rows too long for registers go to a cluster: float32
// with register loads (faster there than TMA), 16-bit with TMA into 64 KB
// slices (faster than 32 KB); else two reads.
template <typename T, int VEC>
void launch_auto(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  if constexpr (VEC > 1) {
    if ((VEC == 4 || n <= 1024) && launch_regs<T, VEC, 2>(x, y, m, n, stream)) return;
  }
  if (launch_regs<T, VEC, VEC == 1 ? 8 : 4>(x, y, m, n, stream)) return;
  if constexpr (VEC == 8) {
    if (launch_tma<T>(x, y, m, n, 64 * 1024, stream)) return;
  }
  if (launch_cluster<T, VEC>(x, y, m, n, stream)) return;
  if constexpr (VEC == 4) {
    if (launch_tma<T>(x, y, m, n, 64 * 1024, stream)) return;
  }
  launch_stream<T, VEC>(x, y, m, n, stream);
}

template <typename T, int VEC>
void launch(const T* x, T* y, int64_t m, int64_t n, int variant, cudaStream_t stream) {
  bool done = false;
  switch (variant) {  // any row length and alignment (VEC == 1 too)
    case 15: done = launch_unaligned<T, 4>(x, y, m, n, stream); break;
    case 16: done = launch_unaligned<T, 2>(x, y, m, n, stream); break;
    case 17: done = launch_unaligned<T, 8>(x, y, m, n, stream); break;
    case 26: done = launch_unaligned<T, 4, true>(x, y, m, n, stream); break;
    default: break;
  }
  if constexpr (VEC > 1) {  // rows on 16-byte boundaries
    using softmax_access::kNc;
    using softmax_access::kPlain;
    if (!done) switch (variant) {
      case 1: done = launch_regs<T, VEC, 4>(x, y, m, n, stream); break;
      case 2: done = launch_regs<T, VEC, 2>(x, y, m, n, stream); break;
      case 3: done = launch_regs<T, VEC, 8>(x, y, m, n, stream); break;
      case 4: done = launch_tma<T>(x, y, m, n, 32 * 1024, stream); break;
      case 5: done = launch_tma<T>(x, y, m, n, 64 * 1024, stream); break;
      case 6: done = launch_cluster<T, VEC>(x, y, m, n, stream); break;
      case 7: launch_stream<T, VEC>(x, y, m, n, stream); done = true; break;
      case 8: done = launch_tma_persistent<T, 2, 512, 1>(x, y, m, n, 64 * 1024, stream); break;
      case 9: done = launch_tma_persistent<T, 2, 256, 3>(x, y, m, n, 32 * 1024, stream); break;
      case 10: done = launch_tma_persistent<T, 3, 512, 1>(x, y, m, n, 64 * 1024, stream); break;
      case 11: done = launch_warp_rows<T, 2, kPlain>(x, y, m, n, 4, stream); break;
      case 12: done = launch_warp_rows<T, 1, kPlain>(x, y, m, n, 4, stream); break;
      case 13: done = launch_warp_rows<T, 4, kPlain>(x, y, m, n, 1, stream); break;
      case 14: done = launch_warp_rows<T, 2, kNc>(x, y, m, n, 4, stream); break;
      case 18: done = launch_tma_regs<T, 2, 512, 4, 2>(x, y, m, n, stream); break;
      case 19: done = launch_tma_regs<T, 2, 256, 8, 2>(x, y, m, n, stream); break;
      case 20: done = launch_tma_regs<T, 2, 1024, 4, 1>(x, y, m, n, stream); break;
      case 21: done = launch_tma_regs<T, 3, 256, 8, 2>(x, y, m, n, stream); break;
      case 22: done = launch_tma_regs<T, 3, 512, 4, 2>(x, y, m, n, stream); break;
      case 23: done = launch_raw<T, 512, 8, 2>(x, y, m, n, stream); break;
      case 24: done = launch_raw<T, 256, 8, 4>(x, y, m, n, stream); break;
      case 25: done = launch_raw<T, 1024, 8, 1>(x, y, m, n, stream); break;
      case 27: done = launch_raw<T, 512, 8, 2, kPlain>(x, y, m, n, stream); break;
      case 28: done = launch_raw<T, 512, 8, 2, kPlain, true>(x, y, m, n, stream); break;
      case 29: done = launch_tma_regs<T, 2, 256, 8, 3, true>(x, y, m, n, stream); break;
      case 30: done = launch_tma_regs<T, 2, 512, 8, 1, true>(x, y, m, n, stream); break;
      case 31: done = launch_tma_regs<T, 1, 512, 8, 1, true>(x, y, m, n, stream); break;
      case 32: done = launch_tma_regs<T, 1, 512, 16, 1, true>(x, y, m, n, stream); break;
      case 33: done = launch_tma_regs<T, 1, 1024, 8, 1, true>(x, y, m, n, stream); break;
      default: break;
    }
  }
  if (!done) launch_auto<T, VEC>(x, y, m, n, stream);
}

at::Tensor softmax_run(const at::Tensor& x, int64_t variant, const char* op) {
  KSUITE_CHECK(x.is_cuda(), op, ": x must be a CUDA tensor, got one on ", x.device());
  KSUITE_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf ||
                   x.scalar_type() == at::kBFloat16,
               op, ": x must be float32, float16 or bfloat16, got ", x.scalar_type());
  KSUITE_CHECK(x.dim() >= 1, op, ": x must have at least one dimension, got a 0-dim tensor");
  KSUITE_CHECK(x.is_contiguous(), op, ": x must be contiguous (call .contiguous() first)");
  KSUITE_CHECK(variant >= 0 && variant <= kVariants, op, ": variant must be 0 (auto) .. ", kVariants,
               ", got ", variant);
  const int64_t n = x.size(-1);
  const int64_t m = n == 0 ? 0 : x.numel() / n;
  KSUITE_CHECK(m <= int64_t(0x7fffffff), op, ": too many rows (", m, ")");
  KSUITE_CHECK(n <= int64_t(0x7fffffff), op, ": rows longer than 2^31 - 1 columns (", n, ")");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  cudaStream_t stream = ksuite::current_stream();
  KSUITE_DISPATCH_FLOATS(x.scalar_type(), "ksuite_softmax", [&] {
    constexpr int VEC = ksuite::vec16<scalar_t>();
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    scalar_t* yp = y.mutable_data_ptr<scalar_t>();
    // Rows start on 16-byte boundaries only when n is a multiple of VEC.
    if (n % VEC == 0 && ksuite::aligned16(xp) && ksuite::aligned16(yp)) {
      launch<scalar_t, VEC>(xp, yp, m, n, static_cast<int>(variant), stream);
    } else {
      launch<scalar_t, 1>(xp, yp, m, n, static_cast<int>(variant), stream);
    }
  });
  return y;
}

at::Tensor softmax_cuda(const at::Tensor& x) { return softmax_run(x, 0, "kernel_suite::softmax"); }

at::Tensor softmax_v_cuda(const at::Tensor& x, int64_t variant) {
  return softmax_run(x, variant, "kernel_suite::softmax_v");
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("softmax(Tensor x) -> Tensor");
  m.def("softmax_v(Tensor x, int variant) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("softmax", &softmax_cuda);
  m.impl("softmax_v", &softmax_v_cuda);
}
