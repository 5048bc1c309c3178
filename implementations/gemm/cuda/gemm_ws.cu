// C = A @ B with mma.sync m16n8k16 tensor-core math fed by TMA: the
// warp-specialised tiles of the `cuda` GEMM (gemm_ws_kernel.cuh says how and
// why).  Row-major A (M x K), B (K x N), C (M x N), float16 or bfloat16 with
// fp32 accumulation; sm_90a (TMA, setmaxnreg); N and K multiples of 8 and
// 16-byte aligned bases (TMA's 16-byte row strides).
//
// Tiles (the op's `tile`), 4 stages of 48 KiB, 8 mma warps of 64 x 64:
//   0: 256 x 128 x 64
//   1: 128 x 256 x 64
//   2, 3: tiles 0 and 1 storing C through shared memory in 16-byte pieces
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <string>

#include "ksuite/common.cuh"
#include "operands.h"
#include "gemm_ws_kernel.cuh"
#include "tma_map.h"

namespace ksuite_gemm {

using Ws0 = WsConfig<256, 128, 4>;
using Ws1 = WsConfig<128, 256, 4>;
constexpr int NUM_WS_TILES = 4;

template <typename T, typename Cfg, bool STAGED>
void launch_ws(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int M = static_cast<int>(a.size(0)), K = static_cast<int>(a.size(1));
  const int N = static_cast<int>(b.size(1));
  const CUtensorMap ma = ksuite_hopper::make_map(a, M, K, Cfg::BM, "gemm_mma_ws", "a");
  const CUtensorMap mb = ksuite_hopper::make_map(b, K, N, 64, "gemm_mma_ws", "b");
  auto kernel = gemm_ws_kernel<T, Cfg, STAGED>;
  // More than 48 KiB of dynamic shared memory must be opted into per kernel.
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES));
  const int64_t tiles = static_cast<int64_t>((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
  const int grid = static_cast<int>(std::min<int64_t>(tiles, ksuite::sm_count()));
  kernel<<<grid, Cfg::THREADS, Cfg::SMEM_BYTES, ksuite::current_stream()>>>(
      ma, mb, reinterpret_cast<T*>(c.data_ptr()), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void dispatch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, int64_t tile) {
  switch (tile) {
    case 0: return launch_ws<T, Ws0, false>(a, b, c);
    case 1: return launch_ws<T, Ws1, false>(a, b, c);
    case 2: return launch_ws<T, Ws0, true>(a, b, c);
    default: return launch_ws<T, Ws1, true>(a, b, c);
  }
}

at::Tensor gemm_mma_ws(const at::Tensor& a, const at::Tensor& b, int64_t tile) {
  ksuite_gemm_operands::check(a, b, "gemm_mma_ws");
  KSUITE_CHECK(a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16,
               "gemm_mma_ws: only float16 and bfloat16 are supported (tensor-core mma), got ", a.scalar_type());
  KSUITE_CHECK(tile >= 0 && tile < NUM_WS_TILES, "gemm_mma_ws: tile must be 0..", NUM_WS_TILES - 1, ", got ",
               tile);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  KSUITE_CHECK(K % 8 == 0 && N % 8 == 0,
               "gemm_mma_ws: N and K must be multiples of 8 for TMA (16-byte row strides), got N=", N, " K=", K);

  const c10::cuda::CUDAGuard guard(a.device());
  KSUITE_CHECK(ksuite::compute_major() == 9, "gemm_mma_ws: needs a Hopper GPU (sm_90), this one is sm_",
               ksuite::compute_major(), "x");
  at::Tensor c = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  if (K == 0) return c.zero_();
  KSUITE_CHECK(ksuite::aligned16(a.data_ptr()) && ksuite::aligned16(b.data_ptr()),
               "gemm_mma_ws: a and b must start at 16-byte aligned addresses for TMA");
  if (a.scalar_type() == at::kHalf) {
    dispatch<__half>(a, b, c, tile);
  } else {
    dispatch<__nv_bfloat16>(a, b, c, tile);
  }
  return c;
}

}  // namespace ksuite_gemm

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_mma_ws(Tensor a, Tensor b, int tile=0) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_mma_ws", &ksuite_gemm::gemm_mma_ws);
}
