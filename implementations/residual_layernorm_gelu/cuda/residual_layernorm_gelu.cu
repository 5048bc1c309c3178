// residual_layernorm_gelu: h = x + r; y = gelu(layernorm(h) * w + b) over the
// last dim of contiguous M x N inputs, in float32 with exact (erf-form) GELU.
//
// Napkin math: (3*M*N + 2*N) * sizeof(T) bytes compulsory (x and r read once,
// y written once, w and b once per SM from L2).  bf16 at 0.9 x 4.2 TB/s is
// ~0.63e12 elements/s, ~0.6 an element per scheduler-clock: a budget of ~50
// instructions an element.  erff alone would take ~25, so the GELU is
// ksuite::gelu_fast (~16; gelu_as, ~13, for 16-bit outputs), with packed bf16
// conversions and 32-bit in-row indices.  Statistics are exact: two passes
// over h held on chip (row sum, then squared deviations from the mean), or
// one reduction of each thread's own two-pass pair merged by Chan's formula.
//
// Plans (residual_layernorm_gelu_v's `variant`; 0 = auto), all candidates of
// the registered op's tuner (cuda/__init__.py names each one):
//  1-3    row in registers, 4 / 2 / 1 packs of x and of r a thread, all loads
//         issued first; a warp or a block a row (ksuite::plan_regs)
//  4      cluster of 2..8 CTAs a row, h as float in shared memory (sm_90)
//  5      two reads: shifted sums, then a backwards output pass (L2 re-reads)
//  6, 7   plans 1 and 3 with plain ld.global loads
//  8      persistent 1024-thread CTA an SM, a row's raw x and r (<= 128 KB) in
//         shared memory by TMA, the next row's copy in flight during this one's math
//  9-11   plan 8 over a cluster of 2-8 CTAs a row, of 1024, 512 or 256 threads
//  12     plan 10 as one CTA an SM, the next two rows in flight, w and b in shared memory
//  13     plan 8 at 512 threads x 8 packs;  14-17: plans 13, 8, 12 and 10 with
//         one-round statistics (16, 17: one cluster exchange a row, not two)
//  18, 19 rows of any width and alignment: a scalar head and tail around a
//         16-byte body of x, r and y, 4 / 8 packs a thread (<= 1024 / 512
//         threads a row) as plans 1-3; w and b read as 32-bit words; x, r and y
//         equally misaligned (else auto runs)
//  20     plan 4 at any alignment: a scalar head and tail on the first CTA, the
//         16-byte body's packs over the cluster; w and b as in 18 and 19
//  21     one persistent CTA an SM at any alignment, the next row's raw x and
//         r bulk-copied into shared memory while this one is reduced and
//         written from registers, 1-4 packs a thread (sm_90)
// Plans 8-17 take 16-byte packs only; on other rows plans 1-7 take one
// element a load.  At bf16 4096 x 32768 on the H200 plan 16 takes 206-208
// us, 8, 12 and 15 223-226: plan 12's second exchange is the cost.
// Auto: registers (float32 at 2 packs first) while the row fits 1024 threads,
// else the cluster (rows off 16-byte boundaries: plan 20 where x, r and y are
// equally misaligned, plan 4 one element a load where not), else one block a
// row.  A plan that cannot run a shape runs auto's.
// Kernels: rlg_rows.cuh (plans 1-7, 18-20), rlg_tma.cuh (8-17), rlg_stream.cuh
// (21), over rlg_common.cuh.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "rlg_common.cuh"
#include "rlg_rows.cuh"
#include "rlg_stream.cuh"
#include "rlg_tma.cuh"

namespace {

constexpr int kRlgVariants = 21;

// The register kernels' rows a block (shifts, not divides, in the kernel):
// tpr <= 32 is a power of two and the block holds threads / tpr (a power of
// two) rows; tpr > 32 is the block.  grid 0: too many blocks.
struct RowGroups {
  int lg_tpr, lg_rows;
  unsigned grid;
};

RowGroups row_groups(const ksuite::RegPlan& plan, int64_t m) {
  int lg_tpr = 10, lg_rows = 0;
  if (plan.tpr <= 32) {
    lg_tpr = 0;
    while ((1 << lg_tpr) < plan.tpr) ++lg_tpr;
    while ((plan.tpr << lg_rows) < plan.threads) ++lg_rows;
  }
  const int64_t rows_per_block = int64_t(1) << lg_rows;
  const int64_t grid = (m + rows_per_block - 1) / rows_per_block;
  return {lg_tpr, lg_rows, grid > 0x7fffffff ? 0u : static_cast<unsigned>(grid)};
}

template <typename T, int VEC, int PACKS, bool PLAIN = false>
bool launch_regs(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n, float eps,
                 cudaStream_t stream) {
  const ksuite::RegPlan plan = ksuite::plan_regs(n, VEC, PACKS, regs_max_threads(VEC * PACKS));
  if (plan.tpr == 0 || n > 0x7fffffff) return false;
  const RowGroups g = row_groups(plan, m);
  if (g.grid == 0) return false;
  rlg_regs_kernel<T, VEC, PACKS, PLAIN><<<g.grid, plan.threads, 0, stream>>>(
      x, r, w, b, y, m, static_cast<int>(n), eps, static_cast<float>(1.0 / double(n)), plan.tpr, g.lg_tpr,
      g.lg_rows);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// Plans 18 and 19: rows of any width and base alignment, PACKS 16-byte packs
// a thread (rlg_unaligned_kernel), when x, r and y rows are equally
// misaligned (their addresses differ by multiples of 16 bytes; w and b may lie
// anywhere).
template <typename T, int PACKS>
bool launch_unaligned_rows(const T* x, const T* r, const T* w, const T* b, T* y, int64_t m, int64_t n,
                           float eps, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  const auto xa = reinterpret_cast<std::uintptr_t>(x);
  if (((xa - reinterpret_cast<std::uintptr_t>(r)) | (xa - reinterpret_cast<std::uintptr_t>(y))) & 15u) return false;
  if (n > 0x7fffffff) return false;
  // Threads for the body's packs, at most n / VEC whatever the row's
  // misalignment (sized for ceil(n / VEC), 2053 bf16 columns at 4 packs a
  // thread would take 96 threads where 64 hold its 256 packs); head and tail
  // go to the first <= 2 (VEC - 1) threads, so a row takes >= 2 VEC lanes.
  ksuite::RegPlan plan = ksuite::plan_regs(n / VEC * VEC, VEC, PACKS, unaligned_max_threads(PACKS));
  if (plan.tpr == 0) return false;
  plan.tpr = std::max(plan.tpr, 2 * VEC);
  const RowGroups g = row_groups(plan, m);
  if (g.grid == 0) return false;
  rlg_unaligned_kernel<T, PACKS><<<g.grid, plan.threads, 0, stream>>>(
      x, r, w, b, y, m, static_cast<int>(n), eps, static_cast<float>(1.0 / double(n)), plan.tpr, g.lg_tpr,
      g.lg_rows);
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
    case 8:
    case 9:
      if constexpr (VEC > 1) {
        if (variant == 8 ? launch_tma<T, false>(x, r, w, b, y, m, n, eps, stream)
                         : launch_tma<T, true>(x, r, w, b, y, m, n, eps, stream))
          return;
      }
      break;
    case 10:
    case 11:
      if constexpr (VEC > 1) {
        if (variant == 10 ? launch_tma<T, true, 512>(x, r, w, b, y, m, n, eps, stream)
                          : launch_tma<T, true, 256>(x, r, w, b, y, m, n, eps, stream))
          return;
      }
      break;
    case 12:
      if constexpr (VEC > 1) {
        if (launch_tma<T, true, 512, true>(x, r, w, b, y, m, n, eps, stream)) return;
      }
      break;
    case 13:
    case 14:
      if constexpr (VEC > 1) {
        if (variant == 13 ? launch_tma<T, false, 512, false, 8>(x, r, w, b, y, m, n, eps, stream)
                          : launch_tma<T, false, 512, false, 8, true>(x, r, w, b, y, m, n, eps, stream))
          return;
      }
      break;
    case 15:
    case 16:
    case 17:
      if constexpr (VEC > 1) {
        if (variant == 15   ? launch_tma<T, false, kTmaThreads, false, kTmaPacks, true>(x, r, w, b, y, m, n, eps, stream)
            : variant == 16 ? launch_tma<T, true, 512, true, kTmaPacks, true>(x, r, w, b, y, m, n, eps, stream)
                            : launch_tma<T, true, 512, false, kTmaPacks, true>(x, r, w, b, y, m, n, eps, stream))
          return;
      }
      break;
    case 18: if (launch_unaligned_rows<T, 4>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 19: if (launch_unaligned_rows<T, 8>(x, r, w, b, y, m, n, eps, stream)) return; break;
    case 20:
      if (launch_cluster<T, ksuite::vec16<T>(), true>(x, r, w, b, y, m, n, eps, ksuite::max_smem_optin(), stream))
        return;
      break;
    case 21: if (launch_stream<T>(x, r, w, b, y, m, n, eps, stream)) return; break;
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
  // Rows off 16-byte boundaries (or w and b off them): the cluster with a
  // 16-byte body (plan 20) before the one of one element a load.
  if constexpr (VEC == 1) {
    if (launch_cluster<T, ksuite::vec16<T>(), true>(x, r, w, b, y, m, n, eps, ksuite::max_smem_optin(), stream))
      return;
  }
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
  KSUITE_CHECK(variant >= 0 && variant <= kRlgVariants, op, ": variant must be 0 (auto) .. ", kRlgVariants,
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
