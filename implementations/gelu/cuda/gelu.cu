// gelu: y = x * 0.5 * (1 + erf(x / sqrt 2)), elementwise, computed in float32.
//
// Napkin math: 2 * N * sizeof(T) bytes, ~10 FLOPs an element: memory bound, so
// the work is keeping enough bytes in flight.  Little's law on the H200:
// ~4.2 TB/s x ~0.7 us latency ~ 3 MB in flight, ~22 KB per SM.  A full SM
// (2048 threads) issuing UNROLL = 4 sixteen-byte loads each has 128 KB in
// flight, comfortably above that; one element per thread (gelu_scalar) has
// 8 KB (fp32) or 4 KB (bf16) and relies on many more blocks to get there.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ksuite/common.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

// Grid-stride over 16-byte packs; each trip issues kUnroll independent loads
// before any math so they overlap.  The n % VEC tail (< VEC elements) is done
// by the first threads of the grid.
template <typename T>
__global__ void __launch_bounds__(kThreads)
gelu_vec_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  constexpr int VEC = ksuite::vec16<T>();
  using P = ksuite::Pack<T, VEC>;
  const P* xp = reinterpret_cast<const P*>(x);
  P* yp = reinterpret_cast<P*>(y);
  const int64_t packs = n / VEC;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;

  for (int64_t base = tid; base < packs; base += stride * kUnroll) {
    P buf[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * stride;
      if (i < packs) buf[u] = xp[i];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * stride;
      if (i < packs) {
        P out;
#pragma unroll
        for (int k = 0; k < VEC; ++k)
          out.v[k] = ksuite::from_float<T>(ksuite::gelu_erf(ksuite::to_float(buf[u].v[k])));
        yp[i] = out;
      }
    }
  }
  const int64_t tail = packs * VEC + tid;
  if (tail < n) y[tail] = ksuite::from_float<T>(ksuite::gelu_erf(ksuite::to_float(x[tail])));
}

// One element per thread, one block per 256 elements: the baseline that shows
// what the vector loads and the bytes-in-flight arithmetic above buy.
template <typename T>
__global__ void __launch_bounds__(kThreads)
gelu_scalar_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = ksuite::from_float<T>(ksuite::gelu_erf(ksuite::to_float(x[i])));
}

void check_input(const at::Tensor& x, const char* op) {
  TORCH_CHECK(x.is_cuda(), op, ": x must be a CUDA tensor, got one on ", x.device());
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf ||
                  x.scalar_type() == at::kBFloat16,
              op, ": x must be float32, float16 or bfloat16, got ", x.scalar_type());
  TORCH_CHECK(x.is_contiguous(), op, ": x must be contiguous (call .contiguous() first)");
}

at::Tensor gelu_cuda(const at::Tensor& x) {
  check_input(x, "kernel_suite::gelu");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  cudaStream_t stream = ksuite::current_stream();
  KSUITE_DISPATCH_FLOATS(x.scalar_type(), "ksuite_gelu", [&] {
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    scalar_t* yp = y.mutable_data_ptr<scalar_t>();
    if (ksuite::aligned16(xp) && ksuite::aligned16(yp)) {
      // Enough blocks to fill every SM at full occupancy, no more: the rest
      // is the grid-stride loop, so the launch stays the same at any N.
      constexpr int VEC = ksuite::vec16<scalar_t>();
      const int64_t needed = (n / VEC + kThreads - 1) / kThreads;
      const int64_t full = int64_t(ksuite::sm_count()) * (ksuite::max_threads_per_sm() / kThreads);
      const int blocks = static_cast<int>(std::max<int64_t>(1, std::min(needed, full)));
      gelu_vec_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(xp, yp, n);
    } else {
      // A view whose storage offset breaks 16-byte alignment: no vector loads.
      const int64_t blocks = (n + kThreads - 1) / kThreads;
      gelu_scalar_kernel<scalar_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(xp, yp, n);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return y;
}

at::Tensor gelu_scalar_cuda(const at::Tensor& x) {
  check_input(x, "kernel_suite::gelu_scalar");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  cudaStream_t stream = ksuite::current_stream();
  KSUITE_DISPATCH_FLOATS(x.scalar_type(), "ksuite_gelu_scalar", [&] {
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    gelu_scalar_kernel<scalar_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        x.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return y;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gelu(Tensor x) -> Tensor");
  m.def("gelu_scalar(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gelu", &gelu_cuda);
  m.impl("gelu_scalar", &gelu_scalar_cuda);
}
