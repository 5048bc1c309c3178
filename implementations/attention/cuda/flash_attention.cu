// O = softmax(Q K^T / sqrt(D)) V, forward only: the op attention_flash.
// The kernel, its tilings and the reasons for them are in
// flash_attention.cuh; the six dtype x head-dim groups are compiled in
// flash_attention_{bf16,fp16}_d{64,96,128}.cu and (D = 128, tilings 4-6)
// flash_attention_{bf16,fp16}_d128_pipe.cu.  `variant` picks a tiling
// (0..3 at D = 64 and 96, 0..6 at D = 128, see the table in the header), -1
// the automatic one below.

#include <algorithm>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "flash_attention.h"
#include "ksuite/common.cuh"

namespace ksuite_attn {

// The automatic tiling per head dim; __init__.py (AUTO) mirrors it for the
// config column.  Both are two m16 tiles per warp, 4 warps, 2 CTAs per SM.
constexpr int AUTO_D64 = 0, AUTO_D96 = 0, AUTO_D128 = 0;
constexpr int64_t kMaxHeads = 65535;  // a grid's y limit: one (batch, head) a row of CTAs

at::Tensor attention_flash(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           bool causal, int64_t variant) {
  KSUITE_CHECK(q.is_cuda() && k.is_cuda() && v.is_cuda(),
              "attention_flash: q, k and v must be CUDA tensors");
  KSUITE_CHECK(q.device() == k.device() && q.device() == v.device(),
              "attention_flash: q, k and v must be on one device, got ", q.device(), ", ",
              k.device(), ", ", v.device());
  KSUITE_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
              "attention_flash: q, k and v must share a dtype, got ", q.scalar_type(), ", ",
              k.scalar_type(), ", ", v.scalar_type());
  KSUITE_CHECK(q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16,
              "attention_flash: only float16 and bfloat16 are supported (tensor-core mma), got ",
              q.scalar_type());
  KSUITE_CHECK(q.dim() == 4, "attention_flash: q must be (B, H, S, D), got ", q.dim(), " dims");
  KSUITE_CHECK(k.sizes() == q.sizes() && v.sizes() == q.sizes(),
              "attention_flash: q, k and v must have one shape (self-attention), got ", ksuite::shape_str(q),
              ", ", ksuite::shape_str(k), ", ", ksuite::shape_str(v));
  KSUITE_CHECK(q.size(3) == 64 || q.size(3) == 96 || q.size(3) == 128,
              "attention_flash: head dim D must be 64, 96 or 128, got ", q.size(3));
  KSUITE_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(),
              "attention_flash: q, k and v must be contiguous (B, H, S, D)");
  KSUITE_CHECK(ksuite::aligned16(q.data_ptr()) && ksuite::aligned16(k.data_ptr()) &&
                  ksuite::aligned16(v.data_ptr()),
              "attention_flash: q, k and v must start on a 16-byte boundary");
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2);
  KSUITE_CHECK(S * q.size(3) < (1LL << 31), "attention_flash: S*D must fit in 32-bit ints");

  const int64_t d = q.size(3);
  const int n_variants = d == 64 ? N_VARIANTS_D64 : d == 96 ? N_VARIANTS_D96 : N_VARIANTS_D128;
  KSUITE_CHECK(variant >= -1 && variant < n_variants, "attention_flash: variant must be -1 (automatic) or 0..",
              n_variants - 1, " at D=", d, ", got ", variant);
  const c10::cuda::CUDAGuard guard(q.device());
  at::Tensor o = at::empty_like(q);
  if (B == 0 || H == 0 || S == 0) return o;
  const int automatic = d == 64 ? AUTO_D64 : d == 96 ? AUTO_D96 : AUTO_D128;
  const int var = static_cast<int>(variant < 0 ? automatic : variant);
  const bool half = q.scalar_type() == at::kHalf;
  auto run = d == 64  ? (half ? run_fp16_d64 : run_bf16_d64)
             : d == 96 ? (half ? run_fp16_d96 : run_bf16_d96)
             : var < 4 ? (half ? run_fp16_d128 : run_bf16_d128)
                       : (half ? run_fp16_d128_pipe : run_bf16_d128_pipe);
  // A launch's grid holds at most kMaxHeads (batch, head) pairs on its y axis: more
  // run a launch per run of them, each on its heads' contiguous slice.
  const int64_t heads = B * H, head_bytes = S * d * static_cast<int64_t>(q.element_size());
  for (int64_t h0 = 0; h0 < heads; h0 += kMaxHeads) {
    const int64_t off = h0 * head_bytes;
    const Args args{static_cast<const char*>(q.data_ptr()) + off, static_cast<const char*>(k.data_ptr()) + off,
                    static_cast<const char*>(v.data_ptr()) + off, static_cast<char*>(o.data_ptr()) + off, 1,
                    std::min(kMaxHeads, heads - h0), S, causal, ksuite::current_stream()};
    C10_CUDA_CHECK(run(args, var));
  }
  return o;
}

}  // namespace ksuite_attn

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("attention_flash(Tensor q, Tensor k, Tensor v, bool causal, int variant=-1) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("attention_flash", &ksuite_attn::attention_flash);
}
