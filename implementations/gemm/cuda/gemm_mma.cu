// C = A @ B on tensor cores with mma.sync (sm_80+), row-major A (M x K),
// B (K x N), C (M x N), float16 or bfloat16 with fp32 accumulation.  The
// kernel (and what makes it fast) is in gemm_mma_kernel.cuh; this file holds
// the tile table, the automatic choice and the op's boundary checks.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ksuite/common.cuh"
#include "operands.h"
#include "gemm_mma_kernel.cuh"

namespace ksuite_gemm {

// The tiles the op can run (the `tile` argument; -1 picks one, see auto_tile).
// Every warp computes 64x64 of C (128 fp32 accumulators per thread).
// Mirrored in implementations/gemm/cuda/__init__.py (TILES) for `config`.
//                        BM   BN   BK  STAGES  CTAs/SM
using Tile0 = TileConfig<128, 128, 32, 4, 2>;  // 4 warps,  74 KiB smem
using Tile1 = TileConfig<128, 256, 32, 4, 1>;  // 8 warps, 106 KiB
using Tile2 = TileConfig<128, 256, 64, 3, 1>;  // 8 warps, 153 KiB
using Tile3 = TileConfig<256, 128, 64, 3, 1>;  // 8 warps, 159 KiB
using Tile4 = TileConfig<128, 128, 64, 3, 2>;  // 4 warps, 105 KiB
using Tile5 = TileConfig<128, 256, 64, 4, 1>;  // 8 warps, 204 KiB
// 6..9: tiles 3, 2, 5 and 4 with each k-tile's cp.async spread over its
// first three k16 slices (TileConfig::SPREAD), so that no ldmatrix is
// scheduled right before the mma that consumes it.
using Tile6 = TileConfig<256, 128, 64, 3, 1, true>;  // 8 warps, 159 KiB
using Tile7 = TileConfig<128, 256, 64, 3, 1, true>;  // 8 warps, 153 KiB
using Tile8 = TileConfig<128, 256, 64, 4, 1, true>;  // 8 warps, 204 KiB
using Tile9 = TileConfig<128, 128, 64, 3, 2, true>;  // 4 warps, 105 KiB
constexpr int NUM_TILES = 10;

template <typename T, typename Cfg, bool ALIGNED>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int M = static_cast<int>(a.size(0)), K = static_cast<int>(a.size(1));
  const int N = static_cast<int>(b.size(1));
  auto kernel = gemm_mma_kernel<T, Cfg, ALIGNED>;
  // More than 48 KiB of dynamic shared memory must be opted into per kernel.
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      Cfg::SMEM_BYTES));
  const int64_t tiles = static_cast<int64_t>((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
  kernel<<<static_cast<unsigned>(tiles), Cfg::THREADS, Cfg::SMEM_BYTES,
           ksuite::current_stream()>>>(
      reinterpret_cast<const T*>(a.data_ptr()), reinterpret_cast<const T*>(b.data_ptr()),
      reinterpret_cast<T*>(c.data_ptr()), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Without a choice: 128x256x64 (8 warps, one CTA per SM: the fewest shared
// memory and L2 reads per mma) when its CTAs fill at least two waves on this
// GPU; else 128x128x64 (4 warps, two CTAs per SM), which keeps twice as many
// SMs busy on smaller problems; 128x128x32 when K is short.
// Mirrored in implementations/gemm/cuda/__init__.py (_tile) for `config`.
int auto_tile(int64_t M, int64_t N, int64_t K) {
  const int64_t big = ((M + 127) / 128) * ((N + 255) / 256);
  if (big >= 2 * ksuite::sm_count() && K >= 256) return 2;
  return K >= 256 ? 4 : 0;
}

template <typename T>
void dispatch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, bool aligned, int64_t tile) {
  if (!aligned) return launch<T, Tile0, false>(a, b, c);  // the edge path has one tile
  switch (tile < 0 ? auto_tile(a.size(0), b.size(1), a.size(1)) : tile) {
    case 0: return launch<T, Tile0, true>(a, b, c);
    case 1: return launch<T, Tile1, true>(a, b, c);
    case 2: return launch<T, Tile2, true>(a, b, c);
    case 3: return launch<T, Tile3, true>(a, b, c);
    case 4: return launch<T, Tile4, true>(a, b, c);
    case 5: return launch<T, Tile5, true>(a, b, c);
    case 6: return launch<T, Tile6, true>(a, b, c);
    case 7: return launch<T, Tile7, true>(a, b, c);
    case 8: return launch<T, Tile8, true>(a, b, c);
    default: return launch<T, Tile9, true>(a, b, c);
  }
}

at::Tensor gemm_mma(const at::Tensor& a, const at::Tensor& b, int64_t tile) {
  ksuite_gemm_operands::check(a, b, "gemm_mma");
  KSUITE_CHECK(a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16,
              "gemm_mma: only float16 and bfloat16 are supported (tensor-core mma), got ",
              a.scalar_type());
  KSUITE_CHECK(tile >= -1 && tile < NUM_TILES, "gemm_mma: tile must be -1 (automatic) or 0..",
              NUM_TILES - 1, ", got ", tile);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);

  const c10::cuda::CUDAGuard guard(a.device());
  at::Tensor c = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  if (K == 0) return c.zero_();
  // 16-byte copies need every row of A and B to start on a 16-byte boundary.
  const bool aligned = K % 8 == 0 && N % 8 == 0 && ksuite::aligned16(a.data_ptr()) &&
                       ksuite::aligned16(b.data_ptr());
  if (a.scalar_type() == at::kHalf) {
    dispatch<__half>(a, b, c, aligned, tile);
  } else {
    dispatch<__nv_bfloat16>(a, b, c, aligned, tile);
  }
  return c;
}

}  // namespace ksuite_gemm

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_mma(Tensor a, Tensor b, int tile=-1) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_mma", &ksuite_gemm::gemm_mma);
}
