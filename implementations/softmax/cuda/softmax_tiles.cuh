// softmax.cu's plans 34 and 35: short rows of any width (1..256 columns)
// and any alignment, a tile of whole rows a block, staged in shared memory.
//
// Why: rows of 7 bf16 (14 bytes) start on no 16-byte boundary, so the
// register plans load them an element an instruction (or as a scalar head
// and tail around no body at all), and millions of such rows a row or a
// lane group at a time leave the H200 at a fifth of copy bandwidth.  Rows
// are contiguous, so R of them are one contiguous run of R * N elements:
// copied in and out with 16-byte accesses, as a memcpy of the tile would.
//
// A tile is R rows, R chosen by the launcher so that R * N * sizeof(T) is
// a multiple of 16 (every tile starts where the first did: on a boundary
// when the tensor does) and R fills the shared buffer.  By a tensor's
// 16-byte boundaries a tile is a head of < VEC elements, a body of 16-byte
// packs and a tail of < VEC elements (both empty when the tile is aligned
// and whole).  Element i of the tile sits in shared memory at byte
// (x_tile mod 16) + i * sizeof(T), so x's body packs land on 16-byte
// boundaries there too: cp.async copies them (no registers, all a thread's
// copies in flight at once), and the <= 2 (VEC - 1) head and tail elements
// go through registers on the block's first threads.  y's tile is stored
// by y's own boundaries: 16-byte shared loads where y is misaligned as x is
// (always, for an aligned x: y comes from the allocator), else each pack
// gathered from its elements.
//
// Rows are computed from shared memory in float32 by groups of G lanes (a
// power of two, tile_lanes_log2), lane l of a group holding columns l,
// l + G, ... (Q = ceil(N / G) <= 8 of them, Q a compile-time constant of
// the row loop) in registers: the row max and the sum of exp by shuffles
// within the group (none at G = 1, where the column offsets are constants
// too), one exp an element, and the outputs written back in place.  G is
// the fewest lanes whose slots hold the row and whose reads conflict in
// shared memory at most sizeof(T) ways: N = 7 a row a thread, float32
// N = 64 8 lanes, bf16 N = 64 16 lanes.  Every lane of a warp runs the same
// number of row rounds (the round count is the block's), so the shuffles
// always see full warps.
//
// Plan 34 (STAGES = 1): one tile a block, a grid of every tile; a block's
// loads are in flight while other blocks on its SM compute and store.
// Plan 35 (STAGES = 2): persistent blocks (as many as fit the GPU at once),
// each walking tiles blockIdx.x, + gridDim.x, ...: the next tile's copies
// are issued before the current one is computed and stored, so a block
// always has a tile's loads in flight.  Both: 256 threads, <= 40 registers
// (6 blocks an SM, 6 x 16 KB of shared memory: plan 34 keeps up to 96 KB
// of loads in flight an SM, plan 35 48 KB through its compute and stores;
// ~32 KB an SM carry the H200's bandwidth).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "softmax_common.cuh"

namespace {

constexpr int kTileQ = 8;           // columns a lane holds: G * kTileQ >= N
constexpr int kTileMaxCols = 256;   // 32 lanes x kTileQ
constexpr int kTileThreads = 256;

// Host: the most distinct 4-byte words one shared-memory bank serves when
// a warp reads one column slot of its groups' rows (rows of n elements of
// `size` bytes, `lanes` lanes a row), over the tile's possible 2-byte
// offsets for 16-bit elements.  (The other slots are this one shifted by
// lanes * size bytes: the same pattern, or the other offset.)
inline int tile_bank_ways(int n, int size, int lanes) {
  int worst = 1;
  for (int shift = 0; shift < 4; shift += size) {
    int word[32], count[32] = {};
    for (int i = 0; i < 32; ++i) {
      word[i] = (shift + (i / lanes * n + i % lanes) * size) / 4;
      bool seen = false;
      for (int j = 0; j < i; ++j) seen = seen || word[j] == word[i];
      if (!seen) worst = std::max(worst, ++count[word[i] % 32]);
    }
  }
  return worst;
}

// Host: lanes a row (log2) for rows of n <= kTileMaxCols elements of
// sizeof(T) bytes: the fewest whose kTileQ slots hold the row and whose
// reads conflict at most sizeof(T) ways in shared memory (float32 4 ways,
// 16-bit 2).  Why that bound: at copy speed an SM moves ~16 bytes a clock,
// 2 float32 or 4 16-bit elements, and the row phase reads and writes each
// once, so c ways cost ~2c / 32 wavefronts an element: ~0.5 a clock at
// c = sizeof(T), of the one a clock an SM's shared memory serves.  More
// lanes cost shuffles instead (a row a lane has none): rows of 8 take 2
// lanes (float32: 8 ways at one lane, 4 at two; 16-bit: 4 and 2).  32
// lanes read 32 consecutive elements, no conflict: the search ends there.
// Cached per n.
template <typename T>
int tile_lanes_log2(int n) {
  static std::atomic<signed char> cache[kTileMaxCols + 1] = {};  // glog + 1; 0: not yet
  const int known = cache[n].load(std::memory_order_relaxed);
  if (known > 0) return known - 1;
  int glog = 0;
  while ((kTileQ << glog) < n) ++glog;
  while (glog < 5 && tile_bank_ways(n, static_cast<int>(sizeof(T)), 1 << glog) > static_cast<int>(sizeof(T))) ++glog;
  cache[n].store(static_cast<signed char>(glog + 1), std::memory_order_relaxed);
  return glog;
}

// An element of T as its bits.
template <typename T>
using TileWord = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;

// One tile: rows [row0, row0 + rows) of x (or y), as head elements, body
// packs and tail elements by the 16-byte boundaries of that tensor.
template <typename T>
struct TileSpan {
  int64_t row0;
  int rows;
  int count;  // elements: rows * n
  int shift;  // (the tile's address mod 16) / sizeof(T): x's is where element 0 sits in the buffer
  int head;   // elements up to the first 16-byte boundary (<= count)
  int body;   // 16-byte packs after the head
  int edges;  // head + tail elements

  __device__ __forceinline__ TileSpan(const T* base, int64_t m, int n, int tile_rows, int64_t tile) {
    constexpr int VEC = ksuite::vec16<T>();
    row0 = tile * tile_rows;
    rows = static_cast<int>(m - row0 < tile_rows ? m - row0 : int64_t(tile_rows));
    count = rows * n;
    const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(base + row0 * n)) & 15u;
    shift = static_cast<int>(mis / sizeof(T));
    head = min(count, static_cast<int>(((16u - mis) & 15u) / sizeof(T)));
    body = (count - head) / VEC;
    edges = count - body * VEC;
  }
  // This thread's head or tail element (valid when t < edges).
  __device__ __forceinline__ int edge(int t) const { return t < head ? t : t + body * ksuite::vec16<T>(); }
  // Byte offset of the body's first pack in a buffer laid out by this
  // tensor's alignment (16 or 0 when body > 0).
  __device__ __forceinline__ int body_offset() const { return (shift + head) * static_cast<int>(sizeof(T)); }
};

// Issues the copies of tile `s` into `buf`: cp.async for the body packs,
// a plain load of this thread's head or tail element into `edge` (stored
// by tile_put_edge once the copies are waited for).
template <typename T, int THREADS>
__device__ __forceinline__ void tile_issue(const TileSpan<T>& s, const T* x, int n, unsigned char* buf,
                                           TileWord<T>& edge) {
  constexpr int VEC = ksuite::vec16<T>();
  const T* xt = x + s.row0 * n;
  const T* xb = xt + s.head;  // 16-byte aligned when s.body > 0
  const uint32_t dst = ksuite::ptx::smem_addr(buf + s.body_offset());
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll 4
  for (int p = t; p < s.body; p += THREADS) ksuite::ptx::cp_async_16(dst + 16u * p, xb + p * VEC, true);
  if (t < s.edges) edge = reinterpret_cast<const TileWord<T>*>(xt)[s.edge(t)];
}

template <typename T>
__device__ __forceinline__ void tile_put_edge(const TileSpan<T>& s, unsigned char* buf, TileWord<T> edge) {
  const int t = static_cast<int>(threadIdx.x);
  if (t < s.edges) reinterpret_cast<TileWord<T>*>(buf)[s.shift + s.edge(t)] = edge;
}

// One element of T at shared address `addr` as float; where !pred, -inf
// (one predicated ld.shared).  The shared-memory accesses here are volatile
// with a memory clobber, so that they stay between the block's barriers.
template <typename T>
__device__ __forceinline__ float lds_elem(uint32_t addr, bool pred = true) {
  const int q = pred;
  if constexpr (sizeof(T) == 4) {
    uint32_t w = 0xff800000u;  // -inf
    asm volatile("{.reg .pred p;\n setp.ne.b32 p, %1, 0;\n @p ld.shared.b32 %0, [%2];}"
                 : "+r"(w) : "r"(q), "r"(addr) : "memory");
    return __uint_as_float(w);
  } else {
    unsigned short h = std::is_same_v<T, c10::Half> ? 0xfc00u : 0xff80u;  // -inf
    asm volatile("{.reg .pred p;\n setp.ne.b32 p, %1, 0;\n @p ld.shared.b16 %0, [%2];}"
                 : "+h"(h) : "r"(q), "r"(addr) : "memory");
    float f[1];
    ksuite::raw_pack_to_floats<T, 1>(static_cast<uint32_t>(h), f);
    return f[0];
  }
}

// v rounded to T, stored at shared `addr`.
template <typename T>
__device__ __forceinline__ void sts_elem(uint32_t addr, float v) {
  if constexpr (sizeof(T) == 4) {
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
  } else {
    asm volatile("st.shared.b16 [%0], %1;" ::"r"(addr), "h"(ksuite::from_float<T>(v).x) : "memory");
  }
}

// The tile's softmax in place: `rows` rows of n elements from shared
// address `tile` (the tile's element 0), groups of 1 << glog lanes a row,
// Q = ceil(n / lanes) columns a lane.  Lane l's columns are l, l + lanes,
// ...: all Q of them, or Q - 1 where lanes does not divide n, so only the
// last slot is predicated.  A group past the tile's last row (the last
// round only) computes that row again and stores nothing.
template <typename T, int THREADS, int Q, bool ONE>
__device__ __forceinline__ void tile_compute(uint32_t tile, int rows, int n, int glog_arg) {
  const int glog = ONE ? 0 : glog_arg;  // ONE: a row a thread (offsets in the instructions, no shuffles)
  const int lanes = 1 << glog;
  const int l = static_cast<int>(threadIdx.x) & (lanes - 1);
  const int group = static_cast<int>(threadIdx.x) >> glog;
  const int groups = THREADS >> glog;
  const bool last = l + (Q - 1) * lanes < n;  // this lane has slot Q - 1
  const uint32_t step = static_cast<uint32_t>(sizeof(T)) << glog;
  for (int base = 0; base < rows; base += groups) {  // the same rounds for every lane of the block
    const int r = base + group;
    const bool live = r < rows;
    const uint32_t a = tile + static_cast<uint32_t>(((live ? r : rows - 1) * n + l) * static_cast<int>(sizeof(T)));
    float v[Q];
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      v[k] = lds_elem<T>(a + k * step, k < Q - 1 || last);
      mx = fmaxf(mx, v[k]);
    }
    for (int off = lanes >> 1; off > 0; off >>= 1) mx = fmaxf(mx, ksuite::shfl_xor(mx, off));
    // exp(v - max) with the difference taken first: finite for any finite
    // inputs (v log2 e - max log2 e overflows for |v| > 2.3e38).  An empty
    // slot (-inf) adds exp(-inf) = 0; a row of -inf alone gives NaN, as
    // torch does.
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < Q; ++k) {
      v[k] = ksuite::exp_approx(v[k] - mx);
      sum += v[k];
    }
    for (int off = lanes >> 1; off > 0; off >>= 1) sum += ksuite::shfl_xor(sum, off);
    const float inv = ksuite::rcp_approx(sum);
    if (live) {
#pragma unroll
      for (int k = 0; k < Q; ++k)
        if (k < Q - 1 || last) sts_elem<T>(a + k * step, v[k] * inv);
    }
  }
}

// tile_compute for the launch's columns a lane, q = ceil(n / lanes) <= kTileQ.
template <typename T, int THREADS, bool ONE>
__device__ __forceinline__ void tile_compute_q(int q, uint32_t tile, int rows, int n, int glog) {
  switch (q) {
    case 1: tile_compute<T, THREADS, 1, ONE>(tile, rows, n, glog); break;
    case 2: tile_compute<T, THREADS, 2, ONE>(tile, rows, n, glog); break;
    case 3: tile_compute<T, THREADS, 3, ONE>(tile, rows, n, glog); break;
    case 4: tile_compute<T, THREADS, 4, ONE>(tile, rows, n, glog); break;
    case 5: tile_compute<T, THREADS, 5, ONE>(tile, rows, n, glog); break;
    case 6: tile_compute<T, THREADS, 6, ONE>(tile, rows, n, glog); break;
    case 7: tile_compute<T, THREADS, 7, ONE>(tile, rows, n, glog); break;
    default: tile_compute<T, THREADS, kTileQ, ONE>(tile, rows, n, glog); break;
  }
}

// Stores the tile from `buf` (laid out by x: element 0 at element slot
// `xshift`) to y, whose span is `s`: 16-byte stores for the body, one
// element for this thread's head or tail element.  Where y's rows are
// misaligned unlike x's (a misaligned view of x, y from the allocator),
// y's packs straddle the buffer's 16-byte boundaries and each is gathered
// from its elements (2- or 4-byte shared loads) instead of one 16-byte load.
template <typename T, int THREADS>
__device__ __forceinline__ void tile_store(const TileSpan<T>& s, int xshift, T* y, int n, const unsigned char* buf) {
  constexpr int VEC = ksuite::vec16<T>();
  T* yt = y + s.row0 * n;
  T* yb = yt + s.head;
  const int t = static_cast<int>(threadIdx.x);
  if (s.shift == xshift) {  // (block-uniform)
    const unsigned char* src = buf + s.body_offset();
#pragma unroll 4
    for (int p = t; p < s.body; p += THREADS)
      ksuite::st16_global(yb + p * VEC, *reinterpret_cast<const uint4*>(src + 16 * p));
  } else {
    const TileWord<T>* src = reinterpret_cast<const TileWord<T>*>(buf) + xshift + s.head;
    for (int p = t; p < s.body; p += THREADS) {
      const TileWord<T>* e = src + p * VEC;
      uint4 v;
      if constexpr (sizeof(T) == 4) {
        v = make_uint4(e[0], e[1], e[2], e[3]);
      } else {
        v = make_uint4(e[0] | uint32_t(e[1]) << 16, e[2] | uint32_t(e[3]) << 16, e[4] | uint32_t(e[5]) << 16,
                       e[6] | uint32_t(e[7]) << 16);
      }
      ksuite::st16_global(yb + p * VEC, v);
    }
  }
  if (t < s.edges) {
    const int e = s.edge(t);
    reinterpret_cast<TileWord<T>*>(yt)[e] = reinterpret_cast<const TileWord<T>*>(buf)[xshift + e];
  }
}

// The rest of tile t once its copies have landed (this thread's: the
// caller waited for them): this thread's head or tail element, the block's
// barrier, the rows, and the stores.
template <typename T>
__device__ __forceinline__ void tile_finish(const T* x, T* y, int64_t m, int n, int tile_rows, int glog, int64_t t,
                                            unsigned char* buf, TileWord<T> edge) {
  const TileSpan<T> cur(x, m, n, tile_rows, t);
  tile_put_edge(cur, buf, edge);
  __syncthreads();  // every thread's copies of this tile have landed
  const uint32_t tile = ksuite::ptx::smem_addr(buf) + cur.shift * sizeof(T);
  const int q = (n + (1 << glog) - 1) >> glog;  // <= kTileQ (the launcher's glog)
  if (glog == 0) {
    tile_compute_q<T, kTileThreads, true>(q, tile, cur.rows, n, glog);
  } else {
    tile_compute_q<T, kTileThreads, false>(q, tile, cur.rows, n, glog);
  }
  __syncthreads();
  // (both spans recomputed: nothing of the tile's but t lives through the row loop)
  tile_store<T, kTileThreads>(TileSpan<T>(y, m, n, tile_rows, t), TileSpan<T>(x, m, n, tile_rows, t).shift, y, n,
                              buf);
}

// Plans 34 (STAGES 1: tile blockIdx.x, a block for each) and 35 (STAGES 2:
// tiles blockIdx.x, + gridDim.x, ...), tiles of tile_rows rows (the
// launcher's: tile_rows * n * sizeof(T) <= TILE_BYTES), `tiles` of them.
template <typename T, int STAGES, int TILE_BYTES, int MIN_BLOCKS>
__global__ void __launch_bounds__(kTileThreads, MIN_BLOCKS)
softmax_tile_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t m, int n, int tile_rows, int glog,
                    int64_t tiles) {
  static_assert(STAGES == 1 || STAGES == 2, "one buffer, or two with the next tile in flight");
  // + 16: the tile starts up to 15 bytes into its buffer; + 16: a whole last pack
  constexpr int kBuf = TILE_BYTES + 32;
  __shared__ alignas(16) unsigned char smem[STAGES][kBuf];
  int64_t t = blockIdx.x;
  if (t >= tiles) return;
  TileWord<T> edge = 0;  // this thread's head or tail element, as loaded
  tile_issue<T, kTileThreads>(TileSpan<T>(x, m, n, tile_rows, t), x, n, smem[0], edge);
  ksuite::ptx::cp_async_commit();
  if constexpr (STAGES == 1) {
    ksuite::ptx::cp_async_wait<0>();
    tile_finish(x, y, m, n, tile_rows, glog, t, smem[0], edge);
  } else {
    for (int i = 0; t < tiles; ++i, t += gridDim.x) {
      // the next tile's copies into the other buffer, then the wait for this tile's only
      TileWord<T> next = 0;
      if (t + gridDim.x < tiles)
        tile_issue<T, kTileThreads>(TileSpan<T>(x, m, n, tile_rows, t + gridDim.x), x, n, smem[(i + 1) & 1], next);
      ksuite::ptx::cp_async_commit();  // (an empty group past the last tile)
      ksuite::ptx::cp_async_wait<1>();
      tile_finish(x, y, m, n, tile_rows, glog, t, smem[i & 1], edge);
      edge = next;
      __syncthreads();  // every thread is done storing from the buffer filled next
    }
  }
}

}  // namespace
