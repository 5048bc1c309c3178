// The arrival counters of the split-K GEMMs of this folder (split_k.cuh has
// the protocol): one zeroed int buffer per device, which every launch leaves
// at zero; and a launch's fp32 partials beside them (SplitWorkspace).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "ksuite/common.cuh"

namespace ksuite_gemm_split {

// At least `blocks` zeroed arrival counters on the current device: one buffer
// per device (shared by the ops of this folder), replaced by a larger zeroed
// one when a grid needs more; every launch leaves the counters it used at zero.
inline int* counters(int64_t blocks) {
  constexpr int kMaxDevices = 64;
  static std::mutex mu;
  static at::Tensor* bufs = new at::Tensor[kMaxDevices];  // kept for the process's life
  const int dev = c10::cuda::current_device();
  KSUITE_CHECK(dev < kMaxDevices, "split-K GEMM: device index ", dev, " is beyond ", kMaxDevices);
  const std::lock_guard<std::mutex> lock(mu);
  at::Tensor& buf = bufs[dev];
  if (!buf.defined() || buf.numel() < blocks) {
    buf = at::zeros({std::max<int64_t>(blocks, 1024)}, at::TensorOptions().device(at::kCUDA, dev).dtype(at::kInt));
  }
  return buf.data_ptr<int>();
}

// A split-K launch's scratch: fp32 partials [col_blocks][splits][M][cols] and
// the arrival counters, only where K is split (null pointers otherwise).
struct SplitWorkspace {
  at::Tensor buf;
  float* partials = nullptr;
  int* counters = nullptr;

  SplitWorkspace(const at::Tensor& a, int64_t col_blocks, int64_t splits, int64_t M, int64_t cols) {
    if (splits <= 1) return;
    buf = at::empty({col_blocks, splits, M, cols}, a.options().dtype(at::kFloat));
    partials = buf.data_ptr<float>();
    counters = ksuite_gemm_split::counters(col_blocks);
  }
};

}  // namespace ksuite_gemm_split
