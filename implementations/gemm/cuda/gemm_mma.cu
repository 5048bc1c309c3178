// C = A @ B on tensor cores with mma.sync (sm_80+), row-major A (M x K),
// B (K x N), C (M x N), float16 or bfloat16 with fp32 accumulation.  The
// kernel (and what makes it fast) is in gemm_mma_kernel.cuh; this file holds
// the tile table, the automatic choice, the split-K plan and the op's
// boundary checks.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "ksuite/common.cuh"
#include "operands.h"
#include "split_counters.h"
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

// ---- split-K ----
// A grid of few tiles and a long K leaves most SMs idle while each CTA walks
// all of K.  Then K is cut into S slices a tile (gemm_mma_kernel's SPLIT), so
// that tiles x S CTAs fill up to one wave of the GPU: the SM count times the
// CTAs of the split kernel an SM holds (the occupancy API).  The last slice of
// a tile to finish reads all S fp32 partials alone, so S is chosen by a cost
// model, in units of a k-tile's time on the aligned path:
//  - a slice's walk: ceil(kt / S) k-tiles (kt = ceil(K / BK)), times the CTAs
//    that share an SM on the aligned path (tensor-core bound: ceil(tiles x
//    S / SMs)); the guarded path's k-tile counts kGuardedKTile times (its
//    loads are synchronous, 2 bytes each, and nothing is in flight across
//    the barrier, so two CTAs on an SM overlap rather than share);
//  - the tail: S + 1 partials (the last slice's own write, then S reads), each
//    0.1 k-tile of fence and barrier plus its bytes (the tile's fragments
//    inside M and N, fp32) at twice the rate the walk streams A and B
//    ((BM + BN) x BK x 2 bytes a k-tile), as an L2 read does against an
//    SM's share of a k-tile's mma and copies;
//  - S = the cheapest count from 1 up to one wave and to kt / kSplitMinKTiles
//    (each slice at least that many k-tiles, so the pipeline fills); S = 1
//    unless a split costs less, and always when the tiles fill half a wave.
// In integers: costs are scaled by 10 x the bytes of an aligned k-tile.
// Mirrored in implementations/gemm/cuda/__init__.py (split_plan) for `config`.
constexpr int64_t kSplitMinKTiles = 4;
constexpr int64_t kGuardedKTile = 4;

int64_t split_slices(int64_t M, int64_t N, int64_t K, int BM, int BN, int BK, bool aligned, int64_t sms,
                     int64_t per_sm) {
  const int64_t tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  const int64_t kt = (K + BK - 1) / BK;
  const int64_t most = std::min(sms * per_sm / tiles, kt / kSplitMinKTiles);
  if (most < 2) return 1;
  const int64_t ktile_bytes = static_cast<int64_t>(BM + BN) * BK * 2;
  const int64_t rows = std::min<int64_t>(BM, (M + 15) / 16 * 16), cols = std::min<int64_t>(BN, (N + 7) / 8 * 8);
  const int64_t step = 10 * ktile_bytes * (aligned ? 1 : kGuardedKTile);
  const int64_t partial = ktile_bytes + 5 * rows * cols * 4;
  auto cost = [&](int64_t s) {
    const int64_t share = aligned ? (tiles * s + sms - 1) / sms : 1;
    return step * ((kt + s - 1) / s) * share + (s > 1 ? (s + 1) * partial : 0);
  };
  int64_t best = 1, best_cost = cost(1);
  for (int64_t s = 2; s <= most; ++s) {
    const int64_t c = cost(s);
    if (c < best_cost) best = s, best_cost = c;
  }
  return best;
}

// The split kernel's CTAs an SM holds (its shared memory opted in first, once
// a device: the occupancy API counts with the attribute).
template <typename T, typename Cfg, bool ALIGNED>
int split_resident() {
  constexpr int kMaxDevices = 64;
  static bool opted[kMaxDevices] = {};
  auto kernel = gemm_mma_kernel<T, Cfg, ALIGNED, true>;
  const int dev = c10::cuda::current_device();
  if (dev >= kMaxDevices || !opted[dev]) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES));
    if (dev < kMaxDevices) opted[dev] = true;
  }
  return std::max(ksuite::resident_blocks<gemm_mma_kernel<T, Cfg, ALIGNED, true>, Cfg::THREADS,
                                          static_cast<size_t>(Cfg::SMEM_BYTES)>(), 1);
}

// Slices of K for this tile config: `splits` if positive (clamped to the
// k-tiles and to a grid's y limit), else the plan.
template <typename T, typename Cfg, bool ALIGNED>
int64_t slices_for(int64_t M, int64_t N, int64_t K, int64_t splits) {
  const int64_t kt = (K + Cfg::BK - 1) / Cfg::BK;
  if (splits > 0) return std::max<int64_t>(1, std::min({splits, kt, int64_t{65535}}));
  return split_slices(M, N, K, Cfg::BM, Cfg::BN, Cfg::BK, ALIGNED, ksuite::sm_count(),
                      split_resident<T, Cfg, ALIGNED>());
}

template <typename T, typename Cfg, bool ALIGNED>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, int64_t splits) {
  const int M = static_cast<int>(a.size(0)), K = static_cast<int>(a.size(1));
  const int N = static_cast<int>(b.size(1));
  const int64_t tiles = static_cast<int64_t>((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
  const int64_t slices = slices_for<T, Cfg, ALIGNED>(M, N, K, splits);
  const T* pa = reinterpret_cast<const T*>(a.data_ptr());
  const T* pb = reinterpret_cast<const T*>(b.data_ptr());
  T* pc = reinterpret_cast<T*>(c.data_ptr());
  if (slices == 1) {
    auto kernel = gemm_mma_kernel<T, Cfg, ALIGNED>;
    // More than 48 KiB of dynamic shared memory must be opted into per kernel.
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        Cfg::SMEM_BYTES));
    kernel<<<static_cast<unsigned>(tiles), Cfg::THREADS, Cfg::SMEM_BYTES, ksuite::current_stream()>>>(
        pa, pb, pc, M, N, K, nullptr, nullptr);
  } else {
    auto kernel = gemm_mma_kernel<T, Cfg, ALIGNED, true>;
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        Cfg::SMEM_BYTES));
    // tiles x slices partial tiles of BM x BN fp32, from the caching allocator
    const at::Tensor ws = at::empty({tiles * slices * Cfg::BM * Cfg::BN}, a.options().dtype(at::kFloat));
    int* cnt = ksuite_gemm_split::counters(tiles);
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(slices));
    kernel<<<grid, Cfg::THREADS, Cfg::SMEM_BYTES, ksuite::current_stream()>>>(pa, pb, pc, M, N, K,
                                                                            ws.data_ptr<float>(), cnt);
  }
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

// Calls F<Cfg, ALIGNED>()(args...) for the tile the op runs: tile 0 guarded
// when !aligned (the edge path has one tile), else `tile` (-1: auto_tile).
template <template <typename, bool> class F, typename... Args>
auto with_tile(bool aligned, int64_t tile, int64_t M, int64_t N, int64_t K, Args&&... args) {
  if (!aligned) return F<Tile0, false>()(args...);
  switch (tile < 0 ? auto_tile(M, N, K) : tile) {
    case 0: return F<Tile0, true>()(args...);
    case 1: return F<Tile1, true>()(args...);
    case 2: return F<Tile2, true>()(args...);
    case 3: return F<Tile3, true>()(args...);
    case 4: return F<Tile4, true>()(args...);
    case 5: return F<Tile5, true>()(args...);
    case 6: return F<Tile6, true>()(args...);
    case 7: return F<Tile7, true>()(args...);
    case 8: return F<Tile8, true>()(args...);
    default: return F<Tile9, true>()(args...);
  }
}

template <typename T>
struct Launch {
  template <typename Cfg, bool ALIGNED>
  struct F {
    void operator()(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, int64_t splits) {
      launch<T, Cfg, ALIGNED>(a, b, c, splits);
    }
  };
};

template <typename T>
struct Plan {
  template <typename Cfg, bool ALIGNED>
  struct F {
    std::vector<int64_t> operator()(int64_t M, int64_t N, int64_t K) {
      const int64_t tiles = ((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
      return {slices_for<T, Cfg, ALIGNED>(M, N, K, 0), tiles, split_resident<T, Cfg, ALIGNED>()};
    }
  };
};

// splits: 0 = the plan (split_slices), 1 = never split, more = that many
// slices (clamped to the k-tiles), for tests and probes of the split path.
at::Tensor gemm_mma(const at::Tensor& a, const at::Tensor& b, int64_t tile, int64_t splits) {
  ksuite_gemm_operands::check(a, b, "gemm_mma");
  KSUITE_CHECK(a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16,
              "gemm_mma: only float16 and bfloat16 are supported (tensor-core mma), got ",
              a.scalar_type());
  KSUITE_CHECK(tile >= -1 && tile < NUM_TILES, "gemm_mma: tile must be -1 (automatic) or 0..",
              NUM_TILES - 1, ", got ", tile);
  KSUITE_CHECK(splits >= 0, "gemm_mma: splits must be 0 (the plan), 1 (no split) or more, got ", splits);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);

  const c10::cuda::CUDAGuard guard(a.device());
  at::Tensor c = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  if (K == 0) return c.zero_();
  // 16-byte copies need every row of A and B to start on a 16-byte boundary.
  const bool aligned = K % 8 == 0 && N % 8 == 0 && ksuite::aligned16(a.data_ptr()) &&
                       ksuite::aligned16(b.data_ptr());
  if (a.scalar_type() == at::kHalf) {
    with_tile<Launch<__half>::F>(aligned, tile, M, N, K, a, b, c, splits);
  } else {
    with_tile<Launch<__nv_bfloat16>::F>(aligned, tile, M, N, K, a, b, c, splits);
  }
  return c;
}

// The split plan gemm_mma follows on the current device for an M x N x K
// product of `dtype` with `tile` (-1: auto_tile; ignored unless aligned, as
// in gemm_mma): [slices, tiles, CTAs of the split kernel an SM holds].  For
// tests of the Python mirror (split_plan) against the device's own figures.
std::vector<int64_t> gemm_mma_split_plan(int64_t M, int64_t N, int64_t K, int64_t tile, bool aligned,
                                         c10::ScalarType dtype) {
  KSUITE_CHECK(M > 0 && N > 0 && K > 0, "gemm_mma_split_plan: M, N and K must be positive");
  KSUITE_CHECK(tile >= -1 && tile < NUM_TILES, "gemm_mma_split_plan: tile must be -1 or 0..", NUM_TILES - 1);
  if (dtype == at::kHalf) return with_tile<Plan<__half>::F>(aligned, tile, M, N, K, M, N, K);
  KSUITE_CHECK(dtype == at::kBFloat16, "gemm_mma_split_plan: float16 or bfloat16, got ", dtype);
  return with_tile<Plan<__nv_bfloat16>::F>(aligned, tile, M, N, K, M, N, K);
}

}  // namespace ksuite_gemm

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_mma(Tensor a, Tensor b, int tile=-1, int splits=0) -> Tensor");
  m.def("gemm_mma_split_plan(int m, int n, int k, int tile, bool aligned, ScalarType dtype) -> int[]",
        &ksuite_gemm::gemm_mma_split_plan);
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_mma", &ksuite_gemm::gemm_mma);
}
