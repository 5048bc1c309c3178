// residual_layernorm_gelu.cu's plans 1-7, 18 and 19: h in registers (1-3, and
// 6 and 7 with plain loads; a warp or a block a row), a cluster a row with h
// in shared memory (4), one block a row with h staged in shared memory or x
// and r read twice (5), and rows of any alignment in registers (18, 19).
#pragma once

#include <cooperative_groups.h>

#include "rlg_common.cuh"

namespace {

// Block size bound of the register kernel: 32 floats of h a thread fit the
// 64 registers of a 1024-thread block; more need a 256-thread bound.
constexpr int regs_max_threads(int elems) { return elems <= 32 ? 1024 : 256; }
// Blocks an SM must hold at once: 16-byte rows of <= 8 elements a thread get
// two 1024-thread blocks (32 registers), so that one block's loads overlap the
// other's reductions; with one block an SM the SM idles through every barrier.
constexpr int regs_min_blocks(int vec, int packs) { return vec > 1 && vec * packs <= 8 ? 2 : 1; }

// w and b loaded before the reductions when their raw packs fit next to h
// (float32 packs; 16-bit rows of <= 16 elements a thread); else after, in
// the output loop (64-register bound: h alone takes 32 of them), where they
// hit L1 (the same columns for every row).
template <typename T, int VEC, int PACKS>
constexpr bool wb_early() {
  if (regs_min_blocks(VEC, PACKS) > 1) return false;  // 32 registers: no room
  return VEC * PACKS + 2 * PACKS * int(sizeof(ksuite::RawPack<T, VEC>)) / 4 <= 32;
}

// x and r: a predicated 16-byte load, by the read-only no-allocate path or,
// PLAIN, by a plain ld.global (one-element packs always take the former).
template <typename T, int VEC, bool PLAIN>
__device__ __forceinline__ ksuite::RawPack<T, VEC> ld_xr(const T* p, bool pred) {
  if constexpr (PLAIN && VEC > 1) {
    return ksuite::ld16_if<ksuite::kPlain>(p, pred);
  } else {
    return ksuite::ld_pack_if<T, VEC, true, false>(p, pred);
  }
}

// Thread t of a row owns packs c = (p * tpr + t) * VEC, p < PACKS.  Packs
// past the row's end (all packs of threads past the last row) load nothing
// (a false predicate), are left out of both sums and are not stored; those
// threads still take part in the reductions.
// lg_tpr: log2(tpr) when tpr <= 32, else 10 (one row a block);
// lg_rows: log2(rows a block) (0 when tpr > 32).
template <typename T, int VEC, int PACKS, bool PLAIN = false>
__global__ void __launch_bounds__(regs_max_threads(VEC * PACKS), regs_min_blocks(VEC, PACKS))
rlg_regs_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                const T* __restrict__ b, T* __restrict__ y, int64_t m, int n, float eps, float inv_n,
                int tpr, int lg_tpr, int lg_rows) {
  using Raw = ksuite::RawPack<T, VEC>;
  constexpr bool kEarly = wb_early<T, VEC, PACKS>();
  __shared__ float red[2][32];
  const int group = threadIdx.x >> lg_tpr;
  const int t = threadIdx.x - (group << lg_tpr);
  const int64_t row = (int64_t(blockIdx.x) << lg_rows) + group;
  const int cols = row < m ? n : 0;
  const int c0 = t * VEC, stride = tpr * VEC;
  const int64_t off = row * n + c0;
  bool ok[PACKS];
#pragma unroll
  for (int p = 0; p < PACKS; ++p) ok[p] = c0 + p * stride < cols;
  // Every load of x and r first, back to back (predicated, no branches).
  Raw rx[PACKS], rr[PACKS], rw[PACKS], rb[PACKS];
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    rx[p] = ld_xr<T, VEC, PLAIN>(x + off + p * stride, ok[p]);
    rr[p] = ld_xr<T, VEC, PLAIN>(r + off + p * stride, ok[p]);
  }
  if constexpr (kEarly) {
#pragma unroll
    for (int p = 0; p < PACKS; ++p) {
      // w and b: the same columns for every row, so cached loads (L1 hits).
      rw[p] = ksuite::ld_pack_if<T, VEC, false, false>(w + c0 + p * stride, ok[p]);
      rb[p] = ksuite::ld_pack_if<T, VEC, false, false>(b + c0 + p * stride, ok[p]);
    }
  }
  // h = x + r; the row sum in VEC independent chains (packs past the row's
  // end hold garbage and are left out by predicated adds).
  // (one chain when registers are tight: 32 a thread at two blocks an SM)
  constexpr int kChains = regs_min_blocks(VEC, PACKS) > 1 ? 1 : VEC;
  float h[PACKS][VEC], acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    float xv[VEC], rv[VEC];
    ksuite::raw_pack_to_floats<T, VEC>(rx[p], xv);
    ksuite::raw_pack_to_floats<T, VEC>(rr[p], rv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] = xv[k] + rv[k];
    if (ok[p]) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k % kChains] += h[p][k];
    }
  }
  pairwise_sum(acc);
  // Exact two-pass statistics: the mean, then squared deviations from it.
  const float mean = rlg_row_sum(acc[0], tpr, red[0]) * inv_n;
  center_and_square<kChains>(h, ok, mean, acc);
  const float rstd = rsqrtf(fmaf(rlg_row_sum(acc[0], tpr, red[1]), inv_n, eps));
  T* yr = y + off;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    // 16-byte packs: only those inside the row (a branch: a warp whose lanes all hold none,
    // where a row fills a fraction of its lanes' packs, skips the GELU's ~14 instructions an
    // element).  One-element packs keep every pack in one block: their GELUs are the only
    // independent work to interleave, and a branch a pack would leave each alone in its block.
    if constexpr (VEC > 1) {
      if (!ok[p]) continue;
    }
    if constexpr (!kEarly) {
      rw[p] = ksuite::ld_pack_if<T, VEC, false, false>(w + c0 + p * stride, ok[p]);
      rb[p] = ksuite::ld_pack_if<T, VEC, false, false>(b + c0 + p * stride, ok[p]);
    }
    float wv[VEC], bv[VEC];
    ksuite::raw_pack_to_floats<T, VEC>(rw[p], wv);
    ksuite::raw_pack_to_floats<T, VEC>(rb[p], bv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] = ksuite::gelu_out<T>(fmaf(h[p][k] * rstd, wv[k], bv[k]));
    if (ok[p]) ksuite::store_floats<T, VEC>(yr + p * stride, h[p]);
  }
}

// ------------------------------------------- plans 18, 19: any alignment
//
// A row whose width is not a multiple of the 16-byte pack starts at every
// misalignment in turn, and plans 1-17 then take it one element a load.
// Here each row is split at its 16-byte boundaries (ksuite::split_row): the
// body, whole 16-byte packs of x, r and y, is held as in rlg_regs_kernel
// (PACKS packs a thread, every load issued first, a lane group or the block a
// row, the same exact two-pass statistics); the head and tail, at most
// 2 (VEC - 1) elements, are one element each on the row's first threads
// (groups of >= 2 VEC lanes), loaded with the packs.  x, r and y must be
// equally misaligned (the launcher checks), so one split serves all three.
//
// w and b are indexed by column, and the body's columns start `head`
// elements into them: their packs lie off the 16-byte boundaries, by an
// amount that varies from row to row.  Each is read as 32-bit words (L1 hits:
// every row reads the same columns) and, for 16-bit types 2 bytes off a word,
// funnel-shifted (ksuite::ld16_words_if): 4 or 5 loads and registers a pack
// of each, where one load an element takes 8 of each for bf16, and the two
// aligned packs around it 8 registers (the 4-pack plans spill at 64).
//
// Block size bound: 4 packs a thread fit the 64 registers of 1024 threads
// (bf16 rows of up to 32768 columns in one block, float32 16384); 8 packs
// need 128 (float32's raw x and r alone are 64 registers), so 512 threads
// (bf16 32768 columns again, float32 16384).
constexpr int unaligned_max_threads(int packs) { return packs <= 4 ? 1024 : 512; }

template <typename T, int PACKS>
__global__ void __launch_bounds__(unaligned_max_threads(PACKS), 1)
rlg_unaligned_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                     const T* __restrict__ b, T* __restrict__ y, int64_t m, int n, float eps, float inv_n,
                     int tpr, int lg_tpr, int lg_rows) {
  constexpr int VEC = ksuite::vec16<T>();
  __shared__ float red[2][32];
  const int group = threadIdx.x >> lg_tpr;
  const int t = threadIdx.x - (group << lg_tpr);
  const int64_t row = (int64_t(blockIdx.x) << lg_rows) + group;
  const int64_t off = row * n;
  // Rows past the last one are empty (no loads, no stores); their threads
  // still take part in the reductions.
  const ksuite::RowSplit split = ksuite::split_row(x + off, row < m ? n : 0);
  // This thread's body packs: elements start + p * stride, p < PACKS
  // (16-byte aligned in x, r and y).
  const int c0 = split.head + t * VEC, stride = tpr * VEC;
  const int64_t start = off + c0;
  bool ok[PACKS];
#pragma unroll
  for (int p = 0; p < PACKS; ++p) ok[p] = p * tpr + t < split.body;
  uint4 rx[PACKS], rr[PACKS];
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    rx[p] = ksuite::ld_pack_if<T, VEC, true, false>(x + start + p * stride, ok[p]);
    rr[p] = ksuite::ld_pack_if<T, VEC, true, false>(r + start + p * stride, ok[p]);
  }
  // This thread's head or tail element, and its w and b.
  const bool edge = t < split.edges;
  const int ecol = split.edge_col(t);
  const EdgeElem e = load_edge<T>(x + off, r + off, w, b, ecol, edge);
  float he = e.h;
  const float we = e.w, be = e.b;
  // h = x + r; the row sum in VEC chains (packs past the body's end and a
  // missing edge element hold garbage and are left out by predicated adds).
  float h[PACKS][VEC], acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    float xv[VEC], rv[VEC];
    ksuite::raw_to_floats<T>(rx[p], xv);
    ksuite::raw_to_floats<T>(rr[p], rv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] = xv[k] + rv[k];
    if (ok[p]) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] += h[p][k];
    }
  }
  // Exact two-pass statistics: the mean, then squared deviations from it.
  const float rstd = split_row_rstd(h, ok, acc, he, edge, tpr, red, inv_n, eps);
  // The edge element first, so that its registers are free for the packs'.
  if (edge) y[off + ecol] = ksuite::from_float<T>(ksuite::gelu_out<T>(fmaf(he * rstd, we, be)));
  // w and b at the body's columns c0 + p * stride, off the boundaries.  Only packs
  // inside the body (a branch, as in rlg_regs_kernel).
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    if (!ok[p]) continue;
    const int c = c0 + p * stride;
    float wv[VEC], bv[VEC];
    ksuite::raw_to_floats<T>(ksuite::ld16_words_if(w + c, true), wv);
    ksuite::raw_to_floats<T>(ksuite::ld16_words_if(b + c, true), bv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] = ksuite::gelu_out<T>(fmaf(h[p][k] * rstd, wv[k], bv[k]));
    ksuite::st16_global(y + start + p * stride, ksuite::floats_to_raw<T>(h[p]));
  }
}

// One 1024-thread block a row, grid-stride over rows.  STAGE: h kept as float
// in dynamic shared memory (two-pass statistics from there); otherwise shifted
// sums in one pass over x and r, then a second, backwards pass.
template <typename T, int VEC, bool STAGE>
__global__ void __launch_bounds__(1024)
rlg_wide_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                const T* __restrict__ b, T* __restrict__ y, int64_t m, int64_t n, float eps) {
  // Element k of pack i sits at row_buf[k * packs + i]: consecutive threads
  // touch consecutive words, so no bank conflicts (i * VEC + k would be
  // VEC-way conflicted).
  extern __shared__ float row_buf[];
  __shared__ float smem[32];
  const int64_t packs = n / VEC;
  for (int64_t row = blockIdx.x; row < m; row += gridDim.x) {
    const int64_t off = row * n;
    // The shift: any value near the mean keeps sum((h-K)^2) free of cancellation.
    const float shift = STAGE ? 0.0f : to_float(x[off]) + to_float(r[off]);
    float s1 = 0.0f, s2 = 0.0f;
    // Unrolled so that several packs' loads are in flight per thread.
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      float h[VEC];
      load_h<T, VEC>(x + off + i * VEC, r + off + i * VEC, h);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        if constexpr (STAGE) row_buf[k * packs + i] = h[k];
        const float d = h[k] - shift;
        s1 += d;
        s2 += d * d;
      }
    }
    s1 = ksuite::block_sum(s1, smem) / float(n);
    float mean, var;
    if constexpr (STAGE) {
      mean = s1;
      float sq = 0.0f;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sq += (row_buf[i] - mean) * (row_buf[i] - mean);
      var = ksuite::block_sum(sq, smem) / float(n);
    } else {
      mean = shift + s1;
      var = fmaxf(ksuite::block_sum(s2, smem) / float(n) - s1 * s1, 0.0f);
    }
    const float rstd = rsqrtf(var + eps);
#pragma unroll 4
    for (int64_t i = packs - 1 - threadIdx.x; i >= 0; i -= blockDim.x) {
      float h[VEC];
      if constexpr (STAGE) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) h[k] = row_buf[k * packs + i];
      } else {
        load_h<T, VEC>(x + off + i * VEC, r + off + i * VEC, h);
      }
      finish_pack<T, VEC>(h, mean, rstd, w + i * VEC, b + i * VEC, y + off + i * VEC);
    }
    // row_buf and smem are rewritten by the next row.
    __syncthreads();
  }
}

constexpr int kClusterThreads = 512;

// CTA `rank` of the cluster owns packs [rank * chunk, (rank + 1) * chunk) of
// the row; element k of its pack i is slice[k * count + i] (conflict free).
// Each CTA's (count, mean, squared deviations from that mean) of its h goes
// to every CTA through distributed shared memory, merged there into the
// row's mean and variance.
//
// SPLIT (plan 20; VEC = 16 / sizeof(T)): rows whose width is not a multiple
// of VEC start at every misalignment in turn, which plan 4 takes at VEC = 1,
// one element a load.  Here each row is split at its 16-byte boundaries
// (ksuite::split_row): the body's whole packs are the packs the CTAs divide
// (16-byte loads of x and r, 16-byte stores of y), and the head and tail
// (< 2 VEC elements) are one element each on the first threads of rank 0,
// in its count, sum and squared deviations and written with its slice.  x, r
// and y must be equally misaligned (the launcher checks), so one split
// serves all three; w and b, indexed by column, lie `head` elements off the
// body's boundaries and are read as 32-bit words (finish_pack's WORDS, as
// plans 18 and 19 read them).  A row's body is at most n / VEC packs: the
// launcher sizes the slices for n / VEC.
//
// Three CTAs an SM (64 KB slices) take <= 40 registers a thread: plan 4 gets
// them unbidden, SPLIT (w and b as words, the edge element) asks for them
// (52 without the bound, no spills with it); a minimum of 0 blocks is no
// bound at all (no .minnctapersm), so plan 4's code is as before.
template <typename T, int VEC, bool SPLIT = false>
__global__ void __launch_bounds__(kClusterThreads, SPLIT ? 3 : 0)
rlg_cluster_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                   const T* __restrict__ b, T* __restrict__ y, int64_t n, int64_t chunk, float eps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  static_assert(!SPLIT || VEC * sizeof(T) == 16, "the split body is 16-byte packs");
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ float slice[];
  __shared__ float smem[32];
  __shared__ float3 partial;  // this CTA's (count, mean, M2), read by the whole cluster
  const unsigned ctas = cluster.num_blocks();
  const int64_t row = blockIdx.x / ctas;
  const int64_t p0 = int64_t(cluster.block_rank()) * chunk;
  int64_t head = 0, body = n / VEC;
  // SPLIT: this thread's head or tail element h = x + r (`edge`: it has one)
  // at column `ecol` of the row; `edges` of them in this CTA (rank 0 only).
  bool edge = false;
  int ecol = 0, edges = 0;
  float he = 0.0f;
  if constexpr (SPLIT) {
    const ksuite::RowSplit split = ksuite::split_row(x + row * n, static_cast<int>(n));
    head = split.head;
    body = split.body;
    edges = cluster.block_rank() == 0 ? split.edges : 0;
    edge = static_cast<int>(threadIdx.x) < edges;
    ecol = split.edge_col(static_cast<int>(threadIdx.x));
    float xe[1], re[1];
    ksuite::raw_pack_to_floats<T, 1>(ksuite::ld_pack_if<T, 1, true, false>(x + row * n + ecol, edge), xe);
    ksuite::raw_pack_to_floats<T, 1>(ksuite::ld_pack_if<T, 1, true, false>(r + row * n + ecol, edge), re);
    he = edge ? xe[0] + re[0] : 0.0f;
  }
  const int64_t count = std::max<int64_t>(0, std::min<int64_t>(body - p0, chunk));
  const int64_t off = row * n + head + p0 * VEC;

  float s = he;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    float h[VEC];
    load_h<T, VEC>(x + off + i * VEC, r + off + i * VEC, h);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      slice[k * count + i] = h[k];
      s += h[k];
    }
  }
  const float cnt = float(count * VEC + edges);
  const float total = ksuite::block_sum(s, smem);
  const float local_mean = cnt > 0.0f ? total / cnt : 0.0f;
  float m2 = edge ? (he - local_mean) * (he - local_mean) : 0.0f;
  for (int64_t j = threadIdx.x; j < count * VEC; j += blockDim.x)
    m2 += (slice[j] - local_mean) * (slice[j] - local_mean);
  m2 = ksuite::block_sum(m2, smem);
  if (threadIdx.x == 0) partial = make_float3(cnt, local_mean, m2);
  cluster.sync();  // every CTA's partial is written
  float mean = 0.0f;
  for (unsigned q = 0; q < ctas; ++q) {
    const float3 p = *cluster.map_shared_rank(&partial, q);
    mean += p.x * p.y;
  }
  mean /= float(n);
  float var = 0.0f;
  for (unsigned q = 0; q < ctas; ++q) {
    const float3 p = *cluster.map_shared_rank(&partial, q);
    var += p.z + p.x * (p.y - mean) * (p.y - mean);
  }
  cluster.sync();  // no CTA leaves while another may still read its `partial`
  const float rstd = rsqrtf(var / float(n) + eps);
  if constexpr (SPLIT) {
    float we[1], be[1];
    ksuite::raw_pack_to_floats<T, 1>(ksuite::ld_pack_if<T, 1, false, false>(w + ecol, edge), we);
    ksuite::raw_pack_to_floats<T, 1>(ksuite::ld_pack_if<T, 1, false, false>(b + ecol, edge), be);
    if (edge) y[row * n + ecol] = ksuite::from_float<T>(ksuite::gelu_out<T>((he - mean) * rstd * we[0] + be[0]));
  }
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    float h[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[k] = slice[k * count + i];
    const int64_t c = head + p0 * VEC + i * VEC;
    finish_pack<T, VEC, SPLIT>(h, mean, rstd, w + c, b + c, y + row * n + c);
  }
#endif
}

// Plan 4 (SPLIT false; VEC = 1 on rows that are not 16-byte multiples) and
// plan 20 (SPLIT, VEC = 16 / sizeof(T), rows at any alignment: x, r and y
// must be equally misaligned, their addresses 16-byte multiples apart, as
// torch allocates them; w and b anywhere).  The slices hold chunk packs as
// float, n / VEC packs over ctas CTAs (plan 20: the longest body).
template <typename T, int VEC, bool SPLIT = false>
bool launch_cluster(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n,
                    float eps, int smem_limit, cudaStream_t stream) {
  if constexpr (SPLIT) {
    const auto xa = reinterpret_cast<std::uintptr_t>(x);
    if (((xa - reinterpret_cast<std::uintptr_t>(r)) | (xa - reinterpret_cast<std::uintptr_t>(y))) & 15u) return false;
    if (n > 0x7fffffff) return false;
  }
  const int64_t packs = n / VEC;
  const int ctas = ksuite::cluster_ctas(packs, VEC * sizeof(float), smem_limit);
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff) || ksuite::compute_major() < 9) return false;
  const int64_t chunk = (packs + ctas - 1) / ctas;
  ksuite::launch_clustered(rlg_cluster_kernel<T, VEC, SPLIT>, static_cast<unsigned>(m * ctas), kClusterThreads,
                           static_cast<int>(chunk * VEC * sizeof(float)), ctas, stream, x, r, w, b, y, n,
                           chunk, eps);
  return true;
}

}  // namespace
