// How the row kernels (softmax, residual_layernorm_gelu) spread a row of n
// columns over threads: in registers (a group of lanes or a whole block a row,
// RegPlan), or for longer rows over the CTAs of one thread-block cluster
// (cluster_ctas), the reductions over a row's threads, and rows of any
// alignment split at their 16-byte boundaries (RowSplit, ld16_words_if).
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

// ---- Rows at any alignment --------------------------------------------------
// A row whose width is not a multiple of the 16-byte pack starts at every
// misalignment in turn, so a kernel that takes it a pack at a time splits each
// row at the 16-byte boundaries inside it: a head of < VEC elements before the
// first boundary, a body of whole packs, and a tail of < VEC elements after
// them.  Arrays that share the row's misalignment (x, y: their addresses
// differ by a multiple of 16 bytes) split the same way.
struct RowSplit {
  int head;   // elements before the first boundary (all n when the row holds none)
  int body;   // whole 16-byte packs from there
  int edges;  // head + tail elements (< 2 VEC)
  int skip;   // body * VEC: edge i >= head is column i + skip
  // The column of edge element i < edges: the head's, then the tail's.
  __host__ __device__ __forceinline__ int edge_col(int i) const { return i < head ? i : i + skip; }
};

// Elements of T from p to the next 16-byte boundary (0 when p is on one).
template <typename T>
__host__ __device__ __forceinline__ int to_boundary(const T* p) {
  const auto low = static_cast<uint32_t>(reinterpret_cast<std::uintptr_t>(p)) & 15u;
  return static_cast<int>(((16u - low) & 15u) / sizeof(T));
}

// The split of the n-element row at p (n == 0: all zero).
template <typename T>
__host__ __device__ __forceinline__ RowSplit split_row(const T* p, int n) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  RowSplit s;
  s.head = std::min(n, to_boundary(p));
  s.body = (n - s.head) / VEC;
  s.skip = s.body * VEC;
  s.edges = n - s.skip;
  return s;
}

// Bits [bits, bits + 32) of the 64-bit hi:lo (bits < 32).
__host__ __device__ __forceinline__ uint32_t funnel_right(uint32_t lo, uint32_t hi, uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, bits);
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> bits);
#endif
}

// The 16 bytes that start `odd` bytes (0, or 2 for 16-bit T) into the words
// w[0..4] (little-endian: element k of the result is element odd / 2 + k of
// the words): w[0..3] as they are, or each pair funnel-shifted by 16 bits.
// w[4] is not used when odd == 0.
template <typename T>
__host__ __device__ __forceinline__ uint4 join_words(const uint32_t (&w)[5], uint32_t odd) {
  if constexpr (sizeof(T) == 4) {
    return make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    static_assert(sizeof(T) == 2, "16- or 32-bit elements");
    const uint32_t bits = odd * 8u;
    return make_uint4(funnel_right(w[0], w[1], bits), funnel_right(w[1], w[2], bits),
                      funnel_right(w[2], w[3], bits), funnel_right(w[3], w[4], bits));
  }
}

// `pred ? the 16 bytes at p : undefined` where p is on an element but not
// necessarily on a 16-byte boundary (a column-indexed parameter, such as a
// LayerNorm weight, read at a split row's body columns): four 32-bit loads
// (ld.global.nc) from p rounded down to 4 bytes, and for 16-bit T 2 bytes
// past a word a fifth (join_words).  Every word read holds an element of the
// 16 bytes, so none lies outside their allocation.  Lanes 16 bytes apart
// touch 4 lines a load, as a 16-byte load of contiguous lanes does: 4 or 5
// such loads where one a 16-bit element would take 8, and 4 or 5 registers
// where the two aligned packs around p would take 8.
template <typename T>
__device__ __forceinline__ uint4 ld16_words_if(const T* p, bool pred) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const uint32_t* wp = reinterpret_cast<const uint32_t*>(a & ~std::uintptr_t(3));
  const uint32_t odd = static_cast<uint32_t>(a) & 2u;  // 0 for float
  const int q = pred, q4 = pred && odd != 0;
  uint32_t w[5];
#pragma unroll
  for (int i = 0; i < 4; ++i) KSUITE_LD_IF("ld.global.nc.b32 %0, [%2]", 1, "=r"(w[i]) : "r"(q), "l"(wp + i));
  w[4] = 0;
  if constexpr (sizeof(T) == 2) KSUITE_LD_IF("ld.global.nc.b32 %0, [%2]", 1, "+r"(w[4]) : "r"(q4), "l"(wp + 4));
  return join_words<T>(w, odd);
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
