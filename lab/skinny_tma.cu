// A skinny GEMM (A with at most 16 rows) fed by TMA, for lab/skinny_tma.py.
//
// gemm_skinny's tensor-core form keeps three 4 KB ring slots a warp, two in
// flight, and splits K so that two blocks an SM fill one wave; under Nsight
// Compute at 16 x 4608 x 3584 it moved 1.83 TB/s where cuBLAS, one CTA per 64
// columns of C with K unsplit and 181 KB of TMA stages, moved 2.75 TB/s from
// 72 SMs (lab/findings/skinny_stream_k-86dca76.txt).  This kernel is that
// shape of pipeline:
//  - a CTA owns 64 columns of C and a split of K (splits only where the
//    column blocks leave SMs idle: col_blocks * splits <= SMs, one CTA an SM);
//  - one producer lane loads stage after stage by TMA into a ring of S
//    stages of 20 KB: B's 128 rows x 64 columns (16 KB) and A's 16 rows x 128
//    k (two 64-wide boxes), both in the 128-byte swizzle; rows past M and K
//    are zero-filled by TMA, so the consumers check no bounds;
//  - four consumer warps each take 32 of a stage's 128 rows: A's fragments by
//    ldmatrix, B's by ldmatrix.trans, mma.sync m16n8k16 into 16 x 64 fp32
//    sums, then one arrival on the stage's empty barrier;
//  - the four warps' sums meet in shared memory (the ring's space) and are
//    added in warp order; with S splits each writes an fp32 partial and the
//    last of a column block (a counter, acquire/release at GPU scope) adds
//    them in split order and writes C.
// Needs K % 8 == 0 and N % 8 == 0 (16-byte row strides for the tensor maps).

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include "hopper.cuh"
#include "ksuite/common.cuh"
#include "ksuite/mma_ptx.cuh"
#include "split_k.cuh"
#include "tma_map.h"

namespace {

using namespace ksuite_hopper;

constexpr int kConsumers = 4;
constexpr int kThreads = 32 * (kConsumers + 1);
constexpr int kRows = 128;                   // rows of K a stage
constexpr int kCols = 64;                    // columns of C a CTA
constexpr int kBBytes = kRows * 128;         // B: 128 rows of 128 bytes
constexpr int kABox = 16 * 128;              // A: 16 rows of 64 k
constexpr int kStageBytes = kBBytes + 2 * kABox;

template <typename T>
using MmaType = std::conditional_t<std::is_same_v<T, at::Half>, __half, __nv_bfloat16>;

template <int S>
constexpr size_t smem_bytes() {
  return size_t(S) * kStageBytes + 1024;  // + the alignment of the ring to 1024 bytes
}

template <typename T, int S>
__global__ void __launch_bounds__(kThreads, 1)
skinny_tma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                  T* __restrict__ C, float* __restrict__ W, int* __restrict__ counters, int M, int N, int K,
                  int kchunk) {
  __shared__ __align__(8) uint64_t full[S];
  __shared__ __align__(8) uint64_t empty[S];
  __shared__ int last;
  extern __shared__ uint8_t raw[];
  // the 128-byte swizzle repeats every 1024 bytes: stages start on such a boundary
  uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n0 = blockIdx.x * kCols;
  const int splits = gridDim.y;
  const int kb = blockIdx.y * kchunk;
  const int ke = min(K, kb + kchunk);
  const int stages = (ke - kb + kRows - 1) / kRows;

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
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
        const int s = j % S;
        mbar_wait(&empty[s], ((j / S) & 1) ^ 1);
        uint8_t* st = ring + s * kStageBytes;
        const int k0 = kb + j * kRows;
        // a split's last stage may pass ke: rows past K are zero-filled, rows of the
        // next split are not, so a split's rows are a multiple of kRows (plan below)
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
      const int s = j % S;
      mbar_wait(&full[s], (j / S) & 1);
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
  float* part = W + (static_cast<int64_t>(blockIdx.x) * splits + blockIdx.y) * M * kCols;
  for (int e = threadIdx.x; e < M * kCols; e += kThreads) {
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kConsumers; ++w) v += red[w * 16 * kCols + e];
    const int m = e / kCols, n = n0 + e % kCols;
    if (splits > 1) {
      part[e] = v;
    } else if (n < N) {
      C[static_cast<int64_t>(m) * N + n] = static_cast<T>(v);
    }
  }
  if (splits == 1) return;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = ksuite_gemm_split::arrive(&counters[blockIdx.x]) == splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float* tile = W + static_cast<int64_t>(blockIdx.x) * splits * M * kCols;
  for (int e = threadIdx.x; e < M * kCols; e += kThreads) {
    float v = 0.f;
    for (int z = 0; z < splits; ++z) v += __ldcg(tile + static_cast<int64_t>(z) * M * kCols + e);
    const int m = e / kCols, n = n0 + e % kCols;
    if (n < N) C[static_cast<int64_t>(m) * N + n] = static_cast<T>(v);
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0;
}

template <typename T, int S>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, at::Tensor& counters, int64_t splits) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const CUtensorMap map_a = make_map(a, M, K, 16, "skinny_tma", "A");
  const CUtensorMap map_b = make_map(b, K, N, kRows, "skinny_tma", "B");
  int sms = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, a.get_device()));
  const int64_t col_blocks = (N + kCols - 1) / kCols;
  if (splits <= 0) {  // one CTA an SM: split K only over the SMs the column blocks leave idle
    splits = std::max<int64_t>(1, std::min<int64_t>(sms / col_blocks, K / (2 * kRows)));
    while (splits > 1 && splits * splits * M > K) --splits;
  }
  const int64_t rows = ((K + splits - 1) / splits + kRows - 1) / kRows * kRows;
  splits = (K + rows - 1) / rows;
  TORCH_CHECK(counters.numel() >= col_blocks, "skinny_tma: counters too short");
  at::Tensor ws = at::empty({splits > 1 ? col_blocks * splits * M * kCols : 1}, a.options().dtype(at::kFloat));
  auto kernel = skinny_tma_kernel<T, S>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes<S>())));
  kernel<<<dim3(unsigned(col_blocks), unsigned(splits)), kThreads, smem_bytes<S>(),
           c10::cuda::getCurrentCUDAStream()>>>(map_a, map_b, reinterpret_cast<T*>(c.data_ptr()),
                                                ws.data_ptr<float>(), counters.data_ptr<int>(), int(M), int(N),
                                                int(K), int(rows));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// C = A @ B; stages: 6 or 10 (20 KB each); splits: 0 for the rule above.
at::Tensor run(const at::Tensor& a, const at::Tensor& b, at::Tensor counters, int64_t stages, int64_t splits) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
              "skinny_tma: A (M x K) and B (K x N) on the GPU");
  TORCH_CHECK(a.scalar_type() == b.scalar_type() &&
                  (a.scalar_type() == at::kBFloat16 || a.scalar_type() == at::kHalf),
              "skinny_tma: bfloat16 or float16");
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && a.size(0) <= 16 && a.size(1) % 8 == 0 &&
                  b.size(1) % 8 == 0,
              "skinny_tma: contiguous, M <= 16, K and N multiples of 8");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(a.data_ptr()) % 16 == 0 && reinterpret_cast<uintptr_t>(b.data_ptr()) % 16 == 0,
              "skinny_tma: A and B 16-byte aligned (tensor maps)");
  at::Tensor c = at::empty({a.size(0), b.size(1)}, a.options());
  const bool bf = a.scalar_type() == at::kBFloat16;
  if (stages == 6) {
    bf ? launch<at::BFloat16, 6>(a, b, c, counters, splits) : launch<at::Half, 6>(a, b, c, counters, splits);
  } else {
    TORCH_CHECK(stages == 10, "skinny_tma: 6 or 10 stages");
    bf ? launch<at::BFloat16, 10>(a, b, c, counters, splits) : launch<at::Half, 10>(a, b, c, counters, splits);
  }
  return c;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
