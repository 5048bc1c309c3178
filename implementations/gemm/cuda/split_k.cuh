// What the split-K GEMMs of this folder (gemm_skinny.cu, gemm_mma.cu) share on
// the device: the arrival on a per-output-block counter.  The counters are
// split_counters.h's.  (gemm_wgmma.cu's stream-K tiles use the same counters
// as flags, with load_acquire.)
//
// A split-K launch has S CTAs (slices of K) per block of C.  Each writes its
// fp32 partial to a workspace, fences, and thread 0 adds one to the block's
// counter (acquire and release at GPU scope); the CTA that sees S - 1 is the
// last, and after its own fence it reads every partial (from L2, .cg), adds
// them in slice order, writes C and sets the counter back to zero, so the
// counters are zeroed once and every later launch finds them at zero (kernels
// on one stream run in order).  Calls on one device must therefore not
// overlap on two streams.
#pragma once

#include <cstdint>

namespace ksuite_gemm_split {

// Adds one to *p (acquire and release at GPU scope); returns the old count.
__device__ __forceinline__ int arrive(int* p) {
  int old;
  asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], 1;" : "=r"(old) : "l"(p) : "memory");
  return old;
}

// *p, read with acquire semantics at GPU scope.
__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

}  // namespace ksuite_gemm_split
