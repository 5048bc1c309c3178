// C = A @ B for skinny A (M <= 16 rows): row-major A (M x K), B (K x N),
// C (M x N), float16 or bfloat16 with fp32 accumulation, or float32 (the FMA
// form, one element a load: exact float32).
//
// With so few rows the product is a stream over B (K*N elements, each used M
// times): a tensor-core tile of 128 rows would be almost all padding, and one
// row of such tiles leaves most SMs idle.  Two forms, both splitting K over
// the grid so that it fills one wave of the SMs whatever N is:
//  - where rows of B are whole 16-byte packs (N % 8 == 0, B 16-byte
//    aligned), the tensor-core form (skinny_mma_kernel, below): A's rows are
//    the 16-row operand of mma.sync, B streams through per-warp rings in
//    shared memory;
//  - else the FMA form (skinny_kernel), 2-byte loads of B.
// The FMA form:
//  - a block of 8 warps owns 256 consecutive columns of C; each thread owns 8
//    of them (VEC: one 16-byte pack of B along N, columns lane*8 .. lane*8+7;
//    otherwise columns lane, lane+32, ..., so that each 2-byte load of a warp
//    is contiguous) and keeps MB x 8 fp32 accumulators, MB the power of two
//    at or above M (1, 2, 4, 8, 16);
//  - K is split over grid.y so that the grid is one wave: the blocks an SM
//    holds (the occupancy API, for the instantiated kernel) times the SMs
//    (split_rows has the rule); within a block, warp w takes rows of B in
//    groups of U (8 packs or 4 rows of 8 scalars in flight per thread), the
//    groups of the 8 warps interleaved, each row converted to fp32 only as
//    it is used, so that an SM holds four blocks for MB <= 2 and two for
//    MB = 4 and 8 (kMinBlocks: the register budget ptxas is given);
//  - the U rows of A a warp needs go to its own slice of shared memory (so
//    the warps never wait on each other in the main loop), read back as
//    broadcasts;
//  - at the end the 8 warps' sums meet in shared memory and are added in warp
//    order; with one split that sum is C.  With S splits it is split z's fp32
//    partial, stored in the workspace tile [column block][z][M][256]; the
//    block then adds one to its column block's counter (release: its
//    partial is visible before the count), and the block that brings the
//    count to S (acquire: it sees all S partials) adds the partials in split
//    order, writes C and sets the counter back to zero for the next call.
//    One launch; whichever block finishes last, the sum is the same.
// Every sum is taken in a fixed order, so the result is deterministic.
// The counters are one zeroed buffer per device (split_k.cuh, grown when a
// grid needs more), so calls on one device must not overlap on two streams.
// A is read one element (or, in the tensor-core form, one aligned pair) at a
// time (it is tiny and sits in L2); C is written one element at a time.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <type_traits>

#include "ksuite/common.cuh"
#include "ksuite/mma_ptx.cuh"
#include "operands.h"
#include "split_counters.h"
#include "split_finish.cuh"
#include "split_k.cuh"

namespace ksuite_gemm_skinny {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kCols = 256;  // columns of C a block owns (8 per thread)
constexpr int kKRound = 8;  // a split's rows of K are a multiple of this (one group of 8 rows)
constexpr int kKMin = 64;   // and at least this many (one group for each of the 8 warps)
constexpr int kMaxRows = 16;

// Blocks an SM is to hold, as ptxas's register budget: MB <= 2 four (64
// registers a thread), MB = 4 and 8 two (128), MB = 16 (128 accumulators a
// thread) one.
template <int MB>
constexpr int kMinBlocks = MB <= 2 ? 4 : MB <= 8 ? 2 : 1;

template <typename T, int MB, bool VEC>
__global__ void __launch_bounds__(kThreads, kMinBlocks<MB>)
skinny_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, float* __restrict__ W,
              int* __restrict__ counters, int M, int N, int K, int kchunk) {
  constexpr int U = VEC ? 8 : 4;       // rows of B a thread has in flight
  constexpr int RB = MB < 4 ? MB : 4;  // rows of C per round of the final reduction
  __shared__ alignas(16) float sA[kWarps][U][MB];
  __shared__ alignas(16) float red[kWarps][RB][kCols];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = blockIdx.x * kCols;
  const int splits = gridDim.y;
  const int kb = blockIdx.y * kchunk;
  const int ke = static_cast<int>(min(static_cast<int64_t>(K), static_cast<int64_t>(kb) + kchunk));
  // The block-relative column of this thread's element j.
  auto col = [&](int j) { return VEC ? lane * 8 + j : j * 32 + lane; };

  float acc[MB][8];
#pragma unroll
  for (int m = 0; m < MB; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[m][j] = 0.f;

  for (int k0 = kb + warp * U; k0 < ke; k0 += kWarps * U) {
    // U rows of B first (zero past K and past N, so that 0 * garbage never
    // reaches an accumulator), then this warp's slice of A.
    using Raw = std::conditional_t<VEC, uint4[U], uint32_t[U][8]>;
    Raw raw;
    if constexpr (VEC) {
      const bool in_n = n0 + col(0) < N;  // N % 8 == 0: the whole pack or none
#pragma unroll
      for (int u = 0; u < U; ++u)
        raw[u] = ksuite::ld16_if<ksuite::kNcStream, true>(
            B + static_cast<int64_t>(k0 + u) * N + n0 + col(0), in_n && k0 + u < ke);
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          raw[u][j] = ksuite::ld_pack_if<T, 1>(B + static_cast<int64_t>(k0 + u) * N + n0 + col(j),
                                               k0 + u < ke && n0 + col(j) < N);
    }
    for (int i = lane; i < U * MB; i += 32) {
      const int u = i / MB, m = i % MB, k = k0 + u;
      sA[warp][u][m] = m < M && k < ke ? ksuite::to_float(A[static_cast<int64_t>(m) * K + k]) : 0.f;
    }
    __syncwarp();
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float b[8];  // row u as fp32, converted here rather than all U rows up front
      if constexpr (VEC) {
        ksuite::raw_to_floats<T>(raw[u], b);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float f[1];
          ksuite::raw_pack_to_floats<T, 1>(raw[u][j], f);
          b[j] = f[0];
        }
      }
#pragma unroll
      for (int m = 0; m < MB; ++m) {
        const float a = sA[warp][u][m];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[m][j] = fmaf(a, b[j], acc[m][j]);
      }
    }
    __syncwarp();  // sA is rewritten by the next group
  }

  // This split's partial tile: [M][256], all 256 columns (zero past N).
  float* part = splits > 1 ? W + (static_cast<int64_t>(blockIdx.x) * splits + blockIdx.y) * M * kCols : nullptr;
  // The 8 warps' sums, RB rows of C at a time, added in warp order.
#pragma unroll
  for (int r = 0; r < MB; r += RB) {
    __syncthreads();
#pragma unroll
    for (int mm = 0; mm < RB; ++mm) {
      if constexpr (VEC) {
        float4* dst = reinterpret_cast<float4*>(&red[warp][mm][col(0)]);
        dst[0] = make_float4(acc[r + mm][0], acc[r + mm][1], acc[r + mm][2], acc[r + mm][3]);
        dst[1] = make_float4(acc[r + mm][4], acc[r + mm][5], acc[r + mm][6], acc[r + mm][7]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) red[warp][mm][col(j)] = acc[r + mm][j];
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < RB * kCols; e += kThreads) {
      const int mm = e / kCols, cl = e % kCols, m = r + mm, n = n0 + cl;
      float s = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s += red[w][mm][cl];
      if (m < M) {
        if (splits > 1) {
          part[m * kCols + cl] = s;
        } else if (n < N) {
          C[static_cast<int64_t>(m) * N + n] = ksuite::from_float<T>(s);
        }
      }
    }
  }
  if (splits > 1) ksuite_gemm_split::finish_splits<T, kCols>(W, counters, C, M, N, n0);
}

// The K split, for a grid of one wave (sms * per_sm blocks, per_sm the blocks
// an SM holds) over the ceil(N / 256) column blocks:
//  - splits = that wave / column blocks (rounded down, so no second wave);
//  - each split at least 64 rows of K (one group of 8 rows for each warp);
//  - splits^2 * M <= K: the partials the last block of a column block reads
//    (S * M * 256 fp32) are at most twice the bytes of B a split reads
//    (K/S * 256 2-byte elements), so the serial tail stays shorter than a
//    split's stream (it reads from L2, faster than an SM's share of DRAM);
// at least one split; rows ceil(K / splits) rounded up to a multiple of 8.
// Returns the rows of K per split; the split count is ceil(K / rows).
// Mirrored in implementations/gemm/cuda/__init__.py (skinny_plan) for `config`.
// The rule for blocks of `cols` columns, splits of at least `kmin` rows
// rounded up to a multiple of `kround` (the tensor-core form's numbers differ).
int64_t plan_split_rows(int64_t M, int64_t N, int64_t K, int64_t sms, int64_t per_sm, int64_t cols,
                        int64_t kmin, int64_t kround) {
  const int64_t col_blocks = (N + cols - 1) / cols;
  int64_t splits = std::min(per_sm * sms / col_blocks, K / kmin);
  while (splits > 1 && splits * splits * M > K) --splits;
  splits = std::max<int64_t>(splits, 1);
  const int64_t rows = (K + splits - 1) / splits;
  return (rows + kround - 1) / kround * kround;
}

int64_t split_rows(int64_t M, int64_t N, int64_t K, int64_t sms, int64_t per_sm) {
  return plan_split_rows(M, N, K, sms, per_sm, kCols, kKMin, kKRound);
}


template <typename T, int MB, bool VEC>
void launch_rows(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const int64_t kchunk = split_rows(M, N, K, ksuite::sm_count(),
                                    std::max(ksuite::resident_blocks<skinny_kernel<T, MB, VEC>, kThreads>(), 1));
  const int64_t splits = (K + kchunk - 1) / kchunk;
  const int64_t col_blocks = (N + kCols - 1) / kCols;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(splits));
  const ksuite_gemm_split::SplitWorkspace ws(a, col_blocks, splits, M, kCols);
  skinny_kernel<T, MB, VEC><<<grid, kThreads, 0, ksuite::current_stream()>>>(
      reinterpret_cast<const T*>(a.data_ptr()), reinterpret_cast<const T*>(b.data_ptr()),
      reinterpret_cast<T*>(c.data_ptr()), ws.partials, ws.counters, int(M), int(N), int(K), int(kchunk));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, bool VEC>
void launch_vec(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int64_t M = a.size(0);
  if (M <= 1) return launch_rows<T, 1, VEC>(a, b, c);
  if (M <= 2) return launch_rows<T, 2, VEC>(a, b, c);
  if (M <= 4) return launch_rows<T, 4, VEC>(a, b, c);
  if (M <= 8) return launch_rows<T, 8, VEC>(a, b, c);
  return launch_rows<T, 16, VEC>(a, b, c);
}

// ---------------------------------------------------------------------------
// The tensor-core form (16-byte rows of B: N % 8 == 0, B 16-byte aligned).
// A's M <= 16 rows are the 16-row operand of mma.sync m16n8k16 (rows past M
// are zeros): the tensor cores do the block's FLOP at no cost to the stream
// over B, where the FMA form above spends M FMAs an element of B and is
// bound by them from M ~ 8.
//  - a block of kMmaWarps warps owns kMmaCols (64) columns of C and a split
//    of K; warp w takes the split's stages of 32 rows s = w, w + kMmaWarps, ...
//  - each warp streams its stages through its own ring of S slots in shared
//    memory (cp.async, 16 bytes a lane, S - 1 stages in flight), with no
//    barrier but its own: a slot is one 32 x 64 tile of B, row-major, its
//    16-byte chunks swizzled (chunk c of row r at c ^ (r & 7)) so that the
//    eight rows one ldmatrix reads sit in eight different bank groups;
//  - ldmatrix.trans turns the row-major tile into mma's column operand; A's
//    fragments are read from global memory into registers when their stage
//    is issued;
//  - the warps' 16 x 64 sums meet in shared memory (the rings' space) and are
//    added in warp order; splits as in the FMA form (one workspace partial a
//    split, the last block of a column block adds them in split order).
constexpr int kMmaWarps = 8, kMmaThreads = 32 * kMmaWarps;
constexpr int kMmaCols = 64;     // columns of C a block owns: 8 n8 tiles a warp
constexpr int kStageRows = 32;   // rows of B a ring slot holds (two k16 steps)
constexpr int kSlotBytes = kStageRows * kMmaCols * 2;
// Ring slots a warp: three (96 KB a block) let an SM hold two blocks, whose
// 16 warps keep more of B in flight than four slots in one block
// (lab/findings/skinny_mma-cf6a1e3.txt).
constexpr int kMmaSlots = 3;

template <int S>
constexpr size_t mma_smem_bytes() {
  constexpr size_t ring = size_t(kMmaWarps) * S * kSlotBytes;
  constexpr size_t red = size_t(kMmaWarps) * 16 * kMmaCols * sizeof(float);
  return ring > red ? ring : red;
}

template <typename T>
using MmaType = std::conditional_t<std::is_same_v<T, c10::Half>, __half, __nv_bfloat16>;

// Two consecutive 2-byte elements of A's row m at columns k, k + 1 (k even)
// as one mma register (low half first); zero past M or past ke.  PAIRS: A
// and K even, so the two are one aligned 4-byte word.
template <typename T>
__device__ __forceinline__ uint32_t a_pair(const T* A, int M, int K, int m, int k, int ke, bool pairs) {
  const uint16_t* a = reinterpret_cast<const uint16_t*>(A);
  if (m >= M || k >= ke) return 0u;
  const int64_t at = static_cast<int64_t>(m) * K + k;
  if (pairs && k + 1 < ke) return __ldg(reinterpret_cast<const uint32_t*>(a + at));
  const uint32_t lo = __ldg(a + at);
  const uint32_t hi = k + 1 < ke ? __ldg(a + at + 1) : 0u;
  return lo | (hi << 16);
}

template <typename T, int S, bool TALL>
__global__ void __launch_bounds__(kMmaThreads, 2)
skinny_mma_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, float* __restrict__ W,
                  int* __restrict__ counters, int M, int N, int K, int kchunk) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kMmaCols;
  const int kb = blockIdx.y * kchunk;
  const int ke = static_cast<int>(min(static_cast<int64_t>(K), static_cast<int64_t>(kb) + kchunk));
  const int stages = (ke - kb + kStageRows - 1) / kStageRows;          // the split's
  const int mine = stages > warp ? (stages - warp + kMmaWarps - 1) / kMmaWarps : 0;  // this warp's
  const uint32_t ring = ksuite::ptx::smem_addr(smem) + warp * S * kSlotBytes;
  const bool pairs = K % 2 == 0 && (reinterpret_cast<uintptr_t>(A) & 3) == 0;

  // Stage j of this warp (split stage warp + j * kMmaWarps) into slot j % S:
  // 32 rows x 8 chunks, 8 chunks a lane; rows past ke and columns past N
  // (whole chunks: N % 8 == 0) are zero-filled.  The stage's A fragments
  // (two k16 steps) go to registers ar[j % S] at the same time, so that
  // their trip to L2 (A's slice seldom stays in L1 beside the rings) is
  // hidden as long as the stage's own: S - 1 stages ahead of their use.
  uint32_t ar[S][2][4];
  auto issue = [&](int j, uint32_t (&a)[2][4], int slot_index) {
    if (j < mine) {
      const int k0 = kb + (warp + j * kMmaWarps) * kStageRows;
      const uint32_t slot = ring + slot_index * kSlotBytes;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int idx = lane + 32 * i, r = idx >> 3, c = idx & 7;
        const int k = k0 + r, n = n0 + c * 8;
        const bool ok = k < ke && n < N;
        const T* src = ok ? B + static_cast<int64_t>(k) * N + n : B;
        ksuite::ptx::cp_async_16(slot + r * (kMmaCols * 2) + ((c ^ (r & 7)) << 4), src, ok);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int k = k0 + 16 * h + 2 * t;
        a[h][0] = a_pair(A, M, K, g, k, ke, pairs);
        a[h][2] = a_pair(A, M, K, g, k + 8, ke, pairs);
        a[h][1] = TALL ? a_pair(A, M, K, g + 8, k, ke, pairs) : 0u;
        a[h][3] = TALL ? a_pair(A, M, K, g + 8, k + 8, ke, pairs) : 0u;
      }
    }
    ksuite::ptx::cp_async_commit();  // empty groups keep the wait count uniform
  };

  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[j][q] = 0.f;

#pragma unroll
  for (int u = 0; u < S - 1; ++u) issue(u, ar[u], u);
  // Unrolled by S so that every ring index below is a constant (registers
  // cannot be indexed at run time).
  for (int j0 = 0; j0 < mine; j0 += S) {
#pragma unroll
    for (int u = 0; u < S; ++u) {
      const int j = j0 + u;
      if (j < mine) {
        ksuite::ptx::cp_async_wait<S - 2>();
        __syncwarp();  // every lane's chunks of stage j landed; slot (j - 1) % S is free
        issue(j + S - 1, ar[(u + S - 1) % S], (u + S - 1) % S);
        const uint32_t slot = ring + u * kSlotBytes;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = 16 * h + (lane & 7) + ((lane >> 3) & 1) * 8;  // this lane's row address
#pragma unroll
          for (int p = 0; p < 4; ++p) {
            const int c = 2 * p + (lane >> 4);
            uint32_t b[4];
            ksuite::ptx::ldmatrix_x4_trans(b, slot + r * (kMmaCols * 2) + ((c ^ (r & 7)) << 4));
            ksuite::ptx::mma_16816<MmaType<T>>(acc[2 * p], ar[u][h], b[0], b[1]);
            ksuite::ptx::mma_16816<MmaType<T>>(acc[2 * p + 1], ar[u][h], b[2], b[3]);
          }
        }
      }
    }
  }
  ksuite::ptx::cp_async_wait<0>();
  __syncthreads();  // every ring drained and read: the space becomes the reduction buffer

  // Each warp's 16 x 64 sums (fragment rows g and g + 8, columns 8j + 2t, +1).
  float* red = reinterpret_cast<float*>(smem);
  float* mine_red = red + warp * 16 * kMmaCols;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int col = 8 * j + 2 * t;
    *reinterpret_cast<float2*>(mine_red + g * kMmaCols + col) = make_float2(acc[j][0], acc[j][1]);
    if constexpr (TALL)
      *reinterpret_cast<float2*>(mine_red + (g + 8) * kMmaCols + col) = make_float2(acc[j][2], acc[j][3]);
  }
  __syncthreads();
  ksuite_gemm_split::store_sums<T, kMmaCols, kMmaWarps, kMmaThreads>(red, W, counters, C, M, N, n0);
}

// The split of K for the tensor-core form: as split_rows, over 64-column
// blocks, each split at least one stage for every warp.
// Mirrored in implementations/gemm/cuda/__init__.py (skinny_mma_plan) for `config`.
int64_t mma_split_rows(int64_t M, int64_t N, int64_t K, int64_t sms, int64_t per_sm) {
  return plan_split_rows(M, N, K, sms, per_sm, kMmaCols, kStageRows * kMmaWarps, kStageRows);
}

template <typename T, bool TALL>
void launch_mma(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  constexpr int S = kMmaSlots;
  constexpr size_t smem = mma_smem_bytes<S>();
  auto kernel = skinny_mma_kernel<T, S, TALL>;
  // More than 48 KiB of dynamic shared memory is opted into per kernel and
  // per device, so on every launch (the occupancy query below counts with it).
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const int64_t per_sm = std::max(ksuite::resident_blocks<skinny_mma_kernel<T, S, TALL>, kMmaThreads, smem>(), 1);
  const int64_t kchunk = mma_split_rows(M, N, K, ksuite::sm_count(), per_sm);
  const int64_t splits = (K + kchunk - 1) / kchunk;
  const int64_t col_blocks = (N + kMmaCols - 1) / kMmaCols;
  const ksuite_gemm_split::SplitWorkspace ws(a, col_blocks, splits, M, kMmaCols);
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(splits));
  kernel<<<grid, kMmaThreads, smem, ksuite::current_stream()>>>(
      reinterpret_cast<const T*>(a.data_ptr()), reinterpret_cast<const T*>(b.data_ptr()),
      reinterpret_cast<T*>(c.data_ptr()), ws.partials, ws.counters, int(M), int(N), int(K), int(kchunk));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_mma_rows(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  if (a.size(0) <= 8) return launch_mma<T, false>(a, b, c);
  return launch_mma<T, true>(a, b, c);
}

// variant 0: the tensor-core form where rows of B are 16-byte packs, else
// the FMA form; 1: the FMA form on either path (lab/skinny_probe.py races
// the two).
template <typename T>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, int64_t variant) {
  if constexpr (std::is_same_v<T, float>) {
    // float32: the FMA form one element a load (exact float32, as cuBLAS's);
    // its 16-byte packs and the tensor-core form hold 16-bit elements
    launch_vec<float, false>(a, b, c);
  } else {
    const bool vec = b.size(1) % 8 == 0 && ksuite::aligned16(b.data_ptr());
    if (vec && variant != 1) return launch_mma_rows<T>(a, b, c);
    if (vec) {
      launch_vec<T, true>(a, b, c);
    } else {
      launch_vec<T, false>(a, b, c);
    }
  }
}
at::Tensor gemm_skinny_v(const at::Tensor& a, const at::Tensor& b, int64_t variant) {
  ksuite_gemm_operands::check(a, b, "gemm_skinny");
  KSUITE_CHECK(a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16 || a.scalar_type() == at::kFloat,
               "gemm_skinny: only float16, bfloat16 and float32 are supported, got ", a.scalar_type());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  KSUITE_CHECK(M <= kMaxRows, "gemm_skinny: a may have at most ", kMaxRows, " rows, got ", M);
  // k + 64 (a block's next group of rows) must not overflow an int
  KSUITE_CHECK(K < (1LL << 31) - 128, "gemm_skinny: K must be below 2^31 - 128, got ", K);

  const c10::cuda::CUDAGuard guard(a.device());
  if (M == 0 || N == 0) return at::empty({M, N}, a.options());
  if (K == 0) return at::zeros({M, N}, a.options());
  at::Tensor c = at::empty({M, N}, a.options());
  if (a.scalar_type() == at::kHalf) {
    launch<c10::Half>(a, b, c, variant);
  } else if (a.scalar_type() == at::kBFloat16) {
    launch<c10::BFloat16>(a, b, c, variant);
  } else {
    launch<float>(a, b, c, variant);
  }
  return c;
}

at::Tensor gemm_skinny(const at::Tensor& a, const at::Tensor& b) { return gemm_skinny_v(a, b, 0); }

}  // namespace ksuite_gemm_skinny

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_skinny(Tensor a, Tensor b) -> Tensor");
  m.def("gemm_skinny_v(Tensor a, Tensor b, int variant) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_skinny", &ksuite_gemm_skinny::gemm_skinny);
  m.impl("gemm_skinny_v", &ksuite_gemm_skinny::gemm_skinny_v);
}
