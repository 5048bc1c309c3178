// softmax.cu's plans that keep a row, or a cluster's slice of one, in
// registers as loaded: 1-3 (floats, a warp or a block a row), 11-14 (short
// rows, several a lane group), 15-17 and 26 (any alignment), 23-25, 27 and
// 28 (raw 16-bit packs, exp twice or kept as half2).
#pragma once

#include <cooperative_groups.h>

#include "softmax_access.cuh"
#include "softmax_common.cuh"

namespace {

// ---------------------------------------------------------------- registers

template <typename T, int VEC, int PACKS>
__global__ void __launch_bounds__(softmax_regs_max_threads(VEC * PACKS))
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
  const float scale = row_ms.x == -INFINITY ? kNoSoftmax
                      : mx == -INFINITY      ? 0.0f
                                             : ksuite::exp_approx(base - row_ms.x) / row_ms.y;
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
// 11 and 12 are the shapes of the Triton kernel's winners at 2097152 x 128
// (4 warps, 8 or 16 rows), 13 its float32 one (4 rows on one warp).
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
__global__ void __launch_bounds__(RAW ? kRawUnalignedThreads : BLOCK ? softmax_regs_max_threads(ksuite::vec16<T>() * K) : 128,
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
  const float scale = row_ms.x == -INFINITY ? kNoSoftmax
                      : mx == -INFINITY      ? 0.0f
                                             : ksuite::exp_approx(base - row_ms.x) * ksuite::rcp_approx(row_ms.y);
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
  // y = 2^(v log2 e - c) with c = log2(row max) + log2(row sum): one FMA
  // and one exp an element.  An all -inf row: c and y NaN (kNoSoftmax).
  const float c = tot.x == -INFINITY ? kNoSoftmax : fmaf(tot.x, kLog2e, ksuite::lg2_approx(tot.y));
  // HALF_E: y = e * 2^(the thread's max - c), e as kept
  const float scale = tot.x == -INFINITY ? kNoSoftmax : mx == -INFINITY ? 0.0f : ksuite::ex2_approx(bl - c);
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

}  // namespace
