// C = A @ B for skinny A (M <= 16 rows) on Hopper, fed by TMA: the second
// form the `cuda` GEMM races against gemm_skinny's tensor-core form for
// M <= 16.  Row-major A (M x K), B (K x N), C (M x N), float16 or bfloat16
// with fp32 accumulation; sm_90 (TMA, mbarriers); K and N multiples of 8 and
// 16-byte aligned bases (the tensor maps' 16-byte row strides).
//
// gemm_skinny's rings are per warp, three 4 KB slots with two in flight, and
// its grid is two blocks an SM with K split to fill them.  Here the whole
// CTA shares one deep ring, so each SM keeps ~100 KB of B in flight:
//  - a CTA owns 64 columns of C and one split of K; K is split only over the
//    SMs the column blocks leave idle (col_blocks * splits <= SMs, one CTA an
//    SM: skinny_tma_rows);
//  - one producer lane loads stage after stage by TMA into a ring of kStages
//    stages of 20 KB: B's 128 rows x 64 columns (16 KB) and A's 16 rows x
//    128 k (two 64-wide boxes), both in the 128-byte swizzle; rows past M
//    and K are zero-filled by TMA, so the consumers check no bounds;
//  - four consumer warps each take 32 of a stage's 128 rows: A's fragments
//    by ldmatrix, B's by ldmatrix.trans, mma.sync m16n8k16 into 16 x 64 fp32
//    sums, then one arrival on the stage's empty barrier;
//  - the four warps' sums meet in shared memory (the ring's space) and are
//    added in warp order; with S splits each CTA writes an fp32 partial and
//    the last of a column block (split_finish.cuh, as gemm_skinny.cu) adds
//    them in split order and writes C.  Every sum has a fixed order:
//    deterministic.
// The counters are split_counters.h's (this extension's own buffer), so
// calls on one device must not overlap on two streams.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <type_traits>

#include "hopper.cuh"
#include "ksuite/common.cuh"
#include "ksuite/mma_ptx.cuh"
#include "operands.h"
#include "split_counters.h"
#include "split_finish.cuh"
#include "tma_map.h"

namespace ksuite_gemm_skinny_tma {

using namespace ksuite_hopper;

constexpr int kConsumers = 4;
constexpr int kThreads = 32 * (kConsumers + 1);
constexpr int kRows = 128;                   // rows of K a stage
constexpr int kCols = 64;                    // columns of C a CTA
constexpr int kBBytes = kRows * 128;         // B: 128 rows of 128 bytes
constexpr int kABox = 16 * 128;              // A: 16 rows of 64 k
constexpr int kStageBytes = kBBytes + 2 * kABox;
constexpr int kStages = 6;
constexpr int kMaxRows = 16;
// + the alignment of the ring to 1024 bytes (the 128-byte swizzle's period)
constexpr size_t kSmemBytes = size_t(kStages) * kStageBytes + 1024;

// T is c10::Half or c10::BFloat16 (C's element); the mma's operand type:
template <typename T>
using MmaType = std::conditional_t<std::is_same_v<T, c10::Half>, __half, __nv_bfloat16>;

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
skinny_tma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                  T* __restrict__ C, float* __restrict__ W, int* __restrict__ counters, int M, int N, int K,
                  int kchunk) {
  __shared__ __align__(8) uint64_t full[kStages];
  __shared__ __align__(8) uint64_t empty[kStages];
  extern __shared__ uint8_t raw[];
  uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n0 = blockIdx.x * kCols;
  const int kb = blockIdx.y * kchunk;
  const int ke = static_cast<int>(min(int64_t(K), int64_t(kb) + kchunk));  // kb + kchunk can pass 2^31
  const int stages = (ke - kb + kRows - 1) / kRows;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumers);
    }
    mbar_init_fence();
  }
  __syncthreads();

  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[j][q] = 0.f;

  if (warp == kConsumers) {
    if (lane == 0) {
      tma_prefetch_desc(&map_a);
      tma_prefetch_desc(&map_b);
      for (int j = 0; j < stages; ++j) {
        const int s = j % kStages;
        mbar_wait(&empty[s], ((j / kStages) & 1) ^ 1);
        uint8_t* st = ring + s * kStageBytes;
        const int k0 = kb + j * kRows;
        // a split's last stage may pass ke: rows past K are zero-filled, rows of
        // the next split are not, so a split's rows are a multiple of kRows
        mbar_arrive_expect_tx(&full[s], kStageBytes);
        tma_load_2d(st, &map_b, &full[s], n0, k0);
        tma_load_2d(st + kBBytes, &map_a, &full[s], k0, 0);
        tma_load_2d(st + kBBytes + kABox, &map_a, &full[s], k0 + 64, 0);
      }
    }
    __syncwarp();  // the producer warp whole again before the block's barrier
  } else {
    const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8;  // this lane's row address in an 8 x 8 quad
    for (int j = 0; j < stages; ++j) {
      const int s = j % kStages;
      mbar_wait(&full[s], (j / kStages) & 1);
      const uint32_t b = smem_u32(ring + s * kStageBytes);
      const uint32_t a = b + kBBytes;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int kk = 32 * warp + 16 * h;  // the k16 step's first row in the stage
        uint32_t af[4];
        const int ac = (kk % 64) / 8 + (lane >> 4);
        ksuite::ptx::ldmatrix_x4(af, a + (kk / 64) * kABox + lrow * 128 + ((ac ^ (lrow & 7)) << 4));
        const int r = kk + lrow;
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          const int c = 2 * p + (lane >> 4);
          uint32_t bf[4];
          ksuite::ptx::ldmatrix_x4_trans(bf, b + r * 128 + ((c ^ (r & 7)) << 4));
          ksuite::ptx::mma_16816<MmaType<T>>(acc[2 * p], af, bf[0], bf[1]);
          ksuite::ptx::mma_16816<MmaType<T>>(acc[2 * p + 1], af, bf[2], bf[3]);
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }
  }
  __syncthreads();  // every stage landed and read: the ring's space takes the sums

  float* red = reinterpret_cast<float*>(ring);  // [consumer][16][64]
  if (warp < kConsumers) {
    const int g = lane >> 2, t = lane & 3;
    float* mine = red + warp * 16 * kCols;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int col = 8 * j + 2 * t;
      *reinterpret_cast<float2*>(mine + g * kCols + col) = make_float2(acc[j][0], acc[j][1]);
      *reinterpret_cast<float2*>(mine + (g + 8) * kCols + col) = make_float2(acc[j][2], acc[j][3]);
    }
  }
  __syncthreads();
  ksuite_gemm_split::store_sums<T, kCols, kConsumers, kThreads>(red, W, counters, C, M, N, n0);
}

// Splits of K: one CTA an SM, so K is split only over the SMs that the
// ceil(N / 64) column blocks leave idle, each split at least two stages,
// and splits^2 * M <= K (the last CTA's partials stay short beside a
// split's stream); then rows a multiple of a stage.  Returns the rows of K a
// split.  Mirrored in implementations/gemm/cuda/__init__.py (skinny_tma_plan).
int64_t skinny_tma_rows(int64_t M, int64_t N, int64_t K, int64_t sms) {
  const int64_t col_blocks = (N + kCols - 1) / kCols;
  int64_t splits = std::max<int64_t>(1, std::min<int64_t>(sms / col_blocks, K / (2 * kRows)));
  while (splits > 1 && splits * splits * M > K) --splits;
  return ((K + splits - 1) / splits + kRows - 1) / kRows * kRows;
}

template <typename T>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const CUtensorMap map_a = make_map(a, M, K, 16, "gemm_skinny_tma", "a");
  const CUtensorMap map_b = make_map(b, K, N, kRows, "gemm_skinny_tma", "b");
  const int64_t col_blocks = (N + kCols - 1) / kCols;
  const int64_t rows = skinny_tma_rows(M, N, K, ksuite::sm_count());
  const int64_t splits = (K + rows - 1) / rows;
  const ksuite_gemm_split::SplitWorkspace ws(a, col_blocks, splits, M, kCols);
  auto kernel = skinny_tma_kernel<T>;
  // More than 48 KiB of dynamic shared memory is opted into per kernel.
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
  kernel<<<dim3(unsigned(col_blocks), unsigned(splits)), kThreads, kSmemBytes, ksuite::current_stream()>>>(
      map_a, map_b, reinterpret_cast<T*>(c.data_ptr()), ws.partials, ws.counters, int(M), int(N), int(K), int(rows));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor gemm_skinny_tma(const at::Tensor& a, const at::Tensor& b) {
  ksuite_gemm_operands::check(a, b, "gemm_skinny_tma");
  KSUITE_CHECK(a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16,
               "gemm_skinny_tma: only float16 and bfloat16 are supported, got ", a.scalar_type());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  KSUITE_CHECK(M <= kMaxRows, "gemm_skinny_tma: a may have at most ", kMaxRows, " rows, got ", M);
  KSUITE_CHECK(K % 8 == 0 && N % 8 == 0,
               "gemm_skinny_tma: N and K must be multiples of 8 for TMA (16-byte row strides), got N=", N, " K=", K);
  const c10::cuda::CUDAGuard guard(a.device());
  KSUITE_CHECK(ksuite::compute_major() == 9, "gemm_skinny_tma: needs a Hopper GPU (sm_90), this one is sm_",
               ksuite::compute_major(), "x");
  if (M == 0 || N == 0) return at::empty({M, N}, a.options());
  if (K == 0) return at::zeros({M, N}, a.options());
  KSUITE_CHECK(ksuite::aligned16(a.data_ptr()) && ksuite::aligned16(b.data_ptr()),
               "gemm_skinny_tma: a and b must start at 16-byte aligned addresses for TMA");
  at::Tensor c = at::empty({M, N}, a.options());
  if (a.scalar_type() == at::kHalf) {
    launch<c10::Half>(a, b, c);
  } else {
    launch<c10::BFloat16>(a, b, c);
  }
  return c;
}

}  // namespace ksuite_gemm_skinny_tma

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_skinny_tma(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_skinny_tma", &ksuite_gemm_skinny_tma::gemm_skinny_tma);
}
