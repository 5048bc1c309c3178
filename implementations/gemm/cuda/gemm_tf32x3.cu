// C = A @ B in float32 on the tensor cores as three TF32 products (3xTF32):
// each float32 operand x is split into a TF32 head h = rna_tf32(x) and a TF32
// tail l = rna_tf32(x - h), and a * b is summed as a_l b_h + a_h b_l + a_h b_h
// (a_l b_l, below 2^-22 of the product, is dropped), so ~22 of the 24
// significand bits take part and the result is held to float32's own
// tolerance.  An infinite operand, or one within 2^-11 of float32's largest
// (its head rounds to infinity), gives NaN where float32 would give inf.  Row-major A (M x K), B (K x N), C (M x N), any shape; sm_80+
// (mma.sync m16n8k8 .tf32).
//
// Napkin math (H200): three TF32 matmuls' work a product, so the roof is a
// third of the TF32 rate (~140 of ~420 TFLOP/s) against ~51 for cuBLAS's
// float32 SGEMM on the CUDA cores.
//
// Per CTA a 128 x 128 tile of C, 8 warps as 2 x 4, each 64 x 32 of C as
// 4 x 4 m16n8 fp32 fragments (64 registers a thread):
//  - K is walked 32 at a time through a 3-deep ring of shared-memory tiles
//    filled by cp.async (16-byte chunks where K and N are multiples of 4 and
//    the bases 16-byte aligned, else 4-byte ones), zero-filled past M, N and
//    K, so the math checks no bounds; wait_group 1 and one barrier a step.
//  - A's rows are padded to 36 floats and B's to 136: the fragment loads
//    (A[g][t], B[t][g] for g = lane / 4, t = lane % 4) hit 32 distinct banks.
//  - Each k8 slice loads a warp's 4 A and 4 B fragments as scalars, splits
//    each element into head and tail (two cvt.rna.tf32 and a subtraction),
//    then issues 48 mma into a zeroed per-k-tile fragment, which is added to
//    the accumulators in float32 at the k-tile's end: the mma accumulation
//    rounds toward zero, so summing all of K inside it would drift one way.
//  - One CTA an SM (205-246 registers with both fragment sets).
//  - CTAs run in groups of 8 row tiles down each column band, so the CTAs
//    resident at once share their A rows and B columns in L2.
//  - C is stored from the fragments, two floats a store where N is even.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>

#include "ksuite/common.cuh"
#include "ksuite/mma_ptx.cuh"
#include "operands.h"
#include "raster.cuh"

namespace ksuite_gemm_tf32x3 {

constexpr int BM = 128, BN = 128, BK = 32, STAGES = 3;
constexpr int WARPS_M = 2, WARPS_N = 4, THREADS = 32 * WARPS_M * WARPS_N;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;  // 64 x 32 of C a warp
constexpr int MT = WM / 16, NT = WN / 8;             // 4 x 4 m16n8 fragments
constexpr int A_LD = BK + 4, B_LD = BN + 8;           // padded row strides, in floats
constexpr int A_STAGE = BM * A_LD, B_STAGE = BK * B_LD;
constexpr size_t SMEM_BYTES = size_t(STAGES) * (A_STAGE + B_STAGE) * sizeof(float);
constexpr int GROUP_M = 8;

// One k-tile of A (BM x BK) and B (BK x BN) into stage buffers sa, sb.
template <bool VEC>
__device__ __forceinline__ void load_tile(float* sa, float* sb, const float* __restrict__ A,
                                          const float* __restrict__ B, int M, int N, int K, int m0, int n0,
                                          int k0) {
  ksuite::ptx::cp_async_tile_f32<VEC, BM, BK, A_LD, THREADS>(sa, A, M, K, m0, k0);
  ksuite::ptx::cp_async_tile_f32<VEC, BK, BN, B_LD, THREADS>(sb, B, K, N, k0, n0);
}

template <bool VEC>
__global__ void __launch_bounds__(THREADS, 1)
gemm_tf32x3_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N,
                   int K) {
  extern __shared__ __align__(16) float smem[];
  float* sa = smem;                      // [STAGES][BM][A_LD]
  float* sb = smem + STAGES * A_STAGE;   // [STAGES][BK][B_LD]

  // (X - 1) / B + 1: X + B - 1 would overflow an int within B of 2^31 (X > 0 here)
  int tm, tn;
  ksuite_gemm::grouped_tile(blockIdx.x, (M - 1) / BM + 1, (N - 1) / BN + 1, GROUP_M, tm, tn);
  const int m0 = tm * BM, n0 = tn * BN;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
  const int g = lane >> 2, t = lane & 3;

  float acc[MT][NT][4];
  ksuite::ptx::zero_acc(acc);

  const int ktiles = (K - 1) / BK + 1;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) load_tile<VEC>(sa + s * A_STAGE, sb + s * B_STAGE, A, B, M, N, K, m0, n0, s * BK);
    ksuite::ptx::cp_async_commit();
  }

  for (int kt = 0; kt < ktiles; ++kt) {
    ksuite::ptx::cp_async_wait<STAGES - 2>();
    __syncthreads();  // k-tile kt landed for every thread; every warp is done with kt - 1's stage
    const int next = kt + STAGES - 1;
    if (next < ktiles) {
      const int s = next % STAGES;
      load_tile<VEC>(sa + s * A_STAGE, sb + s * B_STAGE, A, B, M, N, K, m0, n0, next * BK);
    }
    ksuite::ptx::cp_async_commit();

    const float* ta = sa + (kt % STAGES) * A_STAGE + (wm + g) * A_LD + t;
    const float* tb = sb + (kt % STAGES) * B_STAGE + t * B_LD + wn + g;
    float part[MT][NT][4];  // this k-tile's products, added to acc in float32 below
    ksuite::ptx::zero_acc(part);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      uint32_t ah[MT][4], al[MT][4], bh[NT][2], bl[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        // a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4) of the 16 x 8 slice
        const float* p = ta + i * 16 * A_LD + kk;
        ksuite::ptx::split_tf32(p[0], ah[i][0], al[i][0]);
        ksuite::ptx::split_tf32(p[8 * A_LD], ah[i][1], al[i][1]);
        ksuite::ptx::split_tf32(p[4], ah[i][2], al[i][2]);
        ksuite::ptx::split_tf32(p[8 * A_LD + 4], ah[i][3], al[i][3]);
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        // b0 (k = t, n = g), b1 (k = t + 4, n = g) of the 8 x 8 slice
        const float* p = tb + kk * B_LD + j * 8;
        ksuite::ptx::split_tf32(p[0], bh[j][0], bl[j][0]);
        ksuite::ptx::split_tf32(p[4 * B_LD], bh[j][1], bl[j][1]);
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          ksuite::ptx::mma_1688_tf32(part[i][j], al[i], bh[j]);
          ksuite::ptx::mma_1688_tf32(part[i][j], ah[i], bl[j]);
          ksuite::ptx::mma_1688_tf32(part[i][j], ah[i], bh[j]);
        }
    }
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[i][j][r] += part[i][j][r];
  }
  ksuite::ptx::cp_async_wait<0>();  // no copy may still target shared memory at exit

  // c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1) of each m16n8 fragment
  const bool pairs = (N % 2 == 0) && (reinterpret_cast<uintptr_t>(C) % 8 == 0);
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int col = n0 + wn + j * 8 + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm + i * 16 + g + 8 * h;
        if (row >= M) continue;
        float* c = C + static_cast<int64_t>(row) * N + col;
        const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        if (pairs && col + 1 < N) {
          *reinterpret_cast<float2*>(c) = make_float2(v0, v1);
        } else {
          if (col < N) c[0] = v0;
          if (col + 1 < N) c[1] = v1;
        }
      }
    }
}

template <bool VEC>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int M = static_cast<int>(a.size(0)), K = static_cast<int>(a.size(1));
  const int N = static_cast<int>(b.size(1));
  auto kernel = gemm_tf32x3_kernel<VEC>;
  // More than 48 KiB of dynamic shared memory is opted into per kernel.
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(SMEM_BYTES)));
  const int64_t tiles = ((static_cast<int64_t>(M) + BM - 1) / BM) * ((static_cast<int64_t>(N) + BN - 1) / BN);
  kernel<<<static_cast<unsigned>(tiles), THREADS, SMEM_BYTES, ksuite::current_stream()>>>(
      a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor gemm_tf32x3(const at::Tensor& a, const at::Tensor& b) {
  ksuite_gemm_operands::check(a, b, "gemm_tf32x3");
  KSUITE_CHECK(a.scalar_type() == at::kFloat, "gemm_tf32x3: only float32 is supported, got ", a.scalar_type());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const c10::cuda::CUDAGuard guard(a.device());
  KSUITE_CHECK(ksuite::compute_major() >= 8, "gemm_tf32x3: needs TF32 tensor cores (sm_80 or newer), this GPU is sm_",
               ksuite::compute_major(), "x");
  if (M == 0 || N == 0) return at::empty({M, N}, a.options());
  if (K == 0) return at::zeros({M, N}, a.options());
  KSUITE_CHECK(((M + BM - 1) / BM) * ((N + BN - 1) / BN) < (1LL << 31), "gemm_tf32x3: too many tiles for one grid");
  KSUITE_CHECK(ksuite::max_smem_optin() >= static_cast<int>(SMEM_BYTES), "gemm_tf32x3: needs ", SMEM_BYTES,
               " bytes of shared memory a block, this GPU offers ", ksuite::max_smem_optin());
  at::Tensor c = at::empty({M, N}, a.options());
  const bool vec = K % 4 == 0 && N % 4 == 0 && ksuite::aligned16(a.data_ptr()) && ksuite::aligned16(b.data_ptr());
  if (vec) {
    launch<true>(a, b, c);
  } else {
    launch<false>(a, b, c);
  }
  return c;
}

}  // namespace ksuite_gemm_tf32x3

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_tf32x3(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_tf32x3", &ksuite_gemm_tf32x3::gemm_tf32x3);
}
