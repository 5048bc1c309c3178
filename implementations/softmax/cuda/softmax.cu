// softmax over the last dim of a contiguous M x N matrix, computed in float32.
//
// Napkin math: 2*M*N*sizeof(T) bytes compulsory, ~5 FLOPs an element: memory
// bound.  Three plans by row length (ksuite::plan_rows):
//  - registers: the whole row is loaded before any reduction (all its loads in
//    flight at once), max and sum by shuffles (+ shared memory across warps
//    when a block owns the row); one read, one write.
//  - cluster (sm_90+): longer rows are split over a thread-block cluster of
//    1..8 CTAs, each keeping its slice in shared memory in the input dtype
//    (<= 64 KB, so three CTAs share an SM and one's loads overlap another's
//    reductions); the CTAs swap (max, sum) through distributed shared
//    memory.  One read from HBM up to 8 x 64 KB a row (131072 fp32 columns).
//  - shared (before sm_90): rows up to ~56K columns staged as float in shared
//    memory, one read.
//  - streaming (online softmax): a running (max, sum) pass, then an output
//    pass that walks the row backwards so the most recently read part is the
//    first re-read and is still in L2.  Grid = one 1024-thread block per SM,
//    so ~132 rows are in flight and their re-reads mostly hit L2.
#include <ATen/Dispatch.h>
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

template <typename T, int VEC>
__device__ __forceinline__ void store_pack(T* p, const float (&in)[VEC]) {
  Pack<T, VEC> v;
#pragma unroll
  for (int k = 0; k < VEC; ++k) v.v[k] = ksuite::from_float<T>(in[k]);
  *reinterpret_cast<Pack<T, VEC>*>(p) = v;
}

// 32 elements a thread need more than the 64 registers a 1024-thread bound
// allows; ksuite::plan_rows uses them only for warp-per-row blocks of 128.
template <typename T, int VEC, int ELEMS>
__global__ void __launch_bounds__(ELEMS >= 32 ? 128 : 1024)
softmax_regs_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t m, int64_t n, int tpr) {
  constexpr int PACKS = ELEMS / VEC;
  __shared__ float smem[32];
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / tpr) + threadIdx.x / tpr;
  const int t = threadIdx.x % tpr;
  // Lanes past the last row keep going with an empty row: the shuffles need them.
  const int64_t cols = row < m ? n : 0;
  const T* xr = x + row * n;
  float v[PACKS][VEC];
  float mx = -INFINITY;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    const int64_t c = (int64_t(p) * tpr + t) * VEC;
    if (c < cols) {
      load_pack<T, VEC>(xr + c, v[p]);
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[p][k] = -INFINITY;
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, v[p][k]);
  }
  mx = ksuite::row_max(mx, tpr, smem);
  float sum = 0.0f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      v[p][k] = v[p][k] == -INFINITY ? 0.0f : expf(v[p][k] - mx);
      sum += v[p][k];
    }
  }
  const float inv = 1.0f / ksuite::row_sum(sum, tpr, smem);
  T* yr = y + row * n;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    const int64_t c = (int64_t(p) * tpr + t) * VEC;
    if (c < cols) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[p][k] *= inv;
      store_pack<T, VEC>(yr + c, v[p]);
    }
  }
}

// One block a row (grid-stride over rows), 1024 threads.  STAGE: the row is
// kept as float in dynamic shared memory; otherwise it is read twice.
template <typename T, int VEC, bool STAGE>
__global__ void __launch_bounds__(1024)
softmax_wide_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t m, int64_t n) {
  // Element k of pack i sits at row_buf[k * packs + i]: consecutive threads
  // touch consecutive words, so no bank conflicts (i * VEC + k would be
  // VEC-way conflicted).
  extern __shared__ float row_buf[];
  __shared__ float smem[32];
  const int64_t packs = n / VEC;
  for (int64_t row = blockIdx.x; row < m; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    // Per-thread running max and sum of exp(v - max), rescaled only when a
    // pack raises the max.
    float mx = -INFINITY, sum = 0.0f;
    // Unrolled so that several packs' loads are in flight per thread.
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      float v[VEC];
      load_pack<T, VEC>(xr + i * VEC, v);
      float pm = v[0];
#pragma unroll
      for (int k = 1; k < VEC; ++k) pm = fmaxf(pm, v[k]);
      if (pm > mx) {
        sum = mx == -INFINITY ? 0.0f : sum * expf(mx - pm);
        mx = pm;
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        if constexpr (STAGE) row_buf[k * packs + i] = v[k];
        sum += v[k] == -INFINITY ? 0.0f : expf(v[k] - mx);
      }
    }
    const float row_mx = ksuite::block_max(mx, smem);
    sum = mx == -INFINITY ? 0.0f : sum * expf(mx - row_mx);
    const float inv = 1.0f / ksuite::block_sum(sum, smem);
    // Backwards: the tail of the row was read last and is the likeliest L2 hit.
#pragma unroll 4
    for (int64_t i = packs - 1 - threadIdx.x; i >= 0; i -= blockDim.x) {
      float v[VEC];
      if constexpr (STAGE) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = row_buf[k * packs + i];
      } else {
        load_pack<T, VEC>(xr + i * VEC, v);
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = v[k] == -INFINITY ? 0.0f : expf(v[k] - row_mx) * inv;
      store_pack<T, VEC>(yr + i * VEC, v);
    }
    // row_buf and smem are rewritten by the next row.
    __syncthreads();
  }
}

// A row split over a cluster of cluster.num_blocks() CTAs; CTA `rank` owns
// packs [rank * chunk, (rank + 1) * chunk) and keeps them in shared memory.
constexpr int kClusterThreads = 512;

template <typename T, int VEC>
__global__ void __launch_bounds__(kClusterThreads)
softmax_cluster_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, int64_t chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // the launcher uses this kernel on sm_90+ only
#else
  namespace cg = cooperative_groups;
  using P = Pack<T, VEC>;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) unsigned char slice_raw[];
  P* slice = reinterpret_cast<P*>(slice_raw);  // consecutive threads, consecutive 16 B: no conflicts
  __shared__ float smem[32];
  __shared__ float2 partial;  // this CTA's (max, sum), read by the whole cluster
  const unsigned ctas = cluster.num_blocks();
  const int64_t row = blockIdx.x / ctas;
  const int64_t p0 = int64_t(cluster.block_rank()) * chunk;
  const int64_t count = std::max<int64_t>(0, std::min<int64_t>(n / VEC - p0, chunk));
  const P* xr = reinterpret_cast<const P*>(x + row * n) + p0;
  P* yr = reinterpret_cast<P*>(y + row * n) + p0;

  float mx = -INFINITY;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const P v = xr[i];
    slice[i] = v;
#pragma unroll
    for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, to_float(v.v[k]));
  }
  mx = ksuite::block_max(mx, smem);
  float sum = 0.0f;
  if (mx != -INFINITY) {
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) sum += expf(to_float(slice[i].v[k]) - mx);
    }
  }
  sum = ksuite::block_sum(sum, smem);
  if (threadIdx.x == 0) partial = make_float2(mx, sum);
  cluster.sync();  // every CTA's partial is written
  float row_mx = -INFINITY, row_sum = 0.0f;
  for (unsigned r = 0; r < ctas; ++r) row_mx = fmaxf(row_mx, cluster.map_shared_rank(&partial, r)->x);
  for (unsigned r = 0; r < ctas; ++r) {
    const float2 q = *cluster.map_shared_rank(&partial, r);
    if (q.y > 0.0f) row_sum += q.y * expf(q.x - row_mx);
  }
  cluster.sync();  // no CTA leaves while another may still read its `partial`
  const float inv = 1.0f / row_sum;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    float v[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float t = to_float(slice[i].v[k]);
      v[k] = t == -INFINITY ? 0.0f : expf(t - row_mx) * inv;
    }
    store_pack<T, VEC>(reinterpret_cast<T*>(yr + i), v);
  }
#endif
}

template <typename T, int VEC>
bool launch_cluster(const T* x, T* y, int64_t m, int64_t n, int smem_limit, cudaStream_t stream) {
  const int64_t packs = n / VEC;
  const int ctas = ksuite::cluster_ctas(packs, sizeof(Pack<T, VEC>), smem_limit);
  if (ctas == 0 || m * ctas > int64_t(0x7fffffff) || ksuite::compute_major() < 9) return false;
  const int64_t chunk = (packs + ctas - 1) / ctas;
  ksuite::launch_clustered(softmax_cluster_kernel<T, VEC>, static_cast<unsigned>(m * ctas), kClusterThreads,
                           static_cast<int>(chunk * sizeof(Pack<T, VEC>)), ctas, stream, x, y, n, chunk);
  return true;
}

template <typename T, int VEC>
void launch(const T* x, T* y, int64_t m, int64_t n, cudaStream_t stream) {
  const int smem_limit = ksuite::max_smem_optin();
  const ksuite::RowPlan plan = ksuite::plan_rows(n, VEC, sizeof(float), smem_limit);
  if (plan.mode == ksuite::RowMode::kRegisters) {
    const int64_t rows_per_block = plan.threads / plan.tpr;
    const auto grid = static_cast<unsigned>((m + rows_per_block - 1) / rows_per_block);
    switch (plan.elems) {
#define KSUITE_CASE(E)                                                                       \
  case E:                                                                                    \
    if constexpr (E % VEC == 0)                                                              \
      softmax_regs_kernel<T, VEC, E><<<grid, plan.threads, 0, stream>>>(x, y, m, n, plan.tpr); \
    break;
      KSUITE_CASE(4) KSUITE_CASE(8) KSUITE_CASE(16) KSUITE_CASE(32)
#undef KSUITE_CASE
      default: TORCH_CHECK(false, "kernel_suite::softmax: no kernel for ", plan.elems, " elements a thread");
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  if (launch_cluster<T, VEC>(x, y, m, n, smem_limit, stream)) return;
  const int64_t sms = ksuite::sm_count();
  const auto grid = static_cast<unsigned>(std::min<int64_t>(m, plan.mode == ksuite::RowMode::kShared ? m : sms));
  if (plan.mode == ksuite::RowMode::kShared) {
    const int bytes = static_cast<int>(n * sizeof(float));
    C10_CUDA_CHECK(cudaFuncSetAttribute(softmax_wide_kernel<T, VEC, true>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    softmax_wide_kernel<T, VEC, true><<<grid, plan.threads, bytes, stream>>>(x, y, m, n);
  } else {
    softmax_wide_kernel<T, VEC, false><<<grid, plan.threads, 0, stream>>>(x, y, m, n);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor softmax_cuda(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "kernel_suite::softmax: x must be a CUDA tensor, got one on ", x.device());
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf ||
                  x.scalar_type() == at::kBFloat16,
              "kernel_suite::softmax: x must be float32, float16 or bfloat16, got ", x.scalar_type());
  TORCH_CHECK(x.dim() >= 1, "kernel_suite::softmax: x must have at least one dimension");
  TORCH_CHECK(x.is_contiguous(), "kernel_suite::softmax: x must be contiguous (call .contiguous() first)");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  const int64_t n = x.size(-1);
  if (x.numel() == 0) return y;
  const int64_t m = x.numel() / n;
  TORCH_CHECK(m <= int64_t(0x7fffffff), "kernel_suite::softmax: too many rows (", m, ")");
  cudaStream_t stream = ksuite::current_stream();
  KSUITE_DISPATCH_FLOATS(x.scalar_type(), "ksuite_softmax", [&] {
    constexpr int VEC = ksuite::vec16<scalar_t>();
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    scalar_t* yp = y.mutable_data_ptr<scalar_t>();
    // Rows start on 16-byte boundaries only when n is a multiple of VEC.
    if (n % VEC == 0 && ksuite::aligned16(xp) && ksuite::aligned16(yp)) {
      launch<scalar_t, VEC>(xp, yp, m, n, stream);
    } else {
      launch<scalar_t, 1>(xp, yp, m, n, stream);
    }
  });
  return y;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("softmax(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("softmax", &softmax_cuda);
}
