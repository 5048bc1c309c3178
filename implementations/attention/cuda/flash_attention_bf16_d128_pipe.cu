// The bf16, D = 128 tilings 4-6 of the attention forward (flash_fwd_pipe_kernel
// in flash_attention.cuh), in a translation unit of their own so that the
// build compiles them beside the others.
#include "flash_attention.cuh"

namespace ksuite_attn {
KSUITE_ATTN_DEFINE_D128_PIPE(run_bf16_d128_pipe, __nv_bfloat16)
}  // namespace ksuite_attn
