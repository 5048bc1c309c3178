// PTX wrappers for the Hopper (sm_90a) GEMM in gemm_wgmma.cu: wgmma.mma_async
// with shared-memory descriptors (mbarriers, TMA loads, setmaxnreg: hopper.cuh).
//
// Shared-memory descriptor (PTX ISA, "Matrix Descriptor Format" of wgmma), 64 bits:
//   bits  0-13  start address >> 4
//   bits 16-29  leading dimension byte offset (LBO) >> 4
//   bits 32-45  stride dimension byte offset (SBO) >> 4
//   bits 49-51  matrix base offset (0: every tile here starts 1024-byte aligned)
//   bits 62-63  swizzle mode: 1 = 128-byte swizzle
//
// Canonical 128-byte-swizzle layouts, in elements, with T = 8 16-bit elements
// (16 bytes), composed with Swizzle<3,4,3> (16-byte chunk index, address bits
// 4-6, XORed with the 128-byte row index within an 8-row group, bits 7-9):
//   K-major  : ((8,m),(T,2k)) : ((8T,SBO),(1,T))     LBO unused
//   MN-major : ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO))
// TMA with CU_TENSOR_MAP_SWIZZLE_128B writes exactly this XOR pattern as a
// function of the shared-memory address, so a TMA box whose inner extent is
// 128 bytes lands in the canonical layout as long as the box starts on a
// 1024-byte boundary.
#pragma once

#include <cstdint>

#include "hopper.cuh"

namespace ksuite_wgmma {

using namespace ksuite_hopper;

// ------------------------------------------------------------------ wgmma

// 128-byte-swizzle descriptor; lbo and sbo in bytes (multiples of 16).
__device__ __forceinline__ uint64_t make_desc_sw128(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4);
  d |= static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16;
  d |= static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32;
  d |= static_cast<uint64_t>(1) << 62;
  return d;
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}

// Ties a register to this point of the program: the compiler may not move
// reads or writes of `r` across it (used around the asynchronous wgmma,
// whose accumulators are only final after wgmma_wait).
__device__ __forceinline__ void fence_operand(float& r) {
  asm volatile("" : "+f"(r) :: "memory");
}

// wgmma.mma_async m64nNk16, fp32 accumulators.  The immediates after the
// predicate are scale-a = 1, scale-b = 1, transpose-a = 0 (A is K-major,
// i.e. row-major M x K), transpose-b = 1 (B is MN-major: the K x N row-major
// operand has N contiguous).  scale_d = 0 ignores the old accumulators (D = A*B).

// The accumulator lists of the four sizes: "%0, ..., %(R-1)" in the PTX
// and the matching "+f"(d[i]) operands, R = N / 2 registers a thread; each
// size extends a smaller one.
#define KSUITE_WGMMA_REGS_32 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define KSUITE_WGMMA_OUTS_32 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define KSUITE_WGMMA_REGS_64 KSUITE_WGMMA_REGS_32 ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define KSUITE_WGMMA_OUTS_64 KSUITE_WGMMA_OUTS_32, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define KSUITE_WGMMA_REGS_96 KSUITE_WGMMA_REGS_64 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define KSUITE_WGMMA_OUTS_96 KSUITE_WGMMA_OUTS_64, \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define KSUITE_WGMMA_REGS_128 KSUITE_WGMMA_REGS_96 ", " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define KSUITE_WGMMA_OUTS_128 KSUITE_WGMMA_OUTS_96, \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// D[64xN] (+)= A[64x16] * B[16xN] with TY ("bf16" or "f16") inputs and R = N / 2
// fp32 accumulators a thread; A K-major, B MN-major.  Operands R and R+1 are
// the descriptors, R+2 is scale_d.
#define KSUITE_WGMMA_FN(NAME, N, R, TY, DESC_A, DESC_B, SCALE)                                 \
  __device__ __forceinline__ void NAME(float (&d)[R], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
    asm volatile("{\n.reg .pred p;\n"                                                         \
                 "setp.ne.b32 p, %" #SCALE ", 0;\n"                                           \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " "                \
                 "{" KSUITE_WGMMA_REGS_##R "}, %" #DESC_A ", %" #DESC_B ", p, 1, 1, 0, 1;\n}\n" \
                 : KSUITE_WGMMA_OUTS_##R                                                        \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                     \
  }

KSUITE_WGMMA_FN(wgmma_m64n64k16_bf16, 64, 32, "bf16", 32, 33, 34)
KSUITE_WGMMA_FN(wgmma_m64n64k16_f16, 64, 32, "f16", 32, 33, 34)
KSUITE_WGMMA_FN(wgmma_m64n128k16_bf16, 128, 64, "bf16", 64, 65, 66)
KSUITE_WGMMA_FN(wgmma_m64n128k16_f16, 128, 64, "f16", 64, 65, 66)
KSUITE_WGMMA_FN(wgmma_m64n192k16_bf16, 192, 96, "bf16", 96, 97, 98)
KSUITE_WGMMA_FN(wgmma_m64n192k16_f16, 192, 96, "f16", 96, 97, 98)
KSUITE_WGMMA_FN(wgmma_m64n256k16_bf16, 256, 128, "bf16", 128, 129, 130)
KSUITE_WGMMA_FN(wgmma_m64n256k16_f16, 256, 128, "f16", 128, 129, 130)

template <int N, bool BF16>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (N == 256) {
    if constexpr (BF16) wgmma_m64n256k16_bf16(d, desc_a, desc_b, scale_d);
    else wgmma_m64n256k16_f16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 192) {
    if constexpr (BF16) wgmma_m64n192k16_bf16(d, desc_a, desc_b, scale_d);
    else wgmma_m64n192k16_f16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 128) {
    if constexpr (BF16) wgmma_m64n128k16_bf16(d, desc_a, desc_b, scale_d);
    else wgmma_m64n128k16_f16(d, desc_a, desc_b, scale_d);
  } else {
    static_assert(N == 64, "wgmma_m64k16: N must be 64, 128, 192 or 256");
    if constexpr (BF16) wgmma_m64n64k16_bf16(d, desc_a, desc_b, scale_d);
    else wgmma_m64n64k16_f16(d, desc_a, desc_b, scale_d);
  }
}

}  // namespace ksuite_wgmma
