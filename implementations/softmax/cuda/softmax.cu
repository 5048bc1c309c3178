// softmax over the last dim of a contiguous M x N matrix, computed in float32.
//
// Napkin math: 2*M*N*sizeof(T) bytes compulsory, ~5 FLOPs an element: memory
// bound.  At the H200's ~4.2 TB/s an SM must keep ~32 KB of loads in flight
// (Little: bandwidth x ~1 us / 132 SMs).  A row kernel only has loads in
// flight between a row's first load and its first reduction, so every plan
// issues all loads of its row (or slice) first, and each thread keeps a
// running (max, sum of exp) over its own elements: one pair reduction a row.
// bf16 131072 columns at copy speed are ~1 T elements/s, where instructions
// rather than bytes are the limit: plans 29-33 take the row max on raw pairs
// (max.bf16x2 / max.f16x2; plan 30: 568 -> 540 us, 0.89 -> 0.94 of copy).
//
// Plans (softmax_v's `variant`; 0 = auto, which softmax runs), all candidates
// of the registered op's tuner (cuda/__init__.py names each one):
//  1-3        row in registers, 4 / 2 / 8 packs of 16 B a thread; a warp or a block a row
//  4, 5       cluster of 2..8 CTAs, the row's slices in shared memory by TMA (<= 32 / 64 KB)
//  6          cluster, register loads into shared memory (any alignment)
//  7          streaming: online (max, sum) pass, then a backwards output pass (L2 re-reads)
//  8-10       persistent clusters, TMA into 2 or 3 slice buffers: the next rows in flight
//  11-14      short rows (<= 128 packs): lane groups of several rows, shuffles only
//  15-17, 26  any alignment: scalar head and tail, 16-byte body (26: packs kept raw)
//  18-22      as 8-10 with the slice copied to registers once and its buffer refilled early
//  23-25, 27  row (on a cluster: a slice) in registers as raw 16-byte packs, exp twice
//  28-33      16-bit only, exps kept as half2: 28 as 27, 29-33 as 19 at other shapes
//  34, 35     rows of 1..256 columns, any alignment: tiles of whole rows copied into
//             shared memory by 16-byte cp.async, a row a lane group; 34: a tile a
//             block, 35: persistent blocks with the next tile's copies in flight
//  36         as 6 at any alignment: scalar head and tail, 16-byte body
// Auto: registers at 2 packs a thread (float32, and 16-bit rows <= 1024), else
// 4; longer rows on a cluster (float32: register loads, 16-bit: 64 KB TMA
// slices; rows off 16-byte boundaries: plan 36); longer still, streaming.  A
// plan that cannot run a shape (too long a row for registers, a misaligned
// row for TMA or plans 1-14) runs auto's.
//
// This file holds the plan table above, the launchers and the op; the kernels
// are in softmax_rows.cuh (plans 1-3, 11-17, 23-28), softmax_tma.cuh (4, 5,
// 8-10, 18-22, 29-33), softmax_cluster_stream.cuh (6, 7, 36) and
// softmax_tiles.cuh (34, 35), over softmax_common.cuh.
#include <numeric>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ksuite/bulk.cuh"
#include "ksuite/common.cuh"
#include "ksuite/rows.cuh"
#include "softmax_common.cuh"
#include "softmax_tma.cuh"
#include "softmax_cluster_stream.cuh"
#include "softmax_rows.cuh"
#include "softmax_tiles.cuh"

namespace {

// ------------------------------------------------------------- launchers

constexpr int kSoftmaxVariants = 36;

template <typename T, int VEC, int PACKS>
bool launch_regs(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  const ksuite::RegPlan plan = ksuite::plan_regs(n, VEC, PACKS, softmax_regs_max_threads(VEC * PACKS));
  if (plan.tpr == 0) return false;
  const int64_t rows_per_block = plan.threads / plan.tpr;
  const int64_t grid = (m + rows_per_block - 1) / rows_per_block;
  if (grid > 0x7fffffff) return false;
  softmax_regs_kernel<T, VEC, PACKS><<<static_cast<unsigned>(grid), plan.threads, 0, stream>>>(
      x, y, m, static_cast<int>(n), plan.tpr);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// CTAs (a power of two <= 8) for slices of <= target bytes; larger slices at
// 8 CTAs up to the shared memory a block may have; 0: does not fit.
inline int tma_ctas(int64_t packs, int64_t target, int smem_limit) {
  for (int c = 1; c <= 8; c *= 2)
    if ((packs + c - 1) / c * 16 <= target) return c;
  return (packs + 7) / 8 * 16 + 2048 <= smem_limit ? 8 : 0;
}

template <typename T>
bool launch_tma(const T* x, T* y, int64_t m, int64_t n, int64_t target, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if (ksuite::compute_major() < 9 || n % VEC != 0 || n > 0x7fffffff) return false;
  const int64_t packs = n / VEC;
  const int ctas = tma_ctas(packs, target, ksuite::max_smem_optin());
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff)) return false;
  const int chunk = static_cast<int>((packs + ctas - 1) / ctas);
  ksuite::launch_clustered(softmax_tma_kernel<T>, static_cast<unsigned>(m * ctas), kSoftmaxTmaThreads, chunk * 16,
                           ctas, stream, x, y, static_cast<int>(n), chunk);
  return true;
}

// CTAs (a power of two <= 8) for slices of <= target bytes, STAGES buffers a
// CTA; larger slices at 8 CTAs while STAGES of them fit a block's shared
// memory; 0: does not fit.
inline int persistent_ctas(int64_t packs, int64_t target, int stages, int smem_limit) {
  for (int c = 1; c <= 8; c *= 2)
    if ((packs + c - 1) / c * 16 <= target) return c;
  return (packs + 7) / 8 * 16 * stages + 2048 <= smem_limit ? 8 : 0;
}

// The launch both persistent cluster plans share: clusters of `ctas` CTAs,
// each with STAGES buffers of its 1/ctas slice of a row (of `packs` 16-byte
// packs), as many clusters as the GPU holds at once and at most one a row.
template <int STAGES, int THREADS, typename Kernel, typename T>
bool launch_cluster_rows(Kernel kernel, int ctas, const T* x, T* y, int64_t m, int64_t packs, cudaStream_t stream) {
  const int chunk = static_cast<int>((packs + ctas - 1) / ctas);
  const int smem = STAGES * chunk * 16;
  const int clusters = max_active_clusters(kernel, THREADS, smem, ctas);
  if (clusters <= 0) return false;
  const int64_t grid = std::min<int64_t>(m, clusters) * ctas;
  ksuite::launch_clustered(kernel, static_cast<unsigned>(grid), THREADS, smem, ctas, stream, x, y, m,
                           static_cast<int>(packs * ksuite::vec16<T>()), chunk);
  return true;
}

// Plans 8-10: persistent clusters, STAGES slice buffers a CTA of <= target
// bytes each.  One cluster a row at most (m < clusters launches m).
template <typename T, int STAGES, int THREADS, int MIN_BLOCKS>
bool launch_tma_persistent(const T* x, T* y, int64_t m, int64_t n, int64_t target, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if (ksuite::compute_major() < 9 || n % VEC != 0 || n > 0x7fffffff) return false;
  const int64_t packs = n / VEC;
  const int ctas = persistent_ctas(packs, target, STAGES, ksuite::max_smem_optin());
  if (ctas == 0) return false;
  return launch_cluster_rows<STAGES, THREADS>(softmax_tma_persistent_kernel<T, STAGES, THREADS, MIN_BLOCKS>,
                                              ctas, x, y, m, packs, stream);
}

// The fewest CTAs (a power of two <= 8) of per_cta packs each that hold a
// row of `packs`; 0 when 8 do not.
inline int fewest_ctas(int64_t packs, int64_t per_cta) {
  for (int c = 1; c <= 8; c *= 2)
    if ((packs + c - 1) / c <= per_cta) return c;
  return 0;
}

// Plans 18-22, 29-33: persistent clusters of the fewest CTAs whose THREADS x KP
// packs hold the row; STAGES buffers a CTA.
template <typename T, int STAGES, int THREADS, int KP, int MIN_BLOCKS, bool HALF_E = false>
bool launch_tma_regs(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if constexpr (HALF_E && sizeof(T) != 2) return false;  // half2 exps: 16-bit outputs only
  if (ksuite::compute_major() < 9 || n % VEC != 0 || n > 0x7fffffff) return false;
  const int64_t packs = n / VEC;
  const int ctas = fewest_ctas(packs, int64_t(THREADS) * KP);
  if (ctas == 0) return false;
  return launch_cluster_rows<STAGES, THREADS>(softmax_tma_regs_kernel<T, STAGES, THREADS, KP, MIN_BLOCKS, HALF_E>,
                                              ctas, x, y, m, packs, stream);
}

// Plans 23-25, 27, 28: clusters of the fewest CTAs whose THREADS x K packs
// hold the row.
template <typename T, int THREADS, int K, int MIN_BLOCKS, int PATH = ksuite::kNcStream, bool HALF_E = false>
bool launch_raw(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if constexpr (HALF_E && sizeof(T) != 2) return false;  // half2 exps: 16-bit outputs only
  if (ksuite::compute_major() < 9 || n % VEC != 0 || n > 0x7fffffff) return false;
  const int64_t packs = n / VEC;
  const int ctas = fewest_ctas(packs, int64_t(THREADS) * K);
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff)) return false;
  const int chunk = static_cast<int>((packs + ctas - 1) / ctas);
  ksuite::launch_clustered(softmax_raw_kernel<T, THREADS, K, MIN_BLOCKS, PATH, HALF_E>, static_cast<unsigned>(m * ctas),
                           THREADS, 0, ctas, stream, x, y, static_cast<int>(n), chunk);
  return true;
}

template <typename T, int VEC>
bool launch_cluster(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  const int64_t packs = n / VEC;
  const int ctas = ksuite::cluster_ctas(packs, sizeof(Pack<T, VEC>), ksuite::max_smem_optin());
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff) || ksuite::compute_major() < 9) return false;
  const int64_t chunk = (packs + ctas - 1) / ctas;
  ksuite::launch_clustered(softmax_cluster_kernel<T, VEC>, static_cast<unsigned>(m * ctas), kSoftmaxClusterThreads,
                           static_cast<int>(chunk * sizeof(Pack<T, VEC>)), ctas, stream, x, y, n, chunk);
  return true;
}

// Plan 36: the cluster of plan 6 over rows at any alignment, each split at
// its 16-byte boundaries (softmax_cluster_kernel, SPLIT).  x and y must be
// equally misaligned (torch's allocations, contiguous: bases on 16-byte
// boundaries), so that one split serves both; the CTAs' slices are sized for
// the longest body, the n / VEC packs of a row that starts on a boundary.
template <typename T>
bool launch_cluster_split(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if (((reinterpret_cast<std::uintptr_t>(x) - reinterpret_cast<std::uintptr_t>(y)) & 15u) != 0) return false;
  if (ksuite::compute_major() < 9 || n > 0x7fffffff) return false;
  const int64_t packs = n / VEC;
  const int ctas = ksuite::cluster_ctas(packs, 16, ksuite::max_smem_optin());
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff)) return false;
  const int64_t chunk = (packs + ctas - 1) / ctas;
  ksuite::launch_clustered(softmax_cluster_kernel<T, VEC, true>, static_cast<unsigned>(m * ctas),
                           kSoftmaxClusterThreads, static_cast<int>(chunk * 16), ctas, stream, x, y, n, chunk);
  return true;
}

template <typename T, int VEC>
void launch_stream(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(std::min<int64_t>(m, ksuite::sm_count()));
  softmax_stream_kernel<T, VEC><<<grid, 1024, 0, stream>>>(x, y, m, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Plans 11-14: the short-row kernel with `slots` packs a lane (R = slots / K
// rows a lane group, at least 1), `warps` warps a block.  Rows of 1..128
// packs only (K <= 4).
constexpr int kWarpRowsMaxPacks = 128;

template <typename T, int K, int R, int PATH>
bool launch_warp_rows_k(const T* x, T* y, int64_t m, int64_t n, int warps, int lanes_log2, cudaStream_t stream) {
  const int64_t rows_per_block = int64_t(warps) * R * (32 >> lanes_log2);
  const int64_t grid = (m + rows_per_block - 1) / rows_per_block;
  if (grid > 0x7fffffff) return false;
  softmax_warp_rows_kernel<T, K, R, PATH><<<static_cast<unsigned>(grid), warps * 32, 0, stream>>>(
      x, y, m, static_cast<int>(n), lanes_log2);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

template <typename T, int SLOTS, int PATH>
bool launch_warp_rows(const T* x, T* y, int64_t m, int64_t n, int warps, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  const int64_t packs = n / VEC;
  if (n % VEC != 0 || packs < 1 || packs > kWarpRowsMaxPacks) return false;
  if (packs <= 32) {
    int lanes_log2 = 0;
    while ((int64_t(1) << lanes_log2) < packs) ++lanes_log2;
    return launch_warp_rows_k<T, 1, SLOTS, PATH>(x, y, m, n, warps, lanes_log2, stream);
  }
  constexpr int R2 = SLOTS / 2 > 0 ? SLOTS / 2 : 1, R4 = SLOTS / 4 > 0 ? SLOTS / 4 : 1;
  if (packs <= 64) return launch_warp_rows_k<T, 2, R2, PATH>(x, y, m, n, warps, 5, stream);
  return launch_warp_rows_k<T, 4, R4, PATH>(x, y, m, n, warps, 5, stream);
}

// Plans 15-17 and 26: any n (K packs a thread, threads a row as plan_regs), when
// x and y rows are equally misaligned.
template <typename T, int K, bool RAW = false>
bool launch_unaligned(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  constexpr int PATH = softmax_access::kPlain;
  if (((reinterpret_cast<std::uintptr_t>(x) - reinterpret_cast<std::uintptr_t>(y)) & 15u) != 0) return false;
  // Threads for the body only: at most n / VEC packs whatever the row's
  // misalignment (2053 bf16: 256 packs, 64 threads at 4 packs; sized for
  // ceil(n / VEC) = 257 it would be 96, a third of them idle after the first
  // packs).  Head and tail go to the first <= 2 (VEC - 1) threads.
  const ksuite::RegPlan plan =
      ksuite::plan_regs(n / VEC * VEC, VEC, K, RAW ? kRawUnalignedThreads : softmax_regs_max_threads(VEC * K));
  if (plan.tpr == 0) return false;
  if (plan.tpr <= 32) {
    const int64_t grid = (m + 3) / 4;
    softmax_unaligned_kernel<T, K, false, PATH, RAW><<<static_cast<unsigned>(grid), 128, 0, stream>>>(
        x, y, m, static_cast<int>(n));
  } else {
    softmax_unaligned_kernel<T, K, true, PATH, RAW><<<static_cast<unsigned>(m), plan.tpr, 0, stream>>>(
        x, y, m, static_cast<int>(n));
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// Plans 34 and 35: tiles of whole rows in shared memory (softmax_tiles.cuh)
// for rows of 1..kTileMaxCols columns, x and y at any alignment, 1 << glog
// lanes a row (tile_lanes_log2).  Rows a tile: a multiple of the rows whose
// bytes are a multiple of 16 and of the block's row groups (every lane busy
// in each round), as many as TILE_BYTES holds; fewer where that leaves
// under two tiles an SM (100003 float32 rows of 7 at 16 KB: 196 tiles of
// 512 rows; on 132 SMs 264 of 380 rows instead).  STAGES 1: a block a
// tile.  STAGES 2: one persistent block for each that fits the GPU at once
// (6 an SM), at most one a tile.
template <typename T, int STAGES, int TILE_BYTES, int MIN_BLOCKS>
bool launch_tiles(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  static_assert(TILE_BYTES >= kTileThreads * kTileQ * 4, "one round of the groups' rows must fit a tile");
  if (n < 1 || n > kTileMaxCols) return false;
  const int ni = static_cast<int>(n);
  const int glog = tile_lanes_log2<T>(ni);
  const int64_t row_bytes = n * static_cast<int64_t>(sizeof(T));
  const int64_t align_rows = 16 / std::gcd<int64_t>(row_bytes, 16);
  const int64_t unit = std::max<int64_t>(align_rows, kTileThreads >> glog);
  int64_t rows = TILE_BYTES / row_bytes / unit * unit;  // >= unit: unit * row_bytes <= 8 KB
  const int64_t spread = 2 * int64_t(ksuite::sm_count());
  if ((m + rows - 1) / rows < spread) {
    const int64_t even = ((m + spread - 1) / spread + align_rows - 1) / align_rows * align_rows;
    rows = std::min(rows, std::max(align_rows, even));
  }
  if (rows < 1 || rows * row_bytes > TILE_BYTES) return false;  // (cannot happen: see above)
  const int64_t tiles = (m + rows - 1) / rows;
  constexpr auto kernel = softmax_tile_kernel<T, STAGES, TILE_BYTES, MIN_BLOCKS>;
  int64_t grid = tiles;
  if constexpr (STAGES == 2) {
    const int per_sm = ksuite::resident_blocks<kernel, kTileThreads>();
    if (per_sm <= 0) return false;
    grid = std::min<int64_t>(tiles, int64_t(per_sm) * ksuite::sm_count());
  }
  if (grid > 0x7fffffff) return false;
  kernel<<<static_cast<unsigned>(grid), kTileThreads, 0, stream>>>(x, y, m, ni, static_cast<int>(rows), glog, tiles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// Auto, chosen by a variant sweep on the H200 (softmax_v runs each plan): rows
// in registers at 2 packs a thread for float32 and for 16-bit rows up to 1024
// columns, else 4 packs; rows too long for registers go to a cluster: float32
// with register loads (faster there than TMA), 16-bit with TMA into 64 KB
// slices (faster than 32 KB); rows off 16-byte boundaries (VEC == 1) on the
// cluster with a 16-byte body (plan 36) where x and y are equally
// misaligned, one element a load where not; else two reads.
template <typename T, int VEC>
void launch_auto(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  if constexpr (VEC > 1) {
    if ((VEC == 4 || n <= 1024) && launch_regs<T, VEC, 2>(x, y, m, n, stream)) return;
  }
  if (launch_regs<T, VEC, VEC == 1 ? 8 : 4>(x, y, m, n, stream)) return;
  if constexpr (VEC == 8) {
    if (launch_tma<T>(x, y, m, n, 64 * 1024, stream)) return;
  }
  if constexpr (VEC == 1) {
    if (launch_cluster_split<T>(x, y, m, n, stream)) return;
  }
  if (launch_cluster<T, VEC>(x, y, m, n, stream)) return;
  if constexpr (VEC == 4) {
    if (launch_tma<T>(x, y, m, n, 64 * 1024, stream)) return;
  }
  launch_stream<T, VEC>(x, y, m, n, stream);
}

template <typename T, int VEC>
void launch(const T* x, T* y, int64_t m, int64_t n, int variant, cudaStream_t stream) {
  bool done = false;
  switch (variant) {  // any alignment (VEC == 1 too)
    case 15: done = launch_unaligned<T, 4>(x, y, m, n, stream); break;
    case 16: done = launch_unaligned<T, 2>(x, y, m, n, stream); break;
    case 17: done = launch_unaligned<T, 8>(x, y, m, n, stream); break;
    case 26: done = launch_unaligned<T, 4, true>(x, y, m, n, stream); break;
    case 34: done = launch_tiles<T, 1, 16384, 6>(x, y, m, n, stream); break;
    case 35: done = launch_tiles<T, 2, 8192, 6>(x, y, m, n, stream); break;
    case 36: done = launch_cluster_split<T>(x, y, m, n, stream); break;
    default: break;
  }
  if constexpr (VEC > 1) {  // rows on 16-byte boundaries
    using softmax_access::kNc;
    using softmax_access::kPlain;
    if (!done) switch (variant) {
      case 1: done = launch_regs<T, VEC, 4>(x, y, m, n, stream); break;
      case 2: done = launch_regs<T, VEC, 2>(x, y, m, n, stream); break;
      case 3: done = launch_regs<T, VEC, 8>(x, y, m, n, stream); break;
      case 4: done = launch_tma<T>(x, y, m, n, 32 * 1024, stream); break;
      case 5: done = launch_tma<T>(x, y, m, n, 64 * 1024, stream); break;
      case 6: done = launch_cluster<T, VEC>(x, y, m, n, stream); break;
      case 7: launch_stream<T, VEC>(x, y, m, n, stream); done = true; break;
      case 8: done = launch_tma_persistent<T, 2, 512, 1>(x, y, m, n, 64 * 1024, stream); break;
      case 9: done = launch_tma_persistent<T, 2, 256, 3>(x, y, m, n, 32 * 1024, stream); break;
      case 10: done = launch_tma_persistent<T, 3, 512, 1>(x, y, m, n, 64 * 1024, stream); break;
      case 11: done = launch_warp_rows<T, 2, kPlain>(x, y, m, n, 4, stream); break;
      case 12: done = launch_warp_rows<T, 1, kPlain>(x, y, m, n, 4, stream); break;
      case 13: done = launch_warp_rows<T, 4, kPlain>(x, y, m, n, 1, stream); break;
      case 14: done = launch_warp_rows<T, 2, kNc>(x, y, m, n, 4, stream); break;
      case 18: done = launch_tma_regs<T, 2, 512, 4, 2>(x, y, m, n, stream); break;
      case 19: done = launch_tma_regs<T, 2, 256, 8, 2>(x, y, m, n, stream); break;
      case 20: done = launch_tma_regs<T, 2, 1024, 4, 1>(x, y, m, n, stream); break;
      case 21: done = launch_tma_regs<T, 3, 256, 8, 2>(x, y, m, n, stream); break;
      case 22: done = launch_tma_regs<T, 3, 512, 4, 2>(x, y, m, n, stream); break;
      case 23: done = launch_raw<T, 512, 8, 2>(x, y, m, n, stream); break;
      case 24: done = launch_raw<T, 256, 8, 4>(x, y, m, n, stream); break;
      case 25: done = launch_raw<T, 1024, 8, 1>(x, y, m, n, stream); break;
      case 27: done = launch_raw<T, 512, 8, 2, kPlain>(x, y, m, n, stream); break;
      case 28: done = launch_raw<T, 512, 8, 2, kPlain, true>(x, y, m, n, stream); break;
      case 29: done = launch_tma_regs<T, 2, 256, 8, 3, true>(x, y, m, n, stream); break;
      case 30: done = launch_tma_regs<T, 2, 512, 8, 1, true>(x, y, m, n, stream); break;
      case 31: done = launch_tma_regs<T, 1, 512, 8, 1, true>(x, y, m, n, stream); break;
      case 32: done = launch_tma_regs<T, 1, 512, 16, 1, true>(x, y, m, n, stream); break;
      case 33: done = launch_tma_regs<T, 1, 1024, 8, 1, true>(x, y, m, n, stream); break;
      default: break;
    }
  }
  if (!done) launch_auto<T, VEC>(x, y, m, n, stream);
}

at::Tensor softmax_run(const at::Tensor& x, int64_t variant, const char* op) {
  KSUITE_CHECK(x.is_cuda(), op, ": x must be a CUDA tensor, got one on ", x.device());
  KSUITE_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf ||
                   x.scalar_type() == at::kBFloat16,
               op, ": x must be float32, float16 or bfloat16, got ", x.scalar_type());
  KSUITE_CHECK(x.dim() >= 1, op, ": x must have at least one dimension, got a 0-dim tensor");
  KSUITE_CHECK(x.is_contiguous(), op, ": x must be contiguous (call .contiguous() first)");
  KSUITE_CHECK(variant >= 0 && variant <= kSoftmaxVariants, op, ": variant must be 0 (auto) .. ", kSoftmaxVariants,
               ", got ", variant);
  const int64_t n = x.size(-1);
  const int64_t m = n == 0 ? 0 : x.numel() / n;
  KSUITE_CHECK(m <= int64_t(0x7fffffff), op, ": too many rows (", m, ")");
  KSUITE_CHECK(n <= int64_t(0x7fffffff), op, ": rows longer than 2^31 - 1 columns (", n, ")");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  cudaStream_t stream = ksuite::current_stream();
  KSUITE_DISPATCH_FLOATS(x.scalar_type(), "ksuite_softmax", [&] {
    constexpr int VEC = ksuite::vec16<scalar_t>();
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    scalar_t* yp = y.mutable_data_ptr<scalar_t>();
    // Rows start on 16-byte boundaries only when n is a multiple of VEC.
    if (n % VEC == 0 && ksuite::aligned16(xp) && ksuite::aligned16(yp)) {
      launch<scalar_t, VEC>(xp, yp, m, n, static_cast<int>(variant), stream);
    } else {
      launch<scalar_t, 1>(xp, yp, m, n, static_cast<int>(variant), stream);
    }
  });
  return y;
}

at::Tensor softmax_cuda(const at::Tensor& x) { return softmax_run(x, 0, "kernel_suite::softmax"); }

at::Tensor softmax_v_cuda(const at::Tensor& x, int64_t variant) {
  return softmax_run(x, variant, "kernel_suite::softmax_v");
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("softmax(Tensor x) -> Tensor");
  m.def("softmax_v(Tensor x, int variant) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("softmax", &softmax_cuda);
  m.impl("softmax_v", &softmax_v_cuda);
}
