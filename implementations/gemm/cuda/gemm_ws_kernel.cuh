// The warp-specialised mma.sync GEMM of gemm_ws.cu (sm_90a): the same
// mma.sync m16n8k16 math as gemm_mma_kernel.cuh, fed by TMA instead of
// cp.async.  C = A @ B, row-major, float16 or bfloat16, fp32 accumulation;
// K and N multiples of 8, 16-byte aligned bases (TMA).
//
// Why: in gemm_mma_kernel.cuh the 8 warps that run the mma also issue every
// cp.async (with its address and bound arithmetic) and meet at a CTA barrier
// each k-tile, so one slow warp stalls all and 2 warps a scheduler have
// little else to issue while the tensor pipe waits.  Here:
//  - One thread of a producer warpgroup issues the TMA loads of a ring of
//    STAGES stages: A as one box of 64 k (128 bytes) x BM rows, B as BN/64
//    boxes of 64 n x 64 k-rows, 128-byte swizzle.  Mbarriers a stage: `full`
//    (expect_tx + the TMA bytes), `empty` (one arrival a consumer warp).
//  - 8 consumer warps, 64 x 64 of C each (4 x 8 m16n8 fp32 fragments), only
//    wait on mbarriers, ldmatrix and mma: no CTA barrier in the main loop.
//    Fragments are double-buffered in registers across k16 slices and
//    stages; a stage is released once the mma that consumes its last
//    fragments has issued (every ldmatrix from it has completed).
//  - Registers come from a warp's SM sub-partition's quarter of the file:
//    9 warps (3 on one sub-partition) would cap every thread at 168 and spill
//    the 128 accumulators and 64 fragment registers.  With a whole producer
//    warpgroup, setmaxnreg moves registers from it (40) to the consumers (232).
//  - Persistent grid (one CTA an SM) over output tiles in groups of 8 tile
//    rows; the producer runs ahead across tiles, so the next tile's loads
//    overlap this tile's epilogue (4-byte stores from registers, or with
//    STAGED 16-byte stores of whole 128-byte row segments; staged_epilogue.cuh).
//  - ldmatrix from the swizzled layout: chunk c of 128-byte row r sits at
//    c ^ (r % 8); a lane's row is fixed, so its chunk for k16 slice kk is
//    (2 kk + hi) ^ (r % 8) = 2 kk ^ (hi ^ r % 8): one XOR of a per-lane base
//    with kk << 5.  The eight rows of every ldmatrix phase hit eight
//    different chunks: no bank conflicts.
// B multicast over 2-CTA clusters and stream-K were slower (gemm/NOTES.md).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "hopper.cuh"
#include "staged_epilogue.cuh"
#include "warp_tile.cuh"

namespace ksuite_gemm {

template <int BM_, int BN_, int STAGES_>
struct WsConfig {
  static constexpr int BM = BM_, BN = BN_, BK = 64, STAGES = STAGES_;
  static constexpr int WM = 64, WN = 64;  // warp tile
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int CONSUMER_WARPS = WARPS_M * WARPS_N;
  static constexpr int THREADS = 32 * (CONSUMER_WARPS + 4);  // + the producer warpgroup
  static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * 32 * CONSUMER_WARPS <= 65536, "register budget");
  static constexpr int A_BYTES = BM * 128;                   // BM rows x 64 k
  static constexpr int B_BOX_BYTES = 64 * 128;               // 64 k-rows x 64 n
  static constexpr int B_BYTES = (BN / 64) * B_BOX_BYTES;
  static constexpr int EPI_BYTES = STAGE_BYTES_PER_WARP;  // a warp's staging of C (staged epilogue)
  // + the staging, + alignment slack
  static constexpr int SMEM_BYTES = STAGES * (A_BYTES + B_BYTES) + 8 * EPI_BYTES + 1024;
  static constexpr int MT = WM / 16, NT = WN / 8;
  static_assert(BM % 64 == 0 && BM <= 256, "one A box of at most 256 rows");
  static_assert(BN % 64 == 0 && CONSUMER_WARPS == 8, "8 consumer warps of 64 x 64");
};

template <typename T, typename Cfg, bool STAGED>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
gemm_ws_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
               T* __restrict__ C, int M, int N, int K) {
  using namespace ksuite_hopper;
  using namespace ksuite::ptx;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, STAGES = Cfg::STAGES;
  constexpr int MT = Cfg::MT, NT = Cfg::NT, GROUP = 8;
  constexpr int BOXES = BN / 64;

  __shared__ __align__(8) uint64_t full_bar[STAGES];
  __shared__ __align__(8) uint64_t empty_bar[STAGES];
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle is a function of address bits 4-9: stages start on
  // 1024-byte boundaries (every stage size is a multiple of 1024).
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                             ~static_cast<uintptr_t>(1023));
  uint8_t* smem_a = smem;                          // STAGES x [BM rows][128 bytes]
  uint8_t* smem_b = smem + STAGES * Cfg::A_BYTES;  // STAGES x BOXES x [64 k-rows][128 bytes]
  uint8_t* smem_epi = smem_b + STAGES * Cfg::B_BYTES;  // 8 warps x [16 rows][128 bytes]

  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int num_tiles = tiles_m * tiles_n;
  const int k_tiles = (K + BK - 1) / BK;
  const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0);
  const int lane = threadIdx.x % 32;

  // Tile t -> (tm, tn): GROUP tile rows walk down a column band together.
  auto coords = [&](int t, int& tm, int& tn) {
    const int per_group = GROUP * tiles_n;
    const int first_m = (t / per_group) * GROUP;
    const int rows = min(tiles_m - first_m, GROUP);
    const int in_group = t % per_group;
    tm = first_m + in_group % rows;
    tn = in_group / rows;
  };

  if (threadIdx.x == 0) {
    tma_prefetch_desc(&tma_a);
    tma_prefetch_desc(&tma_b);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full_bar[s], 1);                    // the producer's arrive.expect_tx
      mbar_init(&empty_bar[s], Cfg::CONSUMER_WARPS);  // every consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (warp >= Cfg::CONSUMER_WARPS) {
    // ------------------------------------------------------------ producer
    setmaxnreg_dec<Cfg::PRODUCER_REGS>();
    if (warp == Cfg::CONSUMER_WARPS && lane == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
        int tm, tn;
        coords(tile, tm, tn);
        const int m0 = tm * BM, n0 = tn * BN;
        // B boxes from column N on are not loaded: they only feed columns
        // that are never stored.  Rows, columns and k past the matrices in
        // a loaded box are zero-filled by TMA and still counted in bytes.
        const int boxes = min(BOXES, (N - n0 + 63) / 64);
        const uint32_t bytes = Cfg::A_BYTES + boxes * Cfg::B_BOX_BYTES;
        for (int kt = 0; kt < k_tiles; ++kt) {
          mbar_wait(&empty_bar[stage], phase ^ 1);  // free (first pass: parity 1 is complete)
          mbar_arrive_expect_tx(&full_bar[stage], bytes);
          const int k0 = kt * BK;
          tma_load_2d(smem_a + stage * Cfg::A_BYTES, &tma_a, &full_bar[stage], k0, m0);
#pragma unroll
          for (int j = 0; j < BOXES; ++j)
            if (j < boxes)
              tma_load_2d(smem_b + stage * Cfg::B_BYTES + j * Cfg::B_BOX_BYTES, &tma_b, &full_bar[stage],
                          n0 + 64 * j, k0);
          if (++stage == STAGES) { stage = 0; phase ^= 1; }
        }
      }
    }
  } else {
    // ------------------------------------------------------------ consumers
    setmaxnreg_inc<Cfg::CONSUMER_REGS>();
    const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;
    // hi ^ r % 8: the swizzled chunk of this lane's k half in slice 0 (A and
    // B rows of the lane are = lane (mod 8)).
    const uint32_t sw = ((static_cast<uint32_t>(lane) >> 4) ^ (static_cast<uint32_t>(lane) & 7u)) << 4;
    // A (x4): lanes 0-15 rows 0-15 of a 16-row fragment at k+0, lanes 16-31 at k+8.
    const uint32_t a_thr = smem_u32(smem_a) + (wm * 64 + (lane & 15)) * 128 + sw;
    // B (x4.trans): lanes 0-15 k-rows 0-15 at n+0, lanes 16-31 at n+8; the
    // warp's 64 columns are box wn.
    const uint32_t b_thr = smem_u32(smem_b) + wn * Cfg::B_BOX_BYTES + (lane & 15) * 128 + sw;

    uint32_t af[2][MT][4];
    uint32_t bf[2][NT][2];
    auto load_frags = [&](int buf, int stage, int kk) {
      const uint32_t a = (a_thr + stage * Cfg::A_BYTES) ^ (kk << 5);
#pragma unroll
      for (int i = 0; i < MT; ++i) ldmatrix_x4(af[buf][i], a + i * 16 * 128);
      const uint32_t b = b_thr + stage * Cfg::B_BYTES + kk * 16 * 128;
#pragma unroll
      for (int j = 0; j < NT / 2; ++j) load_b_pair(bf[buf], j, b ^ (j << 5));
    };

    float acc[MT][NT][4];
    int stage = 0;
    uint32_t phase = 0;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      zero_acc(acc);
      mbar_wait(&full_bar[stage], phase);
      load_frags(0, stage, 0);
      for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          const int done = stage;  // the stage this slice's fragments came from
          if (kk + 1 < BK / 16) {
            load_frags((kk + 1) & 1, stage, kk + 1);
          } else {
            if (++stage == STAGES) { stage = 0; phase ^= 1; }
            if (kt + 1 < k_tiles) {
              mbar_wait(&full_bar[stage], phase);
              load_frags(0, stage, 0);
            }
          }
          mma_slice<T>(acc, af[kk & 1], bf[kk & 1]);
          // These warp-wide mma read the stage's last fragments, so every
          // ldmatrix of the warp from it has completed: release it.
          if (kk + 1 == BK / 16 && lane == 0) mbar_arrive(&empty_bar[done]);
        }
      }

      int tm, tn;
      coords(tile, tm, tn);
      const int g = lane >> 2, t = lane & 3;
      if constexpr (STAGED) {
        // Each 16 x 64 block of the warp's C goes out through its 2 KB of
        // shared memory as whole 128-byte row segments (staged_epilogue.cuh).
        const uint32_t epi = smem_u32(smem_epi) + warp * Cfg::EPI_BYTES;
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          stage_c_block(epi, lane, [&](int j, int h) { return pack2<T>(acc[i][j][2 * h], acc[i][j][2 * h + 1]); });
          store_c_block(epi, lane, C, tm * BM + wm * 64 + i * 16, tn * BN + wn * 64, M, N);
        }
        continue;
      }
#pragma unroll
      for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = tm * BM + wm * 64 + i * 16 + g + 8 * h;
          if (row >= M) continue;
          T* crow = C + static_cast<int64_t>(row) * N;
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const int col = tn * BN + wn * 64 + j * 8 + 2 * t;  // even; N % 8 == 0 covers col + 1
            if (col < N)
              *reinterpret_cast<uint32_t*>(crow + col) = pack2<T>(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
          }
        }
      }
    }
  }
}

}  // namespace ksuite_gemm
