// The bf16, D = 128 tilings of the attention forward (flash_attention.cuh),
// in a translation unit of their own so that the build compiles the
// dtype x head-dim groups in parallel.
#include "flash_attention.cuh"

namespace ksuite_attn {
KSUITE_ATTN_DEFINE(run_bf16_d128, __nv_bfloat16, D128)
}  // namespace ksuite_attn
