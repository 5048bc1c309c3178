// The operand checks every GEMM op of this folder makes at its boundary
// (gemm_naive, gemm_mma, gemm_mma_ws, gemm_wgmma): CUDA matrices on one
// device, one dtype, matching inner dimensions, row-major, and dimensions
// that fit the kernels' 32-bit ints.  With `strided_rows` the rows may lie
// further apart than their width (a row-major view of wider rows).  `op` names the op in the messages.
// The dtypes an op takes, its tile argument and any alignment it needs are
// its own checks, made after these.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "ksuite/common.cuh"

namespace ksuite_gemm_operands {

inline void check(const at::Tensor& a, const at::Tensor& b, const char* op, bool strided_rows = false) {
  KSUITE_CHECK(a.is_cuda() && b.is_cuda(), op, ": a and b must be CUDA tensors, got ", a.device(), " and ",
               b.device());
  KSUITE_CHECK(a.device() == b.device(), op, ": a and b are on different devices (", a.device(), ", ", b.device(),
               ")");
  KSUITE_CHECK(a.dim() == 2 && b.dim() == 2, op, ": a and b must be matrices, got ", a.dim(), "-d and ", b.dim(),
               "-d tensors");
  KSUITE_CHECK(a.scalar_type() == b.scalar_type(), op, ": a and b must share a dtype, got ", a.scalar_type(),
               " and ", b.scalar_type());
  KSUITE_CHECK(a.size(1) == b.size(0), op, ": inner dimensions differ: a is ", ksuite::shape_str(a), ", b is ",
               ksuite::shape_str(b));
  if (strided_rows) {
    const auto row_major = [](const at::Tensor& t) {
      return (t.stride(1) == 1 || t.size(1) <= 1) && (t.stride(0) >= t.size(1) || t.size(0) <= 1);
    };
    KSUITE_CHECK(row_major(a) && row_major(b), op, ": a and b must be row-major (unit column stride)");
  } else {
    KSUITE_CHECK(a.is_contiguous() && b.is_contiguous(), op, ": a and b must be contiguous (row-major)");
  }
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  KSUITE_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), op,
               ": every dimension must be below 2^31, got M=", M, " N=", N, " K=", K);
}

}  // namespace ksuite_gemm_operands
