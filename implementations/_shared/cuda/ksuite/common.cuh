// Small device helpers shared by the kernel-suite CUDA extensions: packs and
// their conversions, cached loads and stores, warp and block reductions,
// device attributes, check messages, cluster launches.
// Included as "ksuite/common.cuh"; implementations/_shared/cuda_ext.py puts
// implementations/_shared/cuda on the include path (and in the build hash) of
// every extension and of the CI compile check.  GELU math is in ksuite/gelu.cuh,
// the row kernels' thread mapping in ksuite/rows.cuh.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

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

// ---- Cheap, accurate math for the memory-bound kernels -----------------------
// ex2.approx / rcp.approx (one MUFU instruction each, relative error ~2^-22);
// .ftz: results below 2^-126 flush to zero, which no output here can tell.
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// log2(x), absolute error ~2^-22 (one MUFU instruction).
__device__ __forceinline__ float lg2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// exp(x) for x <= 0 (e.g. exp(v - max)): 2^(x log2 e), relative error ~2e-7.
__device__ __forceinline__ float exp_approx(float x) { return ex2_approx(x * 1.4426950408889634f); }

// ---- 16-byte packs as raw words, converted two elements at a time ----------
// bf16 -> float is a shift (or a mask) of the 32-bit word; float -> bf16/fp16
// is one cvt.rn.{bf16x2,f16x2}.f32 for two elements.
__device__ __forceinline__ void unpack2(uint32_t w, float& lo, float& hi, c10::BFloat16*) {
  lo = __uint_as_float(w << 16);
  hi = __uint_as_float(w & 0xffff0000u);
}
__device__ __forceinline__ void unpack2(uint32_t w, float& lo, float& hi, c10::Half*) {
  asm("{.reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;}"
      : "=f"(lo), "=f"(hi) : "r"(w));
}
__device__ __forceinline__ uint32_t pack2(float lo, float hi, c10::BFloat16*) {
  uint32_t w;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}
__device__ __forceinline__ uint32_t pack2(float lo, float hi, c10::Half*) {
  uint32_t w;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}

// The cache path of a global load (a template argument of ld16_path and
// ld16_if).  Kernels that compare paths keep the choice a variant.
enum LoadPath : int {
  kPlain = 0,     // ld.global: no cache operator, no hint (L1-allocating, coherent)
  kNc = 1,        // ld.global.nc: the read-only path
  kNcStream = 2,  // ld.global.nc.L1::no_allocate: read-only, data read exactly once
  kEvictFirst = 3,  // ld.global.L1::no_allocate with an L2 evict_first policy: the lines
                    // read go first when the L2 needs room (ld16_path only)
};

// One 16-byte load by PATH; p 16-byte aligned.
template <int PATH>
__device__ __forceinline__ uint4 ld16_path(const void* p) {
  uint4 v;
  if constexpr (PATH == kNcStream) {
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else if constexpr (PATH == kNc) {
    asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else if constexpr (PATH == kEvictFirst) {
    asm("{.reg .b64 pol;\n"
        " createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
        " ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], pol;}"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else {
    static_assert(PATH == kPlain, "unknown load path");
    asm("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  }
  return v;
}

// One 16-byte load: ld.global.nc (read-only path); STREAM adds
// L1::no_allocate for data read exactly once.
template <bool STREAM = true>
__device__ __forceinline__ uint4 ld16(const void* p) {
  return ld16_path<STREAM ? kNcStream : kNc>(p);
}

__device__ __forceinline__ void st16(void* p, uint4 v) { *reinterpret_cast<uint4*>(p) = v; }

// One 16-byte global store as st.global.v4.b32, whatever the compiler makes of
// the value's origin (a plain uint4 store of four asm-produced words was seen
// split into four st.global.u32).
__device__ __forceinline__ void st16_global(void* p, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// The 16/sizeof(T) elements of a raw pack as floats, and back.
template <typename T>
__device__ __forceinline__ void raw_to_floats(const uint4& r, float (&f)[16 / sizeof(T)]) {
  if constexpr (sizeof(T) == 4) {
    f[0] = __uint_as_float(r.x); f[1] = __uint_as_float(r.y);
    f[2] = __uint_as_float(r.z); f[3] = __uint_as_float(r.w);
  } else {
    unpack2(r.x, f[0], f[1], (T*)nullptr);
    unpack2(r.y, f[2], f[3], (T*)nullptr);
    unpack2(r.z, f[4], f[5], (T*)nullptr);
    unpack2(r.w, f[6], f[7], (T*)nullptr);
  }
}

template <typename T>
__device__ __forceinline__ uint4 floats_to_raw(const float (&f)[16 / sizeof(T)]) {
  uint4 r;
  if constexpr (sizeof(T) == 4) {
    r.x = __float_as_uint(f[0]); r.y = __float_as_uint(f[1]);
    r.z = __float_as_uint(f[2]); r.w = __float_as_uint(f[3]);
  } else {
    r.x = pack2(f[0], f[1], (T*)nullptr);
    r.y = pack2(f[2], f[3], (T*)nullptr);
    r.z = pack2(f[4], f[5], (T*)nullptr);
    r.w = pack2(f[6], f[7], (T*)nullptr);
  }
  return r;
}

// VEC elements at p as floats: one 16-byte load when VEC == vec16<T>(), else
// (VEC == 1) one scalar load.
template <typename T, int VEC, bool STREAM = true>
__device__ __forceinline__ void load_floats(const T* p, float (&f)[VEC]) {
  if constexpr (VEC == 1) {
    f[0] = to_float(p[0]);
  } else {
    static_assert(VEC * sizeof(T) == 16, "VEC must be 1 or one 16-byte pack");
    raw_to_floats<T>(ld16<STREAM>(p), f);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void store_floats(T* p, const float (&f)[VEC]) {
  if constexpr (VEC == 1) {
    p[0] = from_float<T>(f[0]);
  } else {
    static_assert(VEC * sizeof(T) == 16, "VEC must be 1 or one 16-byte pack");
    st16(p, floats_to_raw<T>(f));
  }
}

// ---- Predicated loads: a guarded pack without a branch -----------------------
// `pred ? *p : fill` as one predicated load (@p LDG), so that the loads of all
// of a thread's packs issue back to back, each under its own guard, before
// the first use of any (an `if (c < n) { load; use; }` region per pack makes
// the compiler emit a branch per region and serialises the round trips).  The
// result is the raw bits: a uint4 for a 16-byte pack, the element's bits
// (zero-extended) for VEC == 1.  ZERO: where !pred, all zero (+0.0); else
// undefined (no instructions spent on it: for values the caller only uses
// under the same predicate).
template <typename T, int VEC>
using RawPack = std::conditional_t<VEC == 1, uint32_t, uint4>;

// One predicated load instruction; the predicate is operand OUTS (the count
// of output operands).  Also used by the ops' own headers for scalar loads.
#define KSUITE_LD_IF(INSTR, OUTS, ...)                                                   \
  asm("{.reg .pred q;\n setp.ne.b32 q, %" #OUTS ", 0;\n @q " INSTR ";}" : __VA_ARGS__)

// `pred ? 16 bytes at p : (ZERO ? 0 : undefined)` as one predicated load by
// PATH (see LoadPath); p 16-byte aligned.
template <int PATH, bool ZERO = false>
__device__ __forceinline__ uint4 ld16_if(const void* p, bool pred) {
  const int q = pred;
  uint4 v;
#define KSUITE_LD16_IF(INSTR, C)                                                          \
  KSUITE_LD_IF(INSTR " {%0, %1, %2, %3}, [%5]", 4, C(v.x), C(v.y), C(v.z), C(v.w) : "r"(q), "l"(p))
#define KSUITE_LD16_IF_PATH(C)                                                            \
  if constexpr (PATH == kNcStream) KSUITE_LD16_IF("ld.global.nc.L1::no_allocate.v4.u32", C); \
  else if constexpr (PATH == kNc) KSUITE_LD16_IF("ld.global.nc.v4.u32", C);              \
  else KSUITE_LD16_IF("ld.global.v4.u32", C);
#define KSUITE_RW(x) "+r"(x)
#define KSUITE_W(x) "=r"(x)
  static_assert(PATH == kPlain || PATH == kNc || PATH == kNcStream, "unknown load path");
  if constexpr (ZERO) {
    v = make_uint4(0u, 0u, 0u, 0u);
    KSUITE_LD16_IF_PATH(KSUITE_RW)
  } else {
    KSUITE_LD16_IF_PATH(KSUITE_W)
  }
#undef KSUITE_LD16_IF_PATH
#undef KSUITE_LD16_IF
#undef KSUITE_RW
#undef KSUITE_W
  return v;
}

template <typename T, int VEC, bool STREAM = true, bool ZERO = true>
__device__ __forceinline__ RawPack<T, VEC> ld_pack_if(const T* p, bool pred) {
  if constexpr (VEC == 1) {
    const int q = pred;
    if constexpr (sizeof(T) == 4) {
      uint32_t v;
      if constexpr (ZERO) {
        v = 0;
        KSUITE_LD_IF("ld.global.nc.b32 %0, [%2]", 1, "+r"(v) : "r"(q), "l"(p));
      } else {
        KSUITE_LD_IF("ld.global.nc.b32 %0, [%2]", 1, "=r"(v) : "r"(q), "l"(p));
      }
      return v;
    } else {
      unsigned short s;
      if constexpr (ZERO) {
        s = 0;
        KSUITE_LD_IF("ld.global.nc.b16 %0, [%2]", 1, "+h"(s) : "r"(q), "l"(p));
      } else {
        KSUITE_LD_IF("ld.global.nc.b16 %0, [%2]", 1, "=h"(s) : "r"(q), "l"(p));
      }
      return s;
    }
  } else {
    static_assert(VEC * sizeof(T) == 16, "VEC must be 1 or one 16-byte pack");
    return ld16_if<STREAM ? kNcStream : kNc, ZERO>(p, pred);
  }
}

// A RawPack's VEC elements as floats.
template <typename T, int VEC>
__device__ __forceinline__ void raw_pack_to_floats(const RawPack<T, VEC>& r, float (&f)[VEC]) {
  if constexpr (VEC == 1) {
    if constexpr (sizeof(T) == 4) {
      f[0] = __uint_as_float(r);
    } else if constexpr (std::is_same_v<T, c10::BFloat16>) {
      f[0] = __uint_as_float(r << 16);
    } else {
      float hi;
      unpack2(r, f[0], hi, (T*)nullptr);
    }
  } else {
    raw_to_floats<T>(r, f);
  }
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

__device__ __forceinline__ float shfl_xor(float v, int off) { return __shfl_xor_sync(0xffffffffu, v, off); }
__device__ __forceinline__ float2 shfl_xor(float2 v, int off) {
  return make_float2(__shfl_xor_sync(0xffffffffu, v.x, off), __shfl_xor_sync(0xffffffffu, v.y, off));
}
__device__ __forceinline__ float3 shfl_xor(float3 v, int off) {
  return make_float3(__shfl_xor_sync(0xffffffffu, v.x, off), __shfl_xor_sync(0xffffffffu, v.y, off),
                     __shfl_xor_sync(0xffffffffu, v.z, off));
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

// Blocks of THREADS threads (and SMEM bytes of dynamic shared memory) of
// Kernel that an SM holds at once (registers, shared memory, threads), as the
// occupancy API says, cached per kernel and device; 0 if none fit.
// Persistent and split launchers size their grids by it.
template <auto Kernel, int THREADS, size_t SMEM = 0>
int resident_blocks() {
  constexpr int kMaxDevices = 64;
  static int cache[kMaxDevices] = {};
  const int dev = c10::cuda::current_device();
  if (dev < kMaxDevices && cache[dev] > 0) return cache[dev];
  int per_sm = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, THREADS, SMEM));
  if (dev < kMaxDevices) cache[dev] = per_sm;
  return per_sm;
}

inline cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// "[2, 3, 4]" for error messages, formatted with std::to_string only.
inline std::string shape_str(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) {
    s += (i ? ", " : "") + std::to_string(t.size(i));
  }
  return s + "]";
}

// Boundary-check messages without std::ostream.  On the H200 image (torch
// 2.11, nvcc 13.0) a TORCH_CHECK whose message streamed a number (an int64_t,
// a double, or t.sizes(), whose elements are numbers) crashed the process
// instead of raising, while messages made only of strings and enum names (the
// gelu op's) raised.  KSUITE_CHECK joins its pieces into one std::string here
// (numbers by std::to_string, dtypes by c10::toString, devices by
// Device::str()) and hands TORCH_CHECK that single string, so no
// std::ostringstream is built in the extension at all.
inline std::string msg_piece(const char* s) { return s; }
inline std::string msg_piece(const std::string& s) { return s; }
inline std::string msg_piece(c10::ScalarType t) { return c10::toString(t); }
inline std::string msg_piece(const c10::Device& d) { return d.str(); }
template <typename N, std::enable_if_t<std::is_arithmetic_v<N>, int> = 0>
inline std::string msg_piece(N v) { return std::to_string(v); }

template <typename... A>
inline std::string msg(const A&... pieces) {
  std::string s;
  (s.append(msg_piece(pieces)), ...);
  return s;
}

}  // namespace ksuite

// TORCH_CHECK(cond, pieces...) with the message built by ksuite::msg.  The
// message is only built when the check fails.
#define KSUITE_CHECK(cond, ...) TORCH_CHECK(cond, ::ksuite::msg(__VA_ARGS__))

namespace ksuite {

// Thread-block clusters (sm_90+), launched along x.

// A launch configuration of `grid` CTAs in clusters of `ctas` along x, with
// `smem` bytes of dynamic shared memory (opted in for `kernel`); `attr` is
// the caller's storage for the cluster attribute the configuration points at.
inline cudaLaunchConfig_t cluster_config(const void* kernel, unsigned grid, int threads, int smem, int ctas,
                                         cudaStream_t stream, cudaLaunchAttribute* attr) {
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = ctas;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  return config;
}

// Launch `kernel` on clusters of `ctas` CTAs along x, with `smem` bytes of
// dynamic shared memory; checked.
template <typename... Params, typename... Args>
void launch_clustered(void (*kernel)(Params...), unsigned grid, int threads, int smem, int ctas,
                      cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config =
      cluster_config(reinterpret_cast<const void*>(kernel), grid, threads, smem, ctas, stream, &attr);
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace ksuite
