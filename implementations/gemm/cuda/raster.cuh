// The order in which the tiled GEMMs of this folder (gemm_mma_kernel.cuh,
// gemm_tf32x3.cu) hand C's tiles to a 1-D grid.
#pragma once

namespace ksuite_gemm {

// Grouped raster: `group` row tiles walk down a column band before the next
// band, so the CTAs resident at once share their A rows and B columns in L2.
// Every (tm, tn) of a tiles_m x tiles_n grid comes from exactly one pid, the
// last group holding the leftover rows.
__device__ __forceinline__ void grouped_tile(int pid, int tiles_m, int tiles_n, int group, int& tm, int& tn) {
  const int per_group = group * tiles_n;
  const int first_m = (pid / per_group) * group;
  const int group_rows = min(tiles_m - first_m, group);
  tm = first_m + (pid % per_group) % group_rows;
  tn = (pid % per_group) / group_rows;
}

}  // namespace ksuite_gemm
