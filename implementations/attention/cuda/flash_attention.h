// The entry points of the attention tilings, as flash_attention.cu (the op)
// calls them: raw pointers and a stream, no torch types, so that the
// translation units that instantiate the tilings (flash_attention_*.cu)
// compile without torch's headers and the op compiles without the kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ksuite_attn {

// Tilings per head dim (the table in flash_attention.cuh); `variant` indexes them.
constexpr int N_VARIANTS_D64 = 4, N_VARIANTS_D96 = 4, N_VARIANTS_D128 = 7;

// What a tiling's launcher gets: raw (B, H, S, D) pointers, already checked by
// flash_attention.cu, and the stream to launch on.
struct Args {
  const void *q, *k, *v;
  void* o;
  int64_t B, H, S;
  bool causal;
  cudaStream_t stream;
};

// Defined in flash_attention_<dtype>_d<D>.cu (variants 0-3) and
// flash_attention_<dtype>_d128_pipe.cu (D = 128, variants 4-6), one
// translation unit each so that the build compiles them in parallel.
#define KSUITE_ATTN_DECLARE(NAME) cudaError_t NAME(const Args& a, int variant);
KSUITE_ATTN_DECLARE(run_bf16_d64)
KSUITE_ATTN_DECLARE(run_bf16_d96)
KSUITE_ATTN_DECLARE(run_bf16_d128)
KSUITE_ATTN_DECLARE(run_bf16_d128_pipe)
KSUITE_ATTN_DECLARE(run_fp16_d64)
KSUITE_ATTN_DECLARE(run_fp16_d96)
KSUITE_ATTN_DECLARE(run_fp16_d128)
KSUITE_ATTN_DECLARE(run_fp16_d128_pipe)
#undef KSUITE_ATTN_DECLARE

}  // namespace ksuite_attn
