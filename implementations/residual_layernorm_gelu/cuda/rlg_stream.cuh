// residual_layernorm_gelu.cu's plan 21: rows of any alignment streamed
// through one persistent CTA an SM, the next row's raw x and r bulk-copied
// into shared memory while this one is reduced and written.
#pragma once

#include "rlg_common.cuh"

namespace {

// ------------------------------------------- plan 21: streamed rows
//
// One persistent CTA an SM, grid-stride over rows.  A row's 16-byte body of
// x and of r (ksuite::split_row: any alignment, x, r and y equally
// misaligned) is bulk-copied into one of two shared buffers, each counted by
// its own mbarrier.  Once a row's copy has landed, thread 0 issues the next
// row's into the other buffer, and the
// block moves this row into registers as h = x + r (PACKS packs a thread,
// blockDim.x = the body's packs / PACKS rounded up to a warp, so that no
// thread converts empty packs): the next row is in flight through this one's
// statistics, GELU and stores, which plans 18 and 19 leave the SM's loads
// idle through, or share with another block's.  A block barrier after the
// registers are filled keeps a buffer from being refilled (a row later)
// before every thread has read it.  Exact two-pass statistics from
// registers; the head and tail elements are loaded from global memory by the
// first threads before the wait; w and b by 32-bit words (L1 hits) as in
// plans 18 and 19.
template <typename T, int PACKS>
__global__ void __launch_bounds__(1024, 1)
rlg_stream_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                  const T* __restrict__ b, T* __restrict__ y, uint32_t m, int n, int slot, float eps, float inv_n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  constexpr int VEC = ksuite::vec16<T>();
  // buffer k (0, 1): slot packs of x at xr + 2 k slot, then slot packs of r
  extern __shared__ __align__(128) uint4 xr[];
  __shared__ __align__(8) uint64_t bar[2];
  __shared__ float red[2][32];
  const int threads = static_cast<int>(blockDim.x);
  const auto stage = [&](uint32_t row, uint32_t k) {  // thread 0: the row's body into buffer k
    const int64_t off = int64_t(row) * n;
    const ksuite::RowSplit split = ksuite::split_row(x + off, n);
    const uint32_t bytes = static_cast<uint32_t>(split.body) * 16u, bk = smem_addr(bar + k);
    mbar_expect(bk, 2u * bytes);
    bulk_copy(smem_addr(xr + 2 * k * slot), reinterpret_cast<const char*>(x + off + split.head), bytes, bk);
    bulk_copy(smem_addr(xr + (2 * k + 1) * slot), reinterpret_cast<const char*>(r + off + split.head), bytes, bk);
  };
  if (threadIdx.x == 0) {
    mbar_init(smem_addr(bar));
    mbar_init(smem_addr(bar + 1));
    mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0 && blockIdx.x < m) stage(blockIdx.x, 0u);
  uint32_t it = 0;
#pragma unroll 1
  for (uint32_t row = blockIdx.x; row < m; row += gridDim.x, ++it) {
    const int t = static_cast<int>(threadIdx.x);
    const uint32_t k = it & 1u;
    const int64_t off = int64_t(row) * n;
    const ksuite::RowSplit split = ksuite::split_row(x + off, n);
    // This thread's head or tail element, and its w and b (loads in flight through the wait).
    const bool edge = t < split.edges;
    const int ecol = split.edge_col(t);
    const EdgeElem e = load_edge<T, true>(x + off, r + off, w, b, ecol, edge);
    float he = e.h;
    const float we = e.w, be = e.b;
    mbar_wait(smem_addr(bar + k), (it >> 1) & 1u);
    if (t == 0 && row + gridDim.x < m) stage(row + gridDim.x, k ^ 1u);
    const uint4* xs = xr + 2 * k * slot;
    bool ok[PACKS];
    float h[PACKS][VEC];
#pragma unroll
    for (int p = 0; p < PACKS; ++p) {
      const int i = t + p * threads;
      ok[p] = i < split.body;
      float rv[VEC];
      ksuite::raw_to_floats<T>(ok[p] ? xs[i] : make_uint4(0u, 0u, 0u, 0u), h[p]);
      ksuite::raw_to_floats<T>(ok[p] ? xs[slot + i] : make_uint4(0u, 0u, 0u, 0u), rv);
#pragma unroll
      for (int q = 0; q < VEC; ++q) h[p][q] += rv[q];
    }
    __syncthreads();  // every thread has read buffer k: row + 2 grid may be copied into it
    // Exact two-pass statistics (empty packs are zeros: no effect on the sum).
    float acc[VEC];
#pragma unroll
    for (int q = 0; q < VEC; ++q) acc[q] = 0.0f;
#pragma unroll
    for (int p = 0; p < PACKS; ++p)
#pragma unroll
      for (int q = 0; q < VEC; ++q) acc[q] += h[p][q];
    const float rstd = split_row_rstd(h, ok, acc, he, edge, threads, red, inv_n, eps);
    if (edge) y[off + ecol] = ksuite::from_float<T>(ksuite::gelu_out<T>(fmaf(he * rstd, we, be)));
    const int64_t start = off + split.head;
#pragma unroll
    for (int p = 0; p < PACKS; ++p) {
      // Empty packs read the first body pack's w and b (the launcher keeps rows of >= 2 packs, so
      // the body holds one) rather than predicated loads, whose old values would stay live.
      const int c = split.head + (ok[p] ? (t + p * threads) * VEC : 0);
      float wv[VEC], bv[VEC];
      ksuite::raw_to_floats<T>(ksuite::ld16_words_if(w + c, true), wv);
      ksuite::raw_to_floats<T>(ksuite::ld16_words_if(b + c, true), bv);
#pragma unroll
      for (int q = 0; q < VEC; ++q) h[p][q] = ksuite::gelu_out<T>(fmaf(h[p][q] * rstd, wv[q], bv[q]));
      if (ok[p]) ksuite::st16_global(y + start + int64_t(t + p * threads) * VEC, ksuite::floats_to_raw<T>(h[p]));
    }
  }
#endif
}

// The fewest packs a thread (1..4: h in <= 32 floats, the 64 registers of
// 1024 threads) that hold a row of `packs` in <= 1024 threads; 0: none.
inline int stream_packs(int64_t packs) {
  for (int p = 1; p <= 4; ++p)
    if (packs <= 1024 * int64_t(p)) return p;
  return 0;
}

template <typename T, int PACKS>
void launch_stream_packs(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int n, int slot,
                         float eps, cudaStream_t stream) {
  auto kernel = rlg_stream_kernel<T, PACKS>;
  // a warp multiple of threads, at least two warps (the block-wide reductions)
  const int threads = std::max(64, (slot + PACKS - 1) / PACKS + 31) / 32 * 32;
  const int smem = 4 * slot * 16;
  // the blocks the device holds at once (cached per configuration), as plans 8 and 13-15 size theirs
  const int resident = max_active_clusters(kernel, threads, smem, 1);
  const int64_t grid = std::min<int64_t>(m, std::max(resident, 1));
  ksuite::launch_clustered(kernel, static_cast<unsigned>(grid), threads, smem, 1, stream, x, r, w, b, y,
                           static_cast<uint32_t>(m), n, slot, eps, static_cast<float>(1.0 / double(n)));
}

// Plan 21: rows of any width and alignment of <= 4096 16-byte packs whose two
// buffers fit shared memory, x, r and y equally misaligned; sm_90+.
template <typename T>
bool launch_stream(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n, float eps,
                   cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  if (ksuite::compute_major() < 9 || n > 0x7fffffff || m > 0x7fffffff) return false;
  const auto xa = reinterpret_cast<std::uintptr_t>(x);
  if (((xa - reinterpret_cast<std::uintptr_t>(r)) | (xa - reinterpret_cast<std::uintptr_t>(y))) & 15u) return false;
  const int64_t slot = n / VEC;  // the body's packs, whatever the row's misalignment
  const int packs = stream_packs(slot);
  if (slot < 2 || packs == 0 || 4 * slot * 16 + 1024 > ksuite::max_smem_optin()) return false;
  const int ni = static_cast<int>(n), si = static_cast<int>(slot);
  switch (packs) {
    case 1: launch_stream_packs<T, 1>(x, r, w, b, y, m, ni, si, eps, stream); break;
    case 2: launch_stream_packs<T, 2>(x, r, w, b, y, m, ni, si, eps, stream); break;
    case 3: launch_stream_packs<T, 3>(x, r, w, b, y, m, ni, si, eps, stream); break;
    default: launch_stream_packs<T, 4>(x, r, w, b, y, m, ni, si, eps, stream); break;
  }
  return true;
}

}  // namespace
