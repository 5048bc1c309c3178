// Thin wrappers over the sm_80+ PTX that the tensor-core kernels (gemm and
// attention) use: cp.async (global -> shared without a register round trip,
// zero-filled when out of range; also a whole float32 tile), ldmatrix (shared -> the exact register
// layout mma expects), mma.sync m16n8k16 with fp32 accumulators, and the
// m16n8k8 TF32 form with the head/tail split of float32 operands (3xTF32).
// Shared from here so the build hash (which covers implementations/_shared/cuda) sees it.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ksuite::ptx {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes, or writes 16 zero bytes when !valid (src-size 0 reads
// nothing, so `src` only has to be some mapped address).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

// The same for 4 bytes (one float), through L1 (.cg takes 16-byte copies only).
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// ROWS x COLS floats of a row-major `rows` x `cols` float matrix from (r0,
// c0) into shared memory rows LD floats apart, zero past its edges, spread
// over THREADS threads: VEC copies 16-byte chunks (needs cols % 4 == 0 and a
// 16-byte aligned base, so that a chunk is wholly inside or wholly past the
// edge), else single floats.
template <bool VEC, int ROWS, int COLS, int LD, int THREADS>
__device__ __forceinline__ void cp_async_tile_f32(float* dst, const float* __restrict__ src, int rows, int cols,
                                                  int r0, int c0) {
  constexpr int W = VEC ? 4 : 1;  // floats a copy
  static_assert(ROWS * COLS / W % THREADS == 0, "the tile divides among the threads");
#pragma unroll 4
  for (int i = 0; i < ROWS * COLS / W / THREADS; ++i) {
    const int e = threadIdx.x + i * THREADS;
    const int r = e / (COLS / W), col = (e % (COLS / W)) * W;
    const bool ok = r0 + r < rows && c0 + col < cols;
    const float* p = ok ? src + static_cast<int64_t>(r0 + r) * cols + c0 + col : src;
    if constexpr (VEC) {
      cp_async_16(smem_addr(dst + r * LD + col), p, ok);
    } else {
      cp_async_4(smem_addr(dst + r * LD + col), p, ok);
    }
  }
}

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same, each matrix transposed on the way (row-major B to the "col" operand).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a (16x16, row) * b (16x8, col); T is __half or __nv_bfloat16.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// 4 bytes to / 16 bytes from shared memory by 32-bit shared address (the
// GEMMs' C staging; a generic pointer into dynamic shared memory compiles
// to generic ST/LD).
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// Every m16n8 fp32 accumulator fragment of a warp tile set to zero.
template <int MT, int NT>
__device__ __forceinline__ void zero_acc(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
}

// Two floats rounded to T and packed, the first in the low half (lower column).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// 2^x on the special-function unit.  ex2.approx(-inf) is +0, which masked
// attention scores rely on; the relative error (about 2^-22) is far below
// bf16/fp16 rounding.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// x as a TF32 head (round to nearest, ties away) and the TF32 rounding of what
// is left: head + tail carries ~22 of x's 24 significand bits.
__device__ __forceinline__ void split_tf32(float x, uint32_t& head, uint32_t& tail) {
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(head) : "f"(x));
  const float rest = x - __uint_as_float(head);
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(tail) : "f"(rest));
}

// d += a (16 x 8, row) * b (8 x 8, col), TF32 in, fp32 accumulate.
__device__ __forceinline__ void mma_1688_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace ksuite::ptx
