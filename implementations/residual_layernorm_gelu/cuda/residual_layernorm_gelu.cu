// residual_layernorm_gelu: h = x + r; y = gelu(layernorm(h) * w + b) over the
// last dim of contiguous M x N inputs, in float32 with exact (erf) GELU.
//
// Napkin math: (3*M*N + 2*N) * sizeof(T) bytes compulsory (x and r read once,
// y written once, w and b once per SM from L2), ~20 FLOPs an element: memory
// bound.  Plans as in softmax (ksuite::plan_rows): h in registers (the row's
// loads all in flight before the first reduction, mean then variance from
// registers); longer rows on sm_90 split over a thread-block cluster, each CTA
// holding its slice of h as float in shared memory and the CTAs merging
// (count, mean, M2) through distributed shared memory (Chan et al.'s
// pairwise formula); before sm_90 h as float in one CTA's shared memory; and
// for rows longer than that a shifted-sums statistics pass followed by a
// backwards output pass whose re-reads mostly hit L2.
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
    out.v[k] = ksuite::from_float<T>(ksuite::gelu_erf((h[k] - mean) * rstd * wv[k] + bv[k]));
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

// 32 elements a thread need more than the 64 registers a 1024-thread bound
// allows; ksuite::plan_rows uses them only for warp-per-row blocks of 128.
template <typename T, int VEC, int ELEMS>
__global__ void __launch_bounds__(ELEMS >= 32 ? 128 : 1024)
rlg_regs_kernel(const T* __restrict__ x, const T* __restrict__ r, const T* __restrict__ w,
                const T* __restrict__ b, T* __restrict__ y, int64_t m, int64_t n, float eps, int tpr) {
  constexpr int PACKS = ELEMS / VEC;
  __shared__ float smem[32];
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / tpr) + threadIdx.x / tpr;
  const int t = threadIdx.x % tpr;
  // Lanes past the last row keep going with an empty row: the shuffles need them.
  const int64_t cols = row < m ? n : 0;
  const int64_t off = row * n;
  float h[PACKS][VEC];
  float sum = 0.0f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    const int64_t c = (int64_t(p) * tpr + t) * VEC;
    if (c < cols) {
      load_h<T, VEC>(x + off + c, r + off + c, h[p]);
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) h[p][k] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum += h[p][k];
  }
  const float mean = ksuite::row_sum(sum, tpr, smem) / float(n);
  float sq = 0.0f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    const int64_t c = (int64_t(p) * tpr + t) * VEC;
    if (c < cols) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) sq += (h[p][k] - mean) * (h[p][k] - mean);
    }
  }
  const float rstd = rsqrtf(ksuite::row_sum(sq, tpr, smem) / float(n) + eps);
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    const int64_t c = (int64_t(p) * tpr + t) * VEC;
    if (c < cols) finish_pack<T, VEC>(h[p], mean, rstd, w + c, b + c, y + off + c);
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

template <typename T, int VEC>
void launch(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n, float eps,
            cudaStream_t stream) {
  const int smem_limit = ksuite::max_smem_optin();
  const ksuite::RowPlan plan = ksuite::plan_rows(n, VEC, sizeof(float), smem_limit);
  if (plan.mode == ksuite::RowMode::kRegisters) {
    const int64_t rows_per_block = plan.threads / plan.tpr;
    const auto grid = static_cast<unsigned>((m + rows_per_block - 1) / rows_per_block);
    switch (plan.elems) {
#define KSUITE_CASE(E)                                                                   \
  case E:                                                                                \
    if constexpr (E % VEC == 0)                                                          \
      rlg_regs_kernel<T, VEC, E><<<grid, plan.threads, 0, stream>>>(x, r, w, b, y, m, n, eps, plan.tpr); \
    break;
      KSUITE_CASE(4) KSUITE_CASE(8) KSUITE_CASE(16) KSUITE_CASE(32)
#undef KSUITE_CASE
      default:
        TORCH_CHECK(false, "kernel_suite::residual_layernorm_gelu: no kernel for ", plan.elems,
                    " elements a thread");
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  if (launch_cluster<T, VEC>(x, r, w, b, y, m, n, eps, smem_limit, stream)) return;
  if (plan.mode == ksuite::RowMode::kShared) {
    const int bytes = static_cast<int>(n * sizeof(float));
    C10_CUDA_CHECK(cudaFuncSetAttribute(rlg_wide_kernel<T, VEC, true>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    rlg_wide_kernel<T, VEC, true><<<static_cast<unsigned>(m), plan.threads, bytes, stream>>>(
        x, r, w, b, y, m, n, eps);
  } else {
    const auto grid = static_cast<unsigned>(std::min<int64_t>(m, ksuite::sm_count()));
    rlg_wide_kernel<T, VEC, false><<<grid, plan.threads, 0, stream>>>(x, r, w, b, y, m, n, eps);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor rlg_cuda(const at::Tensor& x, const at::Tensor& r, const at::Tensor& weight,
                    const at::Tensor& bias, double eps) {
  constexpr const char* op = "kernel_suite::residual_layernorm_gelu";
  TORCH_CHECK(x.is_cuda(), op, ": x must be a CUDA tensor, got one on ", x.device());
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf ||
                  x.scalar_type() == at::kBFloat16,
              op, ": x must be float32, float16 or bfloat16, got ", x.scalar_type());
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension");
  const int64_t n = x.size(-1);
  const std::pair<const char*, const at::Tensor*> args[] = {{"r", &r}, {"weight", &weight}, {"bias", &bias}};
  for (const auto& [name, t] : args) {
    TORCH_CHECK(t->device() == x.device(), op, ": ", name, " is on ", t->device(), " but x is on ", x.device());
    TORCH_CHECK(t->scalar_type() == x.scalar_type(), op, ": ", name, " is ", t->scalar_type(),
                " but x is ", x.scalar_type(), "; pass all inputs in one dtype");
  }
  TORCH_CHECK(r.sizes() == x.sizes(), op, ": r has shape ", ksuite::shape_str(r), " but x has ",
              ksuite::shape_str(x));
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == n, op, ": weight must have shape [", n,
              "] (the last dim of x), got ", ksuite::shape_str(weight));
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == n, op, ": bias must have shape [", n,
              "] (the last dim of x), got ", ksuite::shape_str(bias));
  TORCH_CHECK(x.is_contiguous() && r.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
              op, ": x, r, weight and bias must be contiguous (call .contiguous() first)");
  TORCH_CHECK(eps > 0.0, op, ": eps must be positive, got ", eps);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) return y;
  const int64_t m = x.numel() / n;
  TORCH_CHECK(m <= int64_t(0x7fffffff), op, ": too many rows (", m, ")");
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
    if (vec_ok) {
      launch<scalar_t, VEC>(xp, rp, wp, bp, yp, m, n, static_cast<float>(eps), stream);
    } else {
      launch<scalar_t, 1>(xp, rp, wp, bp, yp, m, n, static_cast<float>(eps), stream);
    }
  });
  return y;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("residual_layernorm_gelu(Tensor x, Tensor r, Tensor weight, Tensor bias, float eps) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("residual_layernorm_gelu", &rlg_cuda);
}
