// Small device helpers shared by the kernel-suite CUDA extensions.
// Included as "ksuite/common.cuh"; suite/cuda_build.py puts this folder on the
// include path (and in the build hash) of every extension and of the CI check.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

// c10's stream and device helpers, not ATen/cuda/CUDAContext.h: that one pulls
// in cuBLAS and cuSPARSE headers, which the CI's nvcc-only toolkit lacks.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

// Dispatch over the three dtypes the suite runs (AT_DISPATCH_FLOATING_TYPES_AND2
// would also instantiate every kernel for double: compile time for nothing).
#define KSUITE_DISPATCH_FLOATS(TYPE, NAME, ...)                       \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                      \
                     AT_DISPATCH_CASE(at::ScalarType::Float, __VA_ARGS__) \
                     AT_DISPATCH_CASE(at::ScalarType::Half, __VA_ARGS__)  \
                     AT_DISPATCH_CASE(at::ScalarType::BFloat16, __VA_ARGS__))

namespace ksuite {

// VEC elements of T as one aligned unit, so a load or store of a Pack is one
// 16-byte (ld.global.v4) instruction when sizeof(T) * VEC == 16.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// Elements of T in one 16-byte transaction.
template <typename T>
constexpr int vec16() { return 16 / static_cast<int>(sizeof(T)); }

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(c10::Half x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(c10::BFloat16 x) { return static_cast<float>(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x) { return static_cast<T>(x); }

// Exact GELU: erff, not the tanh approximation (the reference is the erf form).
__device__ __forceinline__ float gelu_erf(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Block-wide all-reduce: shuffles within each warp, then one float per warp in
// shared memory (`smem` holds >= 32 floats), which every warp reduces again so
// that all threads get the result without a broadcast round.  The leading
// barrier lets consecutive calls reuse `smem`.  blockDim.x % 32 == 0.
__device__ __forceinline__ float block_sum(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  return warp_sum(lane < warps ? smem[lane] : 0.0f);
}

__device__ __forceinline__ float block_max(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  return warp_max(lane < warps ? smem[lane] : -INFINITY);
}

// Reductions over the `tpr` threads that share one row: a power-of-two group
// of lanes inside a warp (tpr <= 32; xor offsets below tpr stay in the group),
// or the whole block (tpr == blockDim.x > 32).  Every lane of the warp must
// call these, including lanes whose row is past the end.
__device__ __forceinline__ float row_sum(float v, int tpr, float* smem) {
  if (tpr > 32) return block_sum(v, smem);
  for (int off = tpr >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float row_max(float v, int tpr, float* smem) {
  if (tpr > 32) return block_max(v, smem);
  for (int off = tpr >> 1; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Device attributes of the current device, cached per device (launchers call
// these on every op call).
inline int device_attribute(cudaDeviceAttr attr, int slot) {
  constexpr int kMaxDevices = 64, kSlots = 4;
  static int cache[kMaxDevices][kSlots] = {};
  const int dev = c10::cuda::current_device();
  if (dev < kMaxDevices && cache[dev][slot] > 0) return cache[dev][slot];
  int value = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, dev));
  if (dev < kMaxDevices) cache[dev][slot] = value;
  return value;
}

inline int sm_count() { return device_attribute(cudaDevAttrMultiProcessorCount, 0); }
inline int max_threads_per_sm() { return device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor, 1); }
// Shared memory a block may opt in to (227 KB on Hopper), beyond the default 48 KB.
inline int max_smem_optin() { return device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, 2); }

inline int compute_major() { return device_attribute(cudaDevAttrComputeCapabilityMajor, 3); }

inline cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// "[2, 3, 4]" for error messages.  Streaming t.sizes() into TORCH_CHECK
// crashed the process on the H200 image (torch 2.11, nvcc 13.0) instead of
// raising, so shapes are formatted here with std::to_string only.
inline std::string shape_str(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) {
    s += (i ? ", " : "") + std::to_string(t.size(i));
  }
  return s + "]";
}

}  // namespace ksuite

namespace ksuite {

// How a row-wise kernel (softmax, layer norm) maps rows of n columns to threads.
//  kRegisters: the row lives in registers, `elems` per thread (a template
//    parameter of the kernel) over `tpr` threads: a power-of-two group of
//    lanes for rows up to 1024 columns (several rows per 128-thread block), a
//    whole block (64..1024 threads, 16 elements each) up to 16384 columns.
//    Kernels must allow 1024 threads for elems <= 16, and 128 for elems 32.
//  kShared / kStreaming: the row does not fit in registers.  On sm_90 the
//    kernels first try a thread-block cluster (cluster_ctas below); otherwise
//    kShared stages the row as float in one 1024-thread block's shared
//    memory, and kStreaming reads it twice from global memory.
enum class RowMode { kRegisters, kShared, kStreaming };

struct RowPlan {
  RowMode mode;
  int elems;    // per thread, kRegisters only
  int tpr;      // threads per row
  int threads;  // block size
};

inline RowPlan plan_rows(int64_t n, int vec, int64_t smem_bytes_per_col, int smem_limit) {
  if (n <= 32 * 32) {
    for (int e : {4, 8, 16, 32}) {
      if (e % vec) continue;
      int lanes = 1;
      while (int64_t(lanes) * e < n) lanes <<= 1;
      if (lanes <= 32) return {RowMode::kRegisters, e, lanes, 128};
    }
  }
  // 16 a thread fits the 64 registers of a 1024-thread block without spills.
  int64_t t = (n + 15) / 16;
  t = std::max<int64_t>(64, (t + 31) / 32 * 32);
  if (t <= 1024) return {RowMode::kRegisters, 16, int(t), int(t)};
  const bool fits = n * smem_bytes_per_col + 1024 <= smem_limit;
  return {fits ? RowMode::kShared : RowMode::kStreaming, 0, 1024, 1024};
}

}  // namespace ksuite

namespace ksuite {

// Thread-block clusters (sm_90+): a row too long for one CTA's shared memory
// is split over `ctas` CTAs of one cluster, which swap partial statistics
// through distributed shared memory.  Slices of <= 64 KB let three CTAs share
// an SM, so one CTA's loads overlap another's reductions.
constexpr int64_t kClusterSliceBytes = 64 * 1024;

// CTAs a cluster needs to hold `packs` packs of `pack_bytes` (0: more than 8).
inline int cluster_ctas(int64_t packs, int64_t pack_bytes, int smem_limit) {
  for (int c = 1; c <= 8; c *= 2)
    if ((packs + c - 1) / c * pack_bytes <= kClusterSliceBytes) return c;
  return (packs + 7) / 8 * pack_bytes + 1024 <= smem_limit ? 8 : 0;
}

// Launch `kernel` on clusters of `ctas` CTAs along x, with `smem` bytes of
// dynamic shared memory; checked.
template <typename... Params, typename... Args>
void launch_clustered(void (*kernel)(Params...), unsigned grid, int threads, int smem, int ctas,
                      cudaStream_t stream, Args... args) {
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = ctas;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace ksuite
