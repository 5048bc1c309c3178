// The 64 x 64 warp tile shared by the mma.sync GEMMs (gemm_mma_kernel.cuh,
// gemm_ws_kernel.cuh): MT x NT fp32 m16n8 accumulator fragments, A fragments
// of m16k16 and B fragments of k16n8 loaded by ldmatrix.
#pragma once

#include <cstdint>

#include "ksuite/mma_ptx.cuh"

namespace ksuite_gemm {

// B fragments 2j and 2j + 1 from one ldmatrix.x4.trans: lanes 0-15 address
// k-rows 0-15 at n + 0, lanes 16-31 the same rows at n + 8.
template <int NT>
__device__ __forceinline__ void load_b_pair(uint32_t (&bf)[NT][2], int j, uint32_t addr) {
  uint32_t r[4];
  ksuite::ptx::ldmatrix_x4_trans(r, addr);
  bf[2 * j][0] = r[0];
  bf[2 * j][1] = r[1];
  bf[2 * j + 1][0] = r[2];
  bf[2 * j + 1][1] = r[3];
}

// acc += A x B for one k16 slice: MT x NT mma, B walked serpentine (odd i
// backwards) so that consecutive mma of neighbouring i read the same B.
template <typename T, int MT, int NT>
__device__ __forceinline__ void mma_slice(float (&acc)[MT][NT][4], const uint32_t (&af)[MT][4],
                                          const uint32_t (&bf)[NT][2]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int jj = (i & 1) ? NT - 1 - j : j;
      ksuite::ptx::mma_16816<T>(acc[i][jj], af[i], bf[jj][0], bf[jj][1]);
    }
}

}  // namespace ksuite_gemm
