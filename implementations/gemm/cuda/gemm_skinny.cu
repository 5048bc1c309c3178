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
//  - K is split over grid.y (kSplits) so that the grid has about two blocks
//    per SM whatever N is; within a block, warp w takes rows of B in groups
//    of U (8 packs or 4 rows of 8 scalars in flight per thread), the groups
//    of the 8 warps interleaved;
//  - the U rows of A a warp needs go to its own slice of shared memory (so
//    the warps never wait on each other in the main loop), read back as
//    broadcasts;
//  - at the end the 8 warps' sums meet in shared memory and are added in warp
//    order; with one split that sum is C, else it is split z's fp32 partial
//    in a workspace [S, M, N], which a second kernel adds in split order.
// Every sum is taken in a fixed order, so the result is deterministic.
// The 16-byte path needs N % 8 == 0 and B 16-byte aligned; A is read one
// element at a time (it is tiny and sits in L2), C is written one at a time.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ksuite/common.cuh"
#include "operands.h"

namespace ksuite_gemm_skinny {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kCols = 256;  // columns of C a block owns (8 per thread)
constexpr int kKRound = 8;  // a split's rows of K are a multiple of this (one group of 8 rows)
constexpr int kKMin = 64;   // and at least this many (one group for each of the 8 warps)
constexpr int kMaxRows = 16;

template <typename T, int MB, bool VEC>
__global__ void __launch_bounds__(kThreads)
skinny_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, float* __restrict__ W,
              int M, int N, int K, int kchunk) {
  constexpr int U = VEC ? 8 : 4;       // rows of B a thread has in flight
  constexpr int RB = MB < 4 ? MB : 4;  // rows of C per round of the final reduction
  __shared__ alignas(16) float sA[kWarps][U][MB];
  __shared__ alignas(16) float red[kWarps][RB][kCols];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = blockIdx.x * kCols;
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
    float b[U][8];
    if constexpr (VEC) {
      uint4 raw[U];
      const bool in_n = n0 + col(0) < N;  // N % 8 == 0: the whole pack or none
#pragma unroll
      for (int u = 0; u < U; ++u)
        raw[u] = ksuite::ld16_if<ksuite::kNcStream, true>(
            B + static_cast<int64_t>(k0 + u) * N + n0 + col(0), in_n && k0 + u < ke);
#pragma unroll
      for (int u = 0; u < U; ++u) ksuite::raw_to_floats<T>(raw[u], b[u]);
    } else {
      uint32_t raw[U][8];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          raw[u][j] = ksuite::ld_pack_if<T, 1>(B + static_cast<int64_t>(k0 + u) * N + n0 + col(j),
                                               k0 + u < ke && n0 + col(j) < N);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float f[1];
          ksuite::raw_pack_to_floats<T, 1>(raw[u][j], f);
          b[u][j] = f[0];
        }
    }
    for (int i = lane; i < U * MB; i += 32) {
      const int u = i / MB, m = i % MB, k = k0 + u;
      sA[warp][u][m] = m < M && k < ke ? ksuite::to_float(A[static_cast<int64_t>(m) * K + k]) : 0.f;
    }
    __syncwarp();
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int m = 0; m < MB; ++m) {
        const float a = sA[warp][u][m];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[m][j] = fmaf(a, b[u][j], acc[m][j]);
      }
    __syncwarp();  // sA is rewritten by the next group
  }

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
      if (m < M && n < N) {
        if (W != nullptr) {
          W[(static_cast<int64_t>(blockIdx.y) * M + m) * N + n] = s;
        } else {
          C[static_cast<int64_t>(m) * N + n] = ksuite::from_float<T>(s);
        }
      }
    }
  }
}

// C[i] = the sum of the S partials W[z, i] in split order.
template <typename T>
__global__ void __launch_bounds__(256)
skinny_reduce(const float* __restrict__ W, T* __restrict__ C, int64_t MN, int S) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < MN;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.f;
#pragma unroll 8
    for (int z = 0; z < S; ++z) s += W[z * MN + i];
    C[i] = ksuite::from_float<T>(s);
  }
}

// The K split: about two blocks per SM over the ceil(N / 256) column blocks,
// and (when there is more than one split) each split at least max(64, 16 * M)
// rows of K, so that every warp has rows and the fp32 partials written and
// read again stay a small fraction of B's bytes; rows rounded up to a
// multiple of 8.  Returns the rows of K per split; the split count is
// ceil(K / rows).
// Mirrored in implementations/gemm/cuda/__init__.py (skinny_plan) for `config`.
int64_t split_rows(int64_t M, int64_t N, int64_t K, int64_t sms) {
  const int64_t col_blocks = (N + kCols - 1) / kCols;
  const int64_t want = (2 * sms + col_blocks - 1) / col_blocks;
  const int64_t kmin = std::max<int64_t>(kKMin, 16 * M);
  const int64_t splits = std::max<int64_t>(1, std::min(want, K / kmin));
  const int64_t rows = (K + splits - 1) / splits;
  return (rows + kKRound - 1) / kKRound * kKRound;
}

template <typename T, int MB, bool VEC>
void launch_rows(const T* A, const T* B, T* C, float* W, int M, int N, int K, int kchunk, dim3 grid) {
  skinny_kernel<T, MB, VEC><<<grid, kThreads, 0, ksuite::current_stream()>>>(A, B, C, W, M, N, K, kchunk);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, bool VEC>
void launch_vec(const T* A, const T* B, T* C, float* W, int M, int N, int K, int kchunk, dim3 grid) {
  if (M <= 1) return launch_rows<T, 1, VEC>(A, B, C, W, M, N, K, kchunk, grid);
  if (M <= 2) return launch_rows<T, 2, VEC>(A, B, C, W, M, N, K, kchunk, grid);
  if (M <= 4) return launch_rows<T, 4, VEC>(A, B, C, W, M, N, K, kchunk, grid);
  if (M <= 8) return launch_rows<T, 8, VEC>(A, B, C, W, M, N, K, kchunk, grid);
  return launch_rows<T, 16, VEC>(A, B, C, W, M, N, K, kchunk, grid);
}

template <typename T>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const int64_t kchunk = split_rows(M, N, K, ksuite::sm_count());
  const int64_t splits = (K + kchunk - 1) / kchunk;
  const dim3 grid(static_cast<unsigned>((N + kCols - 1) / kCols), static_cast<unsigned>(splits));
  const T* A = reinterpret_cast<const T*>(a.data_ptr());
  const T* B = reinterpret_cast<const T*>(b.data_ptr());
  T* C = reinterpret_cast<T*>(c.data_ptr());
  at::Tensor ws;
  float* W = nullptr;
  if (splits > 1) {
    ws = at::empty({splits, M, N}, a.options().dtype(at::kFloat));
    W = ws.data_ptr<float>();
  }
  const bool vec = N % 8 == 0 && ksuite::aligned16(B);
  if (vec) {
    launch_vec<T, true>(A, B, C, W, int(M), int(N), int(K), int(kchunk), grid);
  } else {
    launch_vec<T, false>(A, B, C, W, int(M), int(N), int(K), int(kchunk), grid);
  }
  if (splits > 1) {
    const int64_t MN = M * N;
    const int64_t blocks = std::min<int64_t>((MN + 255) / 256, 8LL * ksuite::sm_count());
    skinny_reduce<T><<<static_cast<unsigned>(blocks), 256, 0, ksuite::current_stream()>>>(W, C, MN,
                                                                                         int(splits));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
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
