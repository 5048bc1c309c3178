// C = A @ B with mma.sync m16n8k16 tensor-core math fed by TMA: the
// warp-specialised tiles of the `cuda` GEMM (gemm_ws_kernel.cuh says how and
// why).  Row-major A (M x K), B (K x N), C (M x N), float16 or bfloat16 with
// fp32 accumulation; sm_90a (TMA, setmaxnreg); N and K multiples of 8 and
// 16-byte aligned bases (TMA's 16-byte row strides).
//
// Tiles (the op's `tile`), 4 stages of 48 KiB, 8 mma warps of 64 x 64:
//   0: 256 x 128 x 64
//   1: 128 x 256 x 64
//   2, 3: tiles 0 and 1 with the last partial wave's tiles split along k
//         over every SM (stream-K; the kernel header says how)
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "ksuite/common.cuh"
#include "operands.h"
#include "gemm_ws_kernel.cuh"
#include "tma_map.h"

namespace ksuite_gemm {

using Ws0 = WsConfig<256, 128, 4>;
using Ws1 = WsConfig<128, 256, 4>;
constexpr int NUM_WS_TILES = 4;

// The CTA whose stream-K range holds unit v (as WsSchedule::owner).
inline int64_t range_owner(int64_t v, int64_t units, int64_t grid) { return ((v + 1) * grid - 1) / units; }

// How many CTAs' ranges the most divided of `sk` tiles of `k_tiles` spans.
inline int64_t max_pieces(int64_t sk, int64_t k_tiles, int64_t grid) {
  const int64_t units = sk * k_tiles;
  int64_t most = 1;
  for (int64_t t = 0; t < sk; ++t)
    most = std::max(most, range_owner(t * k_tiles + k_tiles - 1, units, grid) - range_owner(t * k_tiles, units, grid) + 1);
  return most;
}

// Whole tiles for the full waves, stream-K for the rest: the last partial
// wave's tiles, or those and one more wave's when the partial wave alone
// would cut a tile into more than three pieces (the kernel keeps two partial
// sums a tile) or leave a CTA without k-tiles.  No split when the waves are full or both cut too finely.
inline WsSplit plan_split(int64_t tiles, int64_t grid, int64_t k_tiles) {
  WsSplit sp;
  sp.dp_tiles = static_cast<int>(tiles);
  const int64_t rem = tiles % grid;
  if (rem == 0 || k_tiles < 2) return sp;
  for (const int64_t sk : {rem, rem + grid}) {
    if (sk > tiles) break;
    // Every range non-empty (a finisher counts the CTAs after it), no tile in
    // more than three, and the kernel's unit arithmetic within 32 bits.
    if (sk * k_tiles >= grid && sk * k_tiles * grid < (int64_t{1} << 31) && max_pieces(sk, k_tiles, grid) <= 3) {
      sp.dp_tiles = static_cast<int>(tiles - sk);
      sp.sk_tiles = static_cast<int>(sk);
      return sp;
    }
  }
  return sp;
}

// The finishers' counters, one buffer a device and stream, zeroed when made;
// every finisher sets its counter back to 0, so a buffer is reused as is by
// the next launch on its stream.
at::Tensor stream_k_flags(const at::Device& device, cudaStream_t stream, int64_t n) {
  static std::mutex mu;
  static std::map<std::pair<int, cudaStream_t>, at::Tensor> cache;
  const std::lock_guard<std::mutex> lock(mu);
  at::Tensor& flags = cache[{device.index(), stream}];
  if (!flags.defined() || flags.numel() < n)
    flags = at::zeros({std::max<int64_t>(n, 1024)}, at::TensorOptions().dtype(at::kInt).device(device));
  return flags;
}

template <typename T, typename Cfg>
void launch_ws(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, bool stream_k) {
  const int M = static_cast<int>(a.size(0)), K = static_cast<int>(a.size(1));
  const int N = static_cast<int>(b.size(1));
  const CUtensorMap ma = ksuite_hopper::make_map(a, M, K, Cfg::BM, "gemm_mma_ws", "a");
  const CUtensorMap mb = ksuite_hopper::make_map(b, K, N, 64, "gemm_mma_ws", "b");
  // Two kernels: the stream-K bookkeeping left out of the plain one (with it,
  // the plain tiles ran ~3% slower on the H200).
  auto kernel = stream_k ? gemm_ws_kernel<T, Cfg, true> : gemm_ws_kernel<T, Cfg, false>;
  // More than 48 KiB of dynamic shared memory must be opted into per kernel.
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES));
  const int64_t tiles = static_cast<int64_t>((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
  const int64_t sms = ksuite::sm_count();
  const cudaStream_t stream = ksuite::current_stream();
  WsSplit split;
  split.dp_tiles = static_cast<int>(tiles);
  at::Tensor ws;
  if (stream_k) split = plan_split(tiles, sms, (K + Cfg::BK - 1) / Cfg::BK);
  if (split.sk_tiles > 0) {
    ws = at::empty({static_cast<int64_t>(split.sk_tiles) * 2 * 32 * 256 * 4}, a.options().dtype(at::kFloat));
    split.ws = reinterpret_cast<float4*>(ws.data_ptr<float>());
    split.flags = stream_k_flags(a.device(), stream, split.sk_tiles).data_ptr<int>();
  }
  // Every CTA must be resident at once (finishers wait for other CTAs): one
  // a SM, no more CTAs than SMs.
  const int grid = static_cast<int>(split.sk_tiles > 0 ? sms : std::min<int64_t>(tiles, sms));
  kernel<<<grid, Cfg::THREADS, Cfg::SMEM_BYTES, stream>>>(ma, mb, reinterpret_cast<T*>(c.data_ptr()), M, N, K,
                                                          split);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void dispatch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, int64_t tile) {
  const bool stream_k = tile >= 2;
  if (tile % 2 == 0) return launch_ws<T, Ws0>(a, b, c, stream_k);
  launch_ws<T, Ws1>(a, b, c, stream_k);
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
