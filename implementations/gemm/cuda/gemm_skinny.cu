// C = A @ B for skinny A (M <= 16 rows): row-major A (M x K), B (K x N),
// C (M x N), float16 or bfloat16 with fp32 accumulation on the FMA units.
//
// With so few rows the product is a stream over B (K*N elements, each used M
// times): a tensor-core tile of 128 rows would be almost all padding, and one
// row of such tiles leaves most SMs idle.  So:
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
// The 16-byte path needs N % 8 == 0 and B 16-byte aligned; A is read one
// element at a time (it is tiny and sits in L2), C is written one at a time.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>

#include "ksuite/common.cuh"
#include "operands.h"
#include "split_counters.h"
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
  __shared__ int last;

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
  if (splits == 1) return;

  // Arrive: every thread's stores fenced, then one count for the block.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = ksuite_gemm_split::arrive(&counters[blockIdx.x]) == splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();  // every thread's reads below after thread 0's acquire

  // The last block of this column block: C = the S partials added in split
  // order, 4 columns a thread at a time, read from L2 (.cg: never a stale L1 line).
  constexpr int kQuads = kCols / 4;
  const float4* tile = reinterpret_cast<const float4*>(W + static_cast<int64_t>(blockIdx.x) * splits * M * kCols);
  const int quads = M * kQuads;  // float4s in one partial
  for (int e = threadIdx.x; e < quads; e += kThreads) {
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int z = 0; z < splits; ++z) {
      const float4 v = __ldcg(tile + static_cast<int64_t>(z) * quads + e);
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
    const int m = e / kQuads, n = n0 + (e % kQuads) * 4;
    T* c = C + static_cast<int64_t>(m) * N + n;
    if (n < N) c[0] = ksuite::from_float<T>(s.x);
    if (n + 1 < N) c[1] = ksuite::from_float<T>(s.y);
    if (n + 2 < N) c[2] = ksuite::from_float<T>(s.z);
    if (n + 3 < N) c[3] = ksuite::from_float<T>(s.w);
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0;  // the next call finds zero (kernel order on the stream)
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
int64_t split_rows(int64_t M, int64_t N, int64_t K, int64_t sms, int64_t per_sm) {
  const int64_t col_blocks = (N + kCols - 1) / kCols;
  int64_t splits = std::min(per_sm * sms / col_blocks, K / kKMin);
  while (splits > 1 && splits * splits * M > K) --splits;
  splits = std::max<int64_t>(splits, 1);
  const int64_t rows = (K + splits - 1) / splits;
  return (rows + kKRound - 1) / kKRound * kKRound;
}


template <typename T, int MB, bool VEC>
void launch_rows(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const int64_t kchunk = split_rows(M, N, K, ksuite::sm_count(),
                                    std::max(ksuite::resident_blocks<skinny_kernel<T, MB, VEC>, kThreads>(), 1));
  const int64_t splits = (K + kchunk - 1) / kchunk;
  const int64_t col_blocks = (N + kCols - 1) / kCols;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(splits));
  at::Tensor ws;
  float* W = nullptr;
  int* cnt = nullptr;
  if (splits > 1) {
    ws = at::empty({col_blocks, splits, M, kCols}, a.options().dtype(at::kFloat));
    W = ws.data_ptr<float>();
    cnt = ksuite_gemm_split::counters(col_blocks);
  }
  skinny_kernel<T, MB, VEC><<<grid, kThreads, 0, ksuite::current_stream()>>>(
      reinterpret_cast<const T*>(a.data_ptr()), reinterpret_cast<const T*>(b.data_ptr()),
      reinterpret_cast<T*>(c.data_ptr()), W, cnt, int(M), int(N), int(K), int(kchunk));
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

template <typename T>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  if (b.size(1) % 8 == 0 && ksuite::aligned16(b.data_ptr())) {
    launch_vec<T, true>(a, b, c);
  } else {
    launch_vec<T, false>(a, b, c);
  }
}
at::Tensor gemm_skinny(const at::Tensor& a, const at::Tensor& b) {
  ksuite_gemm_operands::check(a, b, "gemm_skinny");
  KSUITE_CHECK(a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16,
               "gemm_skinny: only float16 and bfloat16 are supported, got ", a.scalar_type());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  KSUITE_CHECK(M <= kMaxRows, "gemm_skinny: a may have at most ", kMaxRows, " rows, got ", M);
  // k + 64 (a block's next group of rows) must not overflow an int
  KSUITE_CHECK(K < (1LL << 31) - 128, "gemm_skinny: K must be below 2^31 - 128, got ", K);

  const c10::cuda::CUDAGuard guard(a.device());
  if (M == 0 || N == 0) return at::empty({M, N}, a.options());
  if (K == 0) return at::zeros({M, N}, a.options());
  at::Tensor c = at::empty({M, N}, a.options());
  if (a.scalar_type() == at::kHalf) {
    launch<c10::Half>(a, b, c);
  } else {
    launch<c10::BFloat16>(a, b, c);
  }
  return c;
}

}  // namespace ksuite_gemm_skinny

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_skinny(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_skinny", &ksuite_gemm_skinny::gemm_skinny);
}
