// Host side of the TMA loads in gemm_wgmma.cu and gemm_ws.cu: 2-D tensor
// maps of row-major 16-bit matrices in the 128-byte swizzle.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "ksuite/common.cuh"

namespace ksuite_hopper {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled from the driver through the runtime, so the
// extension needs no -lcuda.
inline EncodeTiledFn encode_tiled(const char* op) {
  static EncodeTiledFn fn = nullptr;
  static std::once_flag once;
  static cudaError_t err = cudaSuccess;
  static cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
  std::call_once(once, [] {
    void* p = nullptr;
    err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status);
    if (err == cudaSuccess && status == cudaDriverEntryPointSuccess) fn = reinterpret_cast<EncodeTiledFn>(p);
  });
  KSUITE_CHECK(fn != nullptr, op, ": could not get cuTensorMapEncodeTiled from the driver (",
              cudaGetErrorString(err), ", query status ", static_cast<int>(status), ")");
  return fn;
}

// A row-major rows x cols matrix as a 2-D tensor map with 64 x box_rows boxes
// (64 16-bit elements = 128 bytes inner, the 128-byte swizzle's width); rows
// row_stride elements apart (cols where it is left out; a multiple of 8).
// L2 promotion to 128 bytes, a box row's own width: a row that starts off a
// 128-byte line spans two lines, and promoting each access to 256 bytes then
// pulls in lines no box row asked for.
inline CUtensorMap make_map(const at::Tensor& t, int64_t rows, int64_t cols, uint32_t box_rows, const char* op,
                            const char* name, int64_t row_stride = -1) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride < 0 ? cols : row_stride) * 2};  // bytes between rows
  const cuuint32_t box[2] = {64, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUtensorMapDataType dtype = t.scalar_type() == at::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                     : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult res = encode_tiled(op)(&map, dtype, 2, const_cast<void*>(t.data_ptr()), dims, strides, box,
                                        elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  KSUITE_CHECK(res == CUDA_SUCCESS, op, ": cuTensorMapEncodeTiled failed for ", name, " (error ",
              static_cast<int>(res), ", shape ", std::to_string(rows), " x ", std::to_string(cols), ")");
  return map;
}

}  // namespace ksuite_hopper
