// residual_layernorm_gelu: h = x + r; y = gelu(layernorm(h) * w + b) over the
// last dim of contiguous M x N inputs, in float32 with exact (erf-form) GELU.
//
// Napkin math: (3*M*N + 2*N) * sizeof(T) bytes compulsory (x and r read once,
// y written once, w and b once per SM from L2).  bf16 at 0.9 x 4.2 TB/s is
// ~0.63e12 elements/s, ~0.6 an element per scheduler-clock: a budget of ~50
// instructions an element.  The old kernel spent ~25 on erff alone plus
// 64-bit index math, block barriers and one-element conversions; now
// ksuite::gelu_fast (~16), packed bf16 conversions, 32-bit in-row indices.
//
// Plans (residual_layernorm_gelu_v's `variant`; 0 = auto):
//  1 registers, 4 packs a thread of x and of r (2 x 64 B in flight a thread)
//  2 registers, 2 packs a thread
//  3 registers, 1 pack a thread
//    h = x + r stays in registers (ksuite::plan_regs: lanes of a warp, several
//    rows a block, or a whole block a row).  Every x/r load of a thread is
//    issued first (predicated, no per-pack branch), then exact two-pass
//    statistics: the row sum, then the sum of squared deviations from the
//    row mean, one reduction (one barrier when a block holds the row) each.
//  4 cluster (sm_90): rows too long for registers split over 2..8 CTAs, each
//    holding its slice of h as float in shared memory; (count, mean, M2)
//    merged through distributed shared memory.
//  5 two reads: shifted sums, then a backwards output pass whose re-reads
//    mostly hit L2 (rows longer than the cluster holds).
//  6 plan 1 with x and r read by plain ld.global (L1-allocating, coherent)
//    instead of ld.global.nc.L1::no_allocate
//  7 plan 3 with plain loads, likewise.  (The Triton kernel's float32 rows
//    ran 3-8% faster on the H200 without a load cache hint.)
// Auto: 1 while the row fits 1024 threads, else 4, else 5.  A variant that
// cannot run a shape runs auto's plan.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cooperative_groups.h>

#include "ksuite/common.cuh"

namespace {

using ksuite::Pack;
using ksuite::to_float;

template <typename T, int VEC>
__device__ __forceinline__ void load_pack(const T* p, float (&out)[VEC]) {
  const Pack<T, VEC> v = *reinterpret_cast<const Pack<T, VEC>*>(p);
#pragma unroll
  for (int k = 0; k < VEC; ++k) out[k] = to_float(v.v[k]);
}

// y[c..c+VEC) = gelu(((h - mean) * rstd) * w + b)
template <typename T, int VEC>
__device__ __forceinline__ void finish_pack(const float (&h)[VEC], float mean, float rstd,
                                            const T* w, const T* b, T* y) {
  float wv[VEC], bv[VEC];
  load_pack<T, VEC>(w, wv);
  load_pack<T, VEC>(b, bv);
  Pack<T, VEC> out;
#pragma unroll
  for (int k = 0; k < VEC; ++k)
    out.v[k] = ksuite::from_float<T>(ksuite::gelu_fast((h[k] - mean) * rstd * wv[k] + bv[k]));
  *reinterpret_cast<Pack<T, VEC>*>(y) = out;
}

template <typename T, int VEC>
__device__ __forceinline__ void load_h(const T* x, const T* r, float (&h)[VEC]) {
  float rv[VEC];
  load_pack<T, VEC>(x, h);
  load_pack<T, VEC>(r, rv);
#pragma unroll
  for (int k = 0; k < VEC; ++k) h[k] += rv[k];
}

// Sum over the tpr threads of one row (ksuite::plan_regs): lanes of a warp
// (tpr <= 32, a power of two: xor offsets below tpr stay in the group) or the
// whole block (tpr = blockDim.x > 32).  Every thread of the block calls it.
// `red` (32 floats) is this call's own scratch: with one scratch array per
// call a row needs one barrier per reduction, no leading one.
__device__ __forceinline__ float rlg_row_sum(float v, int tpr, float* red) {
  if (tpr > 32) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = ksuite::warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    return ksuite::warp_sum(lane < int(blockDim.x >> 5) ? red[lane] : 0.0f);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    if (off < tpr) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

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
#pragma unroll
  for (int s = 1; s < VEC; s *= 2)
#pragma unroll
    for (int k = 0; k + s < VEC; k += 2 * s) acc[k] += acc[k + s];
  // Exact two-pass statistics: the mean, then squared deviations from it.
  const float mean = rlg_row_sum(acc[0], tpr, red[0]) * inv_n;
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] -= mean;
    if (ok[p]) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k % kChains] = fmaf(h[p][k], h[p][k], acc[k % kChains]);
    }
  }
#pragma unroll
  for (int s = 1; s < VEC; s *= 2)
#pragma unroll
    for (int k = 0; k + s < VEC; k += 2 * s) acc[k] += acc[k + s];
  const float rstd = rsqrtf(fmaf(rlg_row_sum(acc[0], tpr, red[1]), inv_n, eps));
  T* yr = y + off;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    if constexpr (!kEarly) {
      rw[p] = ksuite::ld_pack_if<T, VEC, false, false>(w + c0 + p * stride, ok[p]);
      rb[p] = ksuite::ld_pack_if<T, VEC, false, false>(b + c0 + p * stride, ok[p]);
    }
    float wv[VEC], bv[VEC];
    ksuite::raw_pack_to_floats<T, VEC>(rw[p], wv);
    ksuite::raw_pack_to_floats<T, VEC>(rb[p], bv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[p][k] = ksuite::gelu_fast(fmaf(h[p][k] * rstd, wv[k], bv[k]));
    if (ok[p]) ksuite::store_floats<T, VEC>(yr + p * stride, h[p]);
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
template <typename T, int VEC>
__global__ void __launch_bounds__(kClusterThreads)
rlg_cluster_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                   const T* __restrict__ b, T* __restrict__ y, int64_t n, int64_t chunk, float eps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ float slice[];
  __shared__ float smem[32];
  __shared__ float3 partial;  // this CTA's (count, mean, M2), read by the whole cluster
  const unsigned ctas = cluster.num_blocks();
  const int64_t row = blockIdx.x / ctas;
  const int64_t p0 = int64_t(cluster.block_rank()) * chunk;
  const int64_t count = std::max<int64_t>(0, std::min<int64_t>(n / VEC - p0, chunk));
  const int64_t off = row * n + p0 * VEC;

  float s = 0.0f;
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
  const float cnt = float(count * VEC);
  const float total = ksuite::block_sum(s, smem);
  const float local_mean = count ? total / cnt : 0.0f;
  float m2 = 0.0f;
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
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    float h[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) h[k] = slice[k * count + i];
    const int64_t c = p0 * VEC + i * VEC;
    finish_pack<T, VEC>(h, mean, rstd, w + c, b + c, y + row * n + c);
  }
#endif
}

template <typename T, int VEC>
bool launch_cluster(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n,
                    float eps, int smem_limit, cudaStream_t stream) {
  const int64_t packs = n / VEC;
  const int ctas = ksuite::cluster_ctas(packs, VEC * sizeof(float), smem_limit);
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff) || ksuite::compute_major() < 9) return false;
  const int64_t chunk = (packs + ctas - 1) / ctas;
  ksuite::launch_clustered(rlg_cluster_kernel<T, VEC>, static_cast<unsigned>(m * ctas), kClusterThreads,
                           static_cast<int>(chunk * VEC * sizeof(float)), ctas, stream, x, r, w, b, y, n,
                           chunk, eps);
  return true;
}

constexpr int kVariants = 7;

template <typename T, int VEC, int PACKS, bool PLAIN = false>
bool launch_regs(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n, float eps,
                 cudaStream_t stream) {
  const ksuite::RegPlan plan = ksuite::plan_regs(n, VEC, PACKS, regs_max_threads(VEC * PACKS));
  if (plan.tpr == 0 || n > 0x7fffffff) return false;
  // Shifts, not divides, in the kernel: tpr <= 32 is a power of two and the
  // block holds threads / tpr (a power of two) rows; tpr > 32 is the block.
  int lg_tpr = 10, lg_rows = 0;
  if (plan.tpr <= 32) {
    lg_tpr = 0;
    while ((1 << lg_tpr) < plan.tpr) ++lg_tpr;
    while ((plan.tpr << lg_rows) < plan.threads) ++lg_rows;
  }
  const int64_t rows_per_block = int64_t(1) << lg_rows;
  const int64_t grid = (m + rows_per_block - 1) / rows_per_block;
  if (grid > 0x7fffffff) return false;
  rlg_regs_kernel<T, VEC, PACKS, PLAIN><<<static_cast<unsigned>(grid), plan.threads, 0, stream>>>(
      x, r, w, b, y, m, static_cast<int>(n), eps, static_cast<float>(1.0 / double(n)), plan.tpr, lg_tpr, lg_rows);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

template <typename T, int VEC>
void launch_wide(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n, float eps,
                 cudaStream_t stream) {
  // Before sm_90 (no clusters), a row that fits one CTA's shared memory as float.
  const int bytes_needed = static_cast<int>(std::min<int64_t>(n * int64_t(sizeof(float)), 0x7fffffff));
  if (n * int64_t(sizeof(float)) + 1024 <= ksuite::max_smem_optin()) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(rlg_wide_kernel<T, VEC, true>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, bytes_needed));
    const auto grid = static_cast<unsigned>(std::min<int64_t>(m, 0x7fffffff));
    rlg_wide_kernel<T, VEC, true><<<grid, 1024, bytes_needed, stream>>>(x, r, w, b, y, m, n, eps);
  } else {
    const auto grid = static_cast<unsigned>(std::min<int64_t>(m, ksuite::sm_count()));
    rlg_wide_kernel<T, VEC, false><<<grid, 1024, 0, stream>>>(x, r, w, b, y, m, n, eps);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int VEC>
void launch(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n, float eps, int variant,
            cudaStream_t stream) {
  constexpr int P1 = VEC == 1 ? 8 : 4;
  switch (variant) {
    case 1: if (launch_regs<T, VEC, P1>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 2: if (launch_regs<T, VEC, VEC == 1 ? 4 : 2>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 3: if (launch_regs<T, VEC, VEC == 1 ? 2 : 1>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 4: if (launch_cluster<T, VEC>(x, r, w, b, y, m, n, eps, ksuite::max_smem_optin(), stream)) return; break;
    case 6: if (launch_regs<T, VEC, P1, true>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 7: if (launch_regs<T, VEC, VEC == 1 ? 2 : 1, true>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 5: {
      const auto grid = static_cast<unsigned>(std::min<int64_t>(m, ksuite::sm_count()));
      rlg_wide_kernel<T, VEC, false><<<grid, 1024, 0, stream>>>(x, r, w, b, y, m, n, eps);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    default: break;
  }
  // float32 rows first try 2 packs a thread (more threads a row), the faster
  // plan for float32 in a variant sweep on the H200 (see residual_layernorm_gelu_v).
  if constexpr (VEC == 4) {
    if (launch_regs<T, VEC, 2>(x, r, w, b, y, m, n, eps, stream)) return;
  }
  if (launch_regs<T, VEC, P1>(x, r, w, b, y, m, n, eps, stream)) return;
  if (launch_cluster<T, VEC>(x, r, w, b, y, m, n, eps, ksuite::max_smem_optin(), stream)) return;
  launch_wide<T, VEC>(x, r, w, b, y, m, n, eps, stream);
}

at::Tensor rlg_run(const at::Tensor& x, const at::Tensor& r, const at::Tensor& weight, const at::Tensor& bias,
                   double eps, int64_t variant, const char* op) {
  KSUITE_CHECK(x.is_cuda(), op, ": x must be a CUDA tensor, got one on ", x.device());
  KSUITE_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf ||
                   x.scalar_type() == at::kBFloat16,
               op, ": x must be float32, float16 or bfloat16, got ", x.scalar_type());
  KSUITE_CHECK(x.dim() >= 1, op, ": x must have at least one dimension, got a 0-dim tensor");
  const int64_t n = x.size(-1);
  const std::pair<const char*, const at::Tensor*> args[] = {{"r", &r}, {"weight", &weight}, {"bias", &bias}};
  for (const auto& arg : args) {
    const char* name = arg.first;
    const at::Tensor& t = *arg.second;
    KSUITE_CHECK(t.device() == x.device(), op, ": ", name, " is on ", t.device(), " but x is on ", x.device());
    KSUITE_CHECK(t.scalar_type() == x.scalar_type(), op, ": ", name, " is ", t.scalar_type(), " but x is ",
                 x.scalar_type(), "; pass all inputs in one dtype");
  }
  KSUITE_CHECK(r.sizes() == x.sizes(), op, ": r has shape ", ksuite::shape_str(r), " but x has ",
               ksuite::shape_str(x));
  KSUITE_CHECK(weight.dim() == 1 && weight.size(0) == n, op, ": weight must have shape [", n,
               "] (the last dim of x), got ", ksuite::shape_str(weight));
  KSUITE_CHECK(bias.dim() == 1 && bias.size(0) == n, op, ": bias must have shape [", n,
               "] (the last dim of x), got ", ksuite::shape_str(bias));
  KSUITE_CHECK(x.is_contiguous() && r.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), op,
               ": x, r, weight and bias must be contiguous (call .contiguous() first)");
  KSUITE_CHECK(eps > 0.0, op, ": eps must be positive, got ", eps);
  KSUITE_CHECK(variant >= 0 && variant <= kVariants, op, ": variant must be 0 (auto) .. ", kVariants,
               ", got ", variant);
  const int64_t m = n == 0 ? 0 : x.numel() / n;
  KSUITE_CHECK(m <= int64_t(0x7fffffff), op, ": too many rows (", m, ")");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  cudaStream_t stream = ksuite::current_stream();
  KSUITE_DISPATCH_FLOATS(x.scalar_type(), "ksuite_residual_layernorm_gelu", [&] {
    constexpr int VEC = ksuite::vec16<scalar_t>();
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    const scalar_t* rp = r.const_data_ptr<scalar_t>();
    const scalar_t* wp = weight.const_data_ptr<scalar_t>();
    const scalar_t* bp = bias.const_data_ptr<scalar_t>();
    scalar_t* yp = y.mutable_data_ptr<scalar_t>();
    const bool vec_ok = n % VEC == 0 && ksuite::aligned16(xp) && ksuite::aligned16(rp) &&
                        ksuite::aligned16(wp) && ksuite::aligned16(bp) && ksuite::aligned16(yp);
    const int v = static_cast<int>(variant);
    if (vec_ok) {
      launch<scalar_t, VEC>(xp, rp, wp, bp, yp, m, n, static_cast<float>(eps), v, stream);
    } else {
      launch<scalar_t, 1>(xp, rp, wp, bp, yp, m, n, static_cast<float>(eps), v, stream);
    }
  });
  return y;
}

at::Tensor rlg_cuda(const at::Tensor& x, const at::Tensor& r, const at::Tensor& weight, const at::Tensor& bias,
                    double eps) {
  return rlg_run(x, r, weight, bias, eps, 0, "kernel_suite::residual_layernorm_gelu");
}

at::Tensor rlg_v_cuda(const at::Tensor& x, const at::Tensor& r, const at::Tensor& weight, const at::Tensor& bias,
                      double eps, int64_t variant) {
  return rlg_run(x, r, weight, bias, eps, variant, "kernel_suite::residual_layernorm_gelu_v");
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("residual_layernorm_gelu(Tensor x, Tensor r, Tensor weight, Tensor bias, float eps) -> Tensor");
  m.def("residual_layernorm_gelu_v(Tensor x, Tensor r, Tensor weight, Tensor bias, float eps, int variant) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("residual_layernorm_gelu", &rlg_cuda);
  m.impl("residual_layernorm_gelu_v", &rlg_v_cuda);
}
