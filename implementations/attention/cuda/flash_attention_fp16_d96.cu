// The fp16, D = 96 tilings of the attention forward (flash_attention.cuh),
// in a translation unit of their own so that the build compiles the
// dtype x head-dim groups in parallel.
#include "flash_attention.cuh"

namespace ksuite_attn {
KSUITE_ATTN_DEFINE(run_fp16_d96, __half, D96)
}  // namespace ksuite_attn
