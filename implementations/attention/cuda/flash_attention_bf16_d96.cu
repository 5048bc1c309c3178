// The bf16, D = 96 tilings of the attention forward (flash_attention.cuh),
// in a translation unit of their own so that the build compiles the
// dtype x head-dim groups in parallel.
#include "flash_attention.cuh"

namespace ksuite_attn {
KSUITE_ATTN_DEFINE(run_bf16_d96, __nv_bfloat16, D96)
}  // namespace ksuite_attn
