// C through shared memory, 16 rows x 64 columns of 16-bit C at a time, for
// the GEMMs whose accumulators have the m16n8 fragment layout (mma.sync's and
// wgmma's: lane l holds columns 2(l % 4), +1 of rows l / 4 and l / 4 + 8 of
// each 8-column block).  Stored straight from registers, a warp store writes
// 16 bytes into each of 8 rows; staged, it writes whole 128-byte row
// segments, 16 bytes a lane.
//
// A warp's 2 KB staging holds row r's 16-byte chunk c at chunk c ^ (r % 8):
// the fragment writes (8 rows, one chunk each a phase) and the 16-byte reads
// (one row a phase) are both free of bank conflicts.
#pragma once

#include <cstdint>

#include "ksuite/mma_ptx.cuh"

namespace ksuite_gemm {

constexpr int STAGE_BYTES_PER_WARP = 2048;  // 16 rows x 128 bytes

// Writes the warp's 16 x 64 block into its staging at shared address `epi`:
// value(j, h) is the packed pair of 8-column block j, row lane / 4 + 8 h.
template <typename Value>
__device__ __forceinline__ void stage_c_block(uint32_t epi, int lane, Value value) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
#pragma unroll
    for (int j = 0; j < 8; ++j) ksuite::ptx::st_shared_b32(epi + r * 128 + ((j ^ (r & 7)) << 4) + t * 4, value(j, h));
  }
  __syncwarp();
}

// Stores the staged block to C (row-major, N columns, 16-bit elements) at
// rows row0.., columns col0.., masked by M and N; N % 8 == 0, so a 16-byte
// chunk is all in or all out.  The staging is free again on return.
template <typename T>
__device__ __forceinline__ void store_c_block(uint32_t epi, int lane, T* __restrict__ C, int row0, int col0, int M,
                                              int N) {
  const int c = lane & 7;
  const int col = col0 + c * 8;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const int r = (lane >> 3) + 4 * p;
    const uint4 v = ksuite::ptx::ld_shared_v4(epi + r * 128 + ((c ^ (r & 7)) << 4));
    const int row = row0 + r;
    if (row < M && col < N) *reinterpret_cast<uint4*>(C + static_cast<int64_t>(row) * N + col) = v;
  }
  __syncwarp();
}

}  // namespace ksuite_gemm
