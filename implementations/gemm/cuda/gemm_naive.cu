// C = A @ B with one thread per element of C and no tiling: the baseline that
// shows what shared-memory tiling and tensor cores buy.  Every thread streams
// a row of A and a column of B from global memory (caches permitting) and
// accumulates in fp32 on the ordinary FMA units.  threadIdx.x runs along N so
// that a warp's loads of B and stores of C are coalesced; its loads of A are a
// broadcast of one element.  Any shape, float32, float16 and bfloat16.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ksuite/common.cuh"
#include "operands.h"

namespace ksuite_gemm_naive {

template <typename T>
__global__ void gemm_naive_kernel(const T* __restrict__ A, const T* __restrict__ B,
                                  T* __restrict__ C, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  const T* a = A + static_cast<int64_t>(m) * K;
  const T* b = B + n;
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc = fmaf(ksuite::to_float(a[k]), ksuite::to_float(b[static_cast<int64_t>(k) * N]), acc);
  C[static_cast<int64_t>(m) * N + n] = ksuite::from_float<T>(acc);
}

template <typename T>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int M = static_cast<int>(a.size(0)), K = static_cast<int>(a.size(1));
  const int N = static_cast<int>(b.size(1));
  const dim3 block(32, 8);
  const dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  gemm_naive_kernel<T><<<grid, block, 0, ksuite::current_stream()>>>(
      reinterpret_cast<const T*>(a.data_ptr()), reinterpret_cast<const T*>(b.data_ptr()),
      reinterpret_cast<T*>(c.data_ptr()), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor gemm_naive(const at::Tensor& a, const at::Tensor& b) {
  ksuite_gemm_operands::check(a, b, "gemm_naive");
  KSUITE_CHECK(a.scalar_type() == at::kFloat || a.scalar_type() == at::kHalf ||
                  a.scalar_type() == at::kBFloat16,
              "gemm_naive: only float32, float16 and bfloat16 are supported, got ", a.scalar_type());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  KSUITE_CHECK((M + 7) / 8 <= 65535, "gemm_naive: M must be at most ", 8 * 65535,
              " (the grid's y limit), got ", M);
  const auto dt = a.scalar_type();

  const c10::cuda::CUDAGuard guard(a.device());
  at::Tensor c = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  if (dt == at::kFloat) {
    launch<float>(a, b, c);
  } else if (dt == at::kHalf) {
    launch<c10::Half>(a, b, c);
  } else {
    launch<c10::BFloat16>(a, b, c);
  }
  return c;
}

}  // namespace ksuite_gemm_naive

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_naive(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_naive", &ksuite_gemm_naive::gemm_naive);
}
