// Hopper GEMM: C = A @ B, A (M x K), B (K x N), C (M x N), all row-major,
// float16 or bfloat16 in and out, fp32 accumulation.  Needs sm_90a.
//
// Design (one CTA per SM, persistent over output tiles in groups of 8
// tile-rows, so that the ~132 tiles in flight share A and B panels in L2):
//   * Warpgroup 0 is the producer (one thread issues TMA loads; setmaxnreg.dec
//     to 40 registers); warpgroups 1 and 2 consume (setmaxnreg.inc to 232),
//     each owning 64 rows of the 128-row tile and all BN columns: a 64 x BN
//     fp32 accumulator, BN/2 registers a thread.
//   * K is walked 64 at a time through a ring of STAGES shared-memory stages:
//     A (128 x 64, one TMA box) and B (BN/64 boxes of 64 x 64), 128-byte
//     swizzle.  Two mbarriers a stage: `full` (expect_tx + the TMA bytes) and
//     `empty` (an arrival from each of the 8 consumer warps once its wgmmas
//     that read the stage have completed).
//   * Consumers issue 4 wgmma.mma_async m64nBNk16 a stage as one group and
//     wait_group 1: stage s runs on the tensor cores while the warp waits for
//     stage s+1's data, and s-1 is released once its group is complete.  The
//     producer runs ahead across tiles: the next tile's loads overlap this
//     tile's epilogue.
//   * Epilogue: fp32 -> 16-bit, masked against M and N.  Tiles 0-2 store from
//     the accumulators (4 bytes a store: a warp store writes 16 bytes into each
//     of 8 rows); tiles 3-5 and 9-10 pass each warp's 16 x 64 blocks through 2 KB of
//     swizzled shared memory and store 128-byte row segments (staged_epilogue.cuh).
//     TMA zero-fills out-of-range boxes, so ragged M, N and K need no other care.
//
// TMA needs 16-byte row strides: K and N multiples of 8, both base pointers
// 16-byte aligned.  Tiles (`tile`; -1 picks by a wave-count model, mirrored
// in implementations/gemm/cuda_wgmma.py):
//   0: 128 x 256 x 64, 4 stages (48 KB each), wgmma m64n256k16
//   1: 128 x 128 x 64, 6 stages (32 KB each), wgmma m64n128k16
//   2: 128 x  64 x 64, 8 stages (24 KB each), wgmma m64n64k16 (skinny M: more CTAs)
//   3, 4, 5: tiles 0, 1, 2 with the staged epilogue (16 KB more shared memory)
//   6, 7, 8: tiles 3, 4, 5 with a stream-K last wave (below)
//   9: 128 x 192 x 64, 5 stages (40 KB each), wgmma m64n192k16, staged epilogue
//  10: tile 9 with a stream-K last wave
//  11, 12: tiles 3 and 9 on clusters of two CTAs that share B (below)
// The widths between the powers of two are for the wave count: 1792 x 5304
// is 294 tiles of 128 x 256 (2.2 waves on 132 SMs) but 392 of 128 x 192 (2.97).
//
// Clusters of two (tiles 11 and 12).  At full rate a 128 x 256 tile takes
// ~48 KB a k-step from L2, ~60 GB/s an SM; rows that start off 128-byte lines
// add a fifth 32-byte sector to each four.  A cluster runs two vertically
// adjacent tiles, which read the same B: each CTA loads its own A and half of
// every B box (32 of its 64 k-rows) and multicasts that half into both CTAs'
// stage, so B crosses from L2 once for the pair.  A stage is refilled only
// once the consumers of both CTAs released it: each consumer warp arrives on
// the empty barrier of both.  The pair walks pairs of tile-rows; the second
// tile of the last pair may lie past M (its A is not loaded, its C not
// stored).  No stream-K: the grid is whole clusters, as many as fit at once.
//
// Stream-K last wave (tiles 6-8).  With T tiles on P SMs, T % P tiles would
// form a last wave that leaves most SMs idle (266 tiles on 132 SMs: three
// rounds for 2.02 rounds of work).  Instead the first T % P + P tiles (in the
// grouped order; all T when T < P) are cut along K: their k-steps, tile after
// tile, are dealt to the CTAs in equal contiguous ranges, and the remaining
// tiles, a whole number of waves, follow one a CTA.  A range starts and ends
// inside tiles: a CTA whose piece of a tile starts past k = 0 (its first
// piece) writes its fp32 accumulators to a workspace slot of its own and
// raises its flag; the CTA that ran the tile from k = 0 (its last piece) waits
// for the flags of the CTAs after it whose ranges reach into the tile, adds
// their slots in CTA order (deterministic) and stores C.  A CTA waits only on
// CTAs of higher index for pieces they run first, and the grid is at most one
// CTA an SM, so every wait ends.  Flags are split_counters.h's, left at zero.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "ksuite/bulk.cuh"
#include "ksuite/common.cuh"
#include "operands.h"
#include "split_counters.h"
#include "split_k.cuh"
#include "staged_epilogue.cuh"
#include "tma_map.h"
#include "wgmma_ptx.cuh"

namespace {

using namespace ksuite_wgmma;

constexpr int BM = 128;                  // rows of a CTA tile (2 consumer warpgroups x 64)
constexpr int BK = 64;                   // k per stage: 64 x 2 bytes = one 128-byte swizzle row
constexpr int CONSUMERS = 2;             // consumer warpgroups
constexpr int THREADS = 128 * (1 + CONSUMERS);
constexpr int CONSUMER_WARPS = 4 * CONSUMERS;
constexpr int GROUP_M = 8;               // tile-rows per rasterisation group
constexpr int PRODUCER_REGS = 40;
constexpr int CONSUMER_REGS = 232;       // 128*40 + 256*232 = 64512 <= 65536
constexpr int NUM_TILES = 13;           // see the tile list above
constexpr int EPI_BYTES = ksuite_gemm::STAGE_BYTES_PER_WARP;  // a warp's staging of C
constexpr int SK_BARRIER = 1;           // named barrier of the 256 consumer threads

static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * CONSUMERS <= 65536, "register budget");

template <int BN>
struct Config {
  static constexpr int STAGES = BN == 256 ? 4 : BN == 192 ? 5 : BN == 128 ? 6 : 8;
  static constexpr int A_BYTES = BM * BK * 2;             // 16 KB
  static constexpr int B_CHUNK_BYTES = BK * 64 * 2;       // one 64 (k) x 64 (n) box: 8 KB
  static constexpr int B_BYTES = BK * BN * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;   // a full stage's expect_tx count
  // +1024: the dynamic buffer is aligned up to 1024 bytes inside the kernel.
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;
  static constexpr int SMEM_BYTES_STAGED = SMEM_BYTES + CONSUMER_WARPS * EPI_BYTES;
};

// Tile `tile` in groups of `group_m` tile-rows, column by column within a group.
__device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int group_m, int& tm, int& tn) {
  const int per_group = group_m * tiles_n;
  const int group = tile / per_group;
  const int first_m = group * group_m;
  const int rows = min(tiles_m - first_m, group_m);
  const int in_group = tile - group * per_group;
  tm = first_m + in_group % rows;
  tn = in_group / rows;
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi, bool bf16) {
  if (bf16) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// The first of the stream-K k-steps (sk_total of them) dealt to CTA `cta` of `ctas`.
__device__ __forceinline__ int64_t sk_begin(int cta, int64_t sk_total, int ctas) {
  return sk_total * cta / ctas;
}

// The pieces of work of worker `me` of `workers` (a CTA, or a cluster of
// them), in order: its stream-K range of the first sk_tiles tiles, then whole
// tiles, one a worker.
struct Units {
  int64_t it, hi;
  int next_tile, num_tiles, k_tiles, workers;

  __device__ __forceinline__ Units(int num_tiles_, int sk_tiles, int k_tiles_, int me, int workers_)
      : num_tiles(num_tiles_), k_tiles(k_tiles_), workers(workers_) {
    const int64_t sk_total = static_cast<int64_t>(sk_tiles) * k_tiles;
    it = sk_begin(me, sk_total, workers);
    hi = sk_begin(me + 1, sk_total, workers);
    next_tile = sk_tiles + me;
  }

  // The next piece: tile, and its k-steps [k_begin, k_end); false when done.
  __device__ __forceinline__ bool next(int& tile, int& k_begin, int& k_end) {
    if (it < hi) {
      tile = static_cast<int>(it / k_tiles);
      k_begin = static_cast<int>(it - static_cast<int64_t>(tile) * k_tiles);
      const int64_t left = hi - it;
      k_end = left < k_tiles - k_begin ? k_begin + static_cast<int>(left) : k_tiles;
      it += k_end - k_begin;
      return true;
    }
    if (next_tile >= num_tiles) return false;
    tile = next_tile;
    k_begin = 0;
    k_end = k_tiles;
    next_tile += workers;
    return true;
  }
};

__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync %0, %1;" :: "n"(SK_BARRIER), "n"(128 * CONSUMERS) : "memory");
}

template <int BN, bool BF16, bool STAGED, int CLUSTER>
__global__ void __launch_bounds__(THREADS, 1)
gemm_wgmma_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                  void* __restrict__ c_ptr, int M, int N, int K, uint32_t b_lbo, uint32_t b_sbo,
                  int sk_tiles, float* __restrict__ sk_ws, int* __restrict__ sk_flags) {
  using Cfg = Config<BN>;
  constexpr int STAGES = Cfg::STAGES;
  constexpr bool PAIR = CLUSTER == 2;
  static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of one or two CTAs");

  __shared__ __align__(8) uint64_t full_bar[STAGES];
  __shared__ __align__(8) uint64_t empty_bar[STAGES];
  extern __shared__ uint8_t smem_raw[];
  // 128-byte swizzle atoms are 8 rows x 128 bytes; the descriptors' base
  // offset of 0 and TMA's address-based swizzle agree only from a 1024-byte
  // boundary, so the stages start on one (every stage size is a multiple of 1024).
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  uint8_t* smem_a = smem;                              // STAGES x [128 rows][128 bytes]
  uint8_t* smem_b = smem + STAGES * Cfg::A_BYTES;      // STAGES x BN/64 x [64 k-rows][128 bytes]
  uint8_t* smem_epi = smem_b + STAGES * Cfg::B_BYTES;   // STAGED: 8 warps x [16 rows][128 bytes]

  const int tiles_m = (M + BM - 1) / BM;
  const int tiles_n = (N + BN - 1) / BN;
  const int k_tiles = (K + BK - 1) / BK;
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  // A pair's work units are pairs of tile-rows; its CTAs take the two tiles.
  const uint32_t rank = PAIR ? cluster_ctarank() : 0;
  const int unit_rows = PAIR ? (tiles_m + 1) / 2 : tiles_m;
  const int num_units = unit_rows * tiles_n;
  const int worker = PAIR ? blockIdx.x / 2 : blockIdx.x;
  const int workers = PAIR ? gridDim.x / 2 : gridDim.x;
  auto coords = [&](int unit, int& tm, int& tn) {
    tile_coords(unit, unit_rows, tiles_n, GROUP_M / CLUSTER, tm, tn);
    tm = tm * CLUSTER + static_cast<int>(rank);
  };

  if (threadIdx.x == 0) {
    tma_prefetch_desc(&tma_a);
    tma_prefetch_desc(&tma_b);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full_bar[s], 1);                  // the producer's arrive.expect_tx
      // one arrival per consumer warp (of both CTAs of a pair)
      mbar_init(&empty_bar[s], CONSUMER_WARPS * CLUSTER);
    }
    mbar_init_fence();
  }
  // A pair's barriers must be initialised before the other CTA multicasts or arrives.
  if constexpr (PAIR) {
    cluster_sync();
  } else {
    __syncthreads();
  }

  if (warpgroup == 0) {
    // ---------------------------------------------------------------- producer
    setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      Units units(num_units, sk_tiles, k_tiles, worker, workers);
      int tile, k_begin, k_end;
      while (units.next(tile, k_begin, k_end)) {
        int tm, tn;
        coords(tile, tm, tn);
        const int m0 = tm * BM, n0 = tn * BN;
        // B boxes that start at or beyond column N are not loaded at all: the
        // columns they would hold only feed output columns >= N, which are
        // never stored, so stale shared memory there is harmless.  (Partly
        // out-of-range boxes are loaded; TMA zero-fills their tail.)  Both
        // CTAs of a pair have the same n0.
        const int chunks = min(BN / 64, (N - n0 + 63) / 64);
        const bool a_rows = tm < tiles_m;  // false only for a pair's tile past M
        const uint32_t bytes = (a_rows ? Cfg::A_BYTES : 0) + chunks * Cfg::B_CHUNK_BYTES;
        for (int kt = k_begin; kt < k_end; ++kt) {
          // Slot free (in both CTAs of a pair)?  (First pass: parity 1 of a
          // fresh barrier is complete.)
          mbar_wait(&empty_bar[stage], phase ^ 1);
          mbar_arrive_expect_tx(&full_bar[stage], bytes);
          const int k0 = kt * BK;
          // A box: 64 k (inner, 128 bytes) x 128 rows of A.
          if (a_rows) tma_load_2d(smem_a + stage * Cfg::A_BYTES, &tma_a, &full_bar[stage], k0, m0);
          // B boxes: 64 n (inner, 128 bytes) x 64 k-rows each, one per 64
          // columns; in a pair each CTA loads k-rows [32 rank, 32 rank + 32) of
          // every box into both CTAs (4 KB in: a multiple of the 1024-byte
          // swizzle atom, so the halves land as the whole box would).
#pragma unroll
          for (int j = 0; j < BN / 64; ++j) {
            if (j < chunks) {
              uint8_t* dst = smem_b + stage * Cfg::B_BYTES + j * Cfg::B_CHUNK_BYTES;
              if constexpr (PAIR) {
                tma_load_2d_multicast(dst + rank * (Cfg::B_CHUNK_BYTES / 2), &tma_b, &full_bar[stage],
                                      n0 + 64 * j, k0 + static_cast<int>(rank) * (BK / 2), 0x3);
              } else {
                tma_load_2d(dst, &tma_b, &full_bar[stage], n0 + 64 * j, k0);
              }
            }
          }
          if (++stage == STAGES) { stage = 0; phase ^= 1; }
        }
      }
    }
  } else {
    // ---------------------------------------------------------------- consumers
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = warpgroup - 1;                         // which 64-row half of the tile
    const int warp = (threadIdx.x / 32) % 4;              // warp within the warpgroup
    const int lane = threadIdx.x % 32;

    // Descriptors for stage 0; stage s adds s * bytes >> 4 to the address field.
    //
    // A (K-major, 128B swizzle): row r of the stage's A box is the 128-byte line
    // at r * 128; 8-row groups (core-matrix rows) are SBO = 1024 bytes apart;
    // LBO is unused for K-major swizzled layouts (16 by convention).  This
    // warpgroup's 64 rows start 64 * 128 = 8192 bytes in (a multiple of 1024,
    // so the swizzle phase is unchanged).  The k16 slice kk is 32 bytes into
    // each 128-byte line: the descriptor's start address moves by 32 bytes and
    // the hardware applies the XOR swizzle to the full address, exactly as TMA
    // did when it wrote the line.
    //
    // B (MN-major, transpose-b = 1, 128B swizzle): in the canonical layout
    // ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO)), the 64 contiguous n of one k sit
    // in one 128-byte line; the 8 k-lines of a core group are 128 bytes apart
    // (implicit), the next 8 k are SBO = 1024 bytes further, and the next 64
    // columns of n are LBO = one 64 x 64 box = 8192 bytes further.  A k16 slice
    // kk starts 16 k-lines = 2048 bytes in.
    const uint64_t desc_a0 = make_desc_sw128(smem_u32(smem_a + cw * 64 * 128), 16, 1024);
    // (b_lbo, b_sbo) = (8192, 1024) from the host; see gemm_wgmma() for the diagnostic switch.
    const uint64_t desc_b0 = make_desc_sw128(smem_u32(smem_b), b_lbo, b_sbo);

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

    int stage = 0;
    uint32_t phase = 0;
    const int64_t sk_total = static_cast<int64_t>(sk_tiles) * k_tiles;
    const int ct = threadIdx.x - 128;                     // consumer thread, 0..255
    // This CTA's workspace slot: each consumer thread's accumulators, 4 at a
    // time, thread-minor (coalesced 16-byte stores and loads, no reshuffle).
    auto slot = [&](int cta) {
      return reinterpret_cast<float4*>(sk_ws) + static_cast<size_t>(cta) * (CONSUMERS * 128) * (BN / 8);
    };
    // Stage s is free once this warp's wgmmas that read it are complete: one
    // arrival on its empty barrier (in a pair, on both CTAs' barriers).
    auto release = [&](int s) {
      if (lane == 0) mbar_arrive(&empty_bar[s]);
      if (PAIR && lane == 1) mbar_arrive_cluster(&empty_bar[s], rank ^ 1u);
    };
    Units units(num_units, sk_tiles, k_tiles, worker, workers);
    int tile, k_begin, k_end;
    while (units.next(tile, k_begin, k_end)) {
      int tm, tn;
      coords(tile, tm, tn);
      int prev_stage = 0;
      for (int kt = k_begin; kt < k_end; ++kt) {
        mbar_wait(&full_bar[stage], phase);
        const uint64_t da = desc_a0 + static_cast<uint64_t>((stage * Cfg::A_BYTES) >> 4);
        const uint64_t db = desc_b0 + static_cast<uint64_t>((stage * Cfg::B_BYTES) >> 4);
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) fence_operand(acc[i]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          // The first product of a piece overwrites the accumulators.
          wgmma_m64k16<BN, BF16>(acc, da + 2 * kk, db + 128 * kk, kt != k_begin || kk != 0);
        }
        wgmma_commit();
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) fence_operand(acc[i]);
        // The previous stage's group is complete once at most this one is pending.
        wgmma_wait<1>();
        if (kt > k_begin) release(prev_stage);
        prev_stage = stage;
        if (++stage == STAGES) { stage = 0; phase ^= 1; }
      }
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) fence_operand(acc[i]);
      if (k_end > k_begin) release(prev_stage);

      if (k_begin > 0) {
        // A piece after k = 0: the partial sum goes to this CTA's slot.
        float4* mine = slot(blockIdx.x);
#pragma unroll
        for (int q = 0; q < BN / 8; ++q) {
          mine[q * (CONSUMERS * 128) + ct] = make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
        }
        __threadfence();
        consumers_sync();
        if (ct == 0) atomicExch(sk_flags + blockIdx.x, 1);
        continue;
      }
      if (k_end < k_tiles) {
        // The piece from k = 0 of a cut tile: add the later pieces, CTA by CTA.
        const int64_t tile_end = static_cast<int64_t>(tile + 1) * k_tiles;
        for (int j = blockIdx.x + 1; j < static_cast<int>(gridDim.x) && sk_begin(j, sk_total, gridDim.x) < tile_end; ++j) {
          if (ct == 0) {
            while (ksuite_gemm_split::load_acquire(sk_flags + j) == 0) __nanosleep(32);
            sk_flags[j] = 0;
          }
          consumers_sync();
          const float4* theirs = slot(j);
#pragma unroll
          for (int q = 0; q < BN / 8; ++q) {
            const float4 v = __ldcg(theirs + q * (CONSUMERS * 128) + ct);
            acc[4 * q] += v.x;
            acc[4 * q + 1] += v.y;
            acc[4 * q + 2] += v.z;
            acc[4 * q + 3] += v.w;
          }
        }
      }

      // Epilogue.  Accumulator fragment of m64nNk16 (fp32): warp w of the
      // warpgroup owns rows 16w..16w+15; register i holds
      //   row = 16w + lane/4 + 8 * ((i / 2) % 2)
      //   col = 8 * (i / 4) + 2 * (lane % 4) + (i % 2)
      // so registers 4j, 4j+1 are two adjacent columns of one row and 4j+2,
      // 4j+3 the same columns 8 rows lower.
      uint16_t* c = static_cast<uint16_t*>(c_ptr);
      if constexpr (STAGED) {
        // 64-column block b of the warp's 16 rows: n8 block j of it is in
        // registers 4(8b + j) + 2h, + 1 (row lane / 4 + 8h); out through the
        // warp's 2 KB of shared memory (staged_epilogue.cuh).
        const uint32_t epi = smem_u32(smem_epi) + (cw * 4 + warp) * EPI_BYTES;
#pragma unroll
        for (int blk = 0; blk < BN / 64; ++blk) {
          ksuite_gemm::stage_c_block(epi, lane, [&](int j, int h) {
            return pack2(acc[4 * (8 * blk + j) + 2 * h], acc[4 * (8 * blk + j) + 2 * h + 1], BF16);
          });
          ksuite_gemm::store_c_block(epi, lane, c, tm * BM + cw * 64 + warp * 16, tn * BN + blk * 64, M, N);
        }
        continue;
      }
      const int row0 = tm * BM + cw * 64 + warp * 16 + lane / 4;
      const int col0 = tn * BN + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row < M) {
          uint16_t* crow = c + static_cast<size_t>(row) * N;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int col = col0 + 8 * j;
            // N is a multiple of 8 and col is even, so col < N covers col + 1.
            if (col < N) {
              *reinterpret_cast<uint32_t*>(crow + col) = pack2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], BF16);
            }
          }
        }
      }
    }
  }
  // No CTA of a pair may exit while the other can still multicast into its
  // shared memory or arrive on its barriers.
  if constexpr (PAIR) cluster_sync();
}

// ------------------------------------------------------------------ host side

int tile_bn(int tile) {
  return tile == 11 ? 256 : tile >= 9 ? 192 : tile % 3 == 0 ? 256 : tile % 3 == 1 ? 128 : 64;
}
bool tile_stream_k(int tile) { return (tile >= 6 && tile <= 8) || tile == 10; }
bool tile_pair(int tile) { return tile >= 11; }

// Fewest (waves x per-tile cost): a wave is one tile per SM (the grid is
// persistent), and a 128 x BN tile costs about BN plus a per-tile overhead
// that smaller BN pay more often (relative weights 40 : 31 : 22 : 13 for
// BN = 256 : 192 : 128 : 64).  Ties go to the wider tile.
int auto_tile(int64_t M, int64_t N, int sms) {
  const int tiles_by_width[4] = {0, 9, 1, 2};
  const int weight[4] = {40, 31, 22, 13};
  int best = 0;
  int64_t best_cost = -1;
  for (int i = 0; i < 4; ++i) {
    const int bn = tile_bn(tiles_by_width[i]);
    const int64_t tiles = ((M + BM - 1) / BM) * ((N + bn - 1) / bn);
    const int64_t cost = ((tiles + sms - 1) / sms) * weight[i];
    if (best_cost < 0 || cost < best_cost) { best = tiles_by_width[i]; best_cost = cost; }
  }
  return best;
}

// Tiles that stream-K cuts (the first T % P + P of T tiles on P SMs, or all T
// when T < P), and the grid: one CTA an SM, fewer where the cut k-steps would
// give a CTA fewer than SK_MIN_STEPS.  (0, min(T, P)): no cut, where the tiles
// fill whole waves.
constexpr int SK_MIN_STEPS = 4;

void sk_plan(int64_t tiles, int64_t k_tiles, int sms, int& sk_tiles, int& grid) {
  sk_tiles = 0;
  grid = static_cast<int>(std::min<int64_t>(tiles, sms));
  if (tiles % sms == 0) return;
  if (tiles > sms) {
    sk_tiles = static_cast<int>(tiles % sms + sms);
    grid = sms;
    return;
  }
  const int64_t ctas = std::min<int64_t>(sms, tiles * k_tiles / SK_MIN_STEPS);
  if (ctas <= tiles) return;  // no more CTAs than tiles: nothing to gain
  sk_tiles = static_cast<int>(tiles);
  grid = static_cast<int>(ctas);
}

template <int BN, bool BF16, bool STAGED, int CLUSTER>
void launch(const CUtensorMap& ma, const CUtensorMap& mb, at::Tensor& c, int M, int N, int K, int sms,
            bool swap_b_desc, bool stream_k) {
  using Cfg = Config<BN>;
  auto kernel = gemm_wgmma_kernel<BN, BF16, STAGED, CLUSTER>;
  constexpr int smem_bytes = STAGED ? Cfg::SMEM_BYTES_STAGED : Cfg::SMEM_BYTES;
  // Per device and instantiation; cheap to repeat, so simply done every call.
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  const uint32_t lbo = Cfg::B_CHUNK_BYTES, sbo = 1024;
  const int64_t tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  if constexpr (CLUSTER == 2) {
    // One pair a unit of two tile-rows' tiles, as many pairs as are resident
    // at once (a cluster's CTAs share a GPC, so that can be fewer than sms / 2).
    // No stream-K.
    const int pairs = ksuite::bulk::max_active_clusters(kernel, THREADS, smem_bytes, 2);
    KSUITE_CHECK(pairs > 0, "gemm_wgmma: no cluster of two CTAs fits on this GPU");
    const int64_t units = (tiles_m + 1) / 2 * tiles_n;
    const auto grid = static_cast<unsigned>(2 * std::min<int64_t>(units, pairs));
    ksuite::launch_clustered(kernel, grid, THREADS, smem_bytes, 2, ksuite::current_stream(), ma, mb, c.data_ptr(), M,
                             N, K, swap_b_desc ? sbo : lbo, swap_b_desc ? lbo : sbo, 0, static_cast<float*>(nullptr),
                             static_cast<int*>(nullptr));
    return;
  }
  const int64_t tiles = tiles_m * tiles_n;
  int sk_tiles = 0, grid = static_cast<int>(std::min<int64_t>(tiles, sms));
  if (stream_k) sk_plan(tiles, (K + BK - 1) / BK, sms, sk_tiles, grid);
  at::Tensor ws;
  int* flags = nullptr;
  if (sk_tiles > 0) {
    ws = at::empty({static_cast<int64_t>(grid) * BM * BN}, c.options().dtype(at::kFloat));
    flags = ksuite_gemm_split::counters(grid);
  }
  kernel<<<grid, THREADS, smem_bytes, ksuite::current_stream()>>>(
      ma, mb, c.data_ptr(), M, N, K, swap_b_desc ? sbo : lbo, swap_b_desc ? lbo : sbo,
      sk_tiles, sk_tiles > 0 ? ws.data_ptr<float>() : nullptr, flags);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// One call's arguments, for the instantiation the tile picks.
struct Operands {
  const CUtensorMap& ma;
  const CUtensorMap& mb;
  at::Tensor& c;
  int m, n, k, sms;
  bool swap_b_desc, stream_k, bf16;
};

template <int BN, bool STAGED, int CLUSTER>
void launch_as(const Operands& o) {
  if (o.bf16) {
    launch<BN, true, STAGED, CLUSTER>(o.ma, o.mb, o.c, o.m, o.n, o.k, o.sms, o.swap_b_desc, o.stream_k);
  } else {
    launch<BN, false, STAGED, CLUSTER>(o.ma, o.mb, o.c, o.m, o.n, o.k, o.sms, o.swap_b_desc, o.stream_k);
  }
}

at::Tensor gemm_wgmma(const at::Tensor& a, const at::Tensor& b, int64_t tile) {
  ksuite_gemm_operands::check(a, b, "gemm_wgmma", /*strided_rows=*/true);
  KSUITE_CHECK(a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16,
              "gemm_wgmma: only float16 and bfloat16 are supported, got ", c10::toString(a.scalar_type()));
  KSUITE_CHECK(tile >= -1 && tile < NUM_TILES, "gemm_wgmma: tile must be -1 (automatic) or 0..",
              std::to_string(NUM_TILES - 1), ", got ", std::to_string(tile));
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  KSUITE_CHECK(K % 8 == 0 && N % 8 == 0,
              "gemm_wgmma: N and K must be multiples of 8 for TMA (16-byte row strides), got N=",
              std::to_string(N), " K=", std::to_string(K));
  // Rows may lie further apart than K or N (a view of wider rows: the
  // caller's copy of rows that start off 128-byte lines onto whole lines).
  const int64_t lda = M > 1 && K > 0 ? a.stride(0) : K, ldb = K > 1 && N > 0 ? b.stride(0) : N;
  KSUITE_CHECK(lda % 8 == 0 && ldb % 8 == 0, "gemm_wgmma: row strides must be multiples of 8 for TMA, got ",
              std::to_string(lda), " and ", std::to_string(ldb));

  const c10::cuda::CUDAGuard guard(a.device());
  KSUITE_CHECK(ksuite::compute_major() == 9, "gemm_wgmma: needs a Hopper GPU (sm_90), this one is sm_",
              std::to_string(ksuite::compute_major()), "x");
  at::Tensor c = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  if (K == 0) return c.zero_();
  KSUITE_CHECK(ksuite::aligned16(a.data_ptr()) && ksuite::aligned16(b.data_ptr()),
              "gemm_wgmma: a and b must start at 16-byte aligned addresses for TMA");

  const int sms = ksuite::sm_count();
  const int t = tile < 0 ? auto_tile(M, N, sms) : static_cast<int>(tile);
  const CUtensorMap ma = ksuite_hopper::make_map(a, M, K, BM, "gemm_wgmma", "a", lda);
  // A pair's CTAs each load half of a B box's k-rows.
  const CUtensorMap mb = ksuite_hopper::make_map(b, K, N, tile_pair(t) ? BK / 2 : BK, "gemm_wgmma", "b", ldb);
  const bool bf16 = a.scalar_type() == at::kBFloat16;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  // Diagnostic only: KSUITE_WGMMA_SWAP_B_DESC=1 swaps the B descriptor's
  // leading and stride byte offsets, the one convention here that the PTX
  // ISA's MN-major table fixes but no CPU check can confirm.  Off by default.
  const char* swap_env = std::getenv("KSUITE_WGMMA_SWAP_B_DESC");
  const bool sw = swap_env != nullptr && swap_env[0] != '\0' && swap_env[0] != '0';
  const bool sk = tile_stream_k(t);
  const Operands ops{ma, mb, c, m, n, k, sms, sw, sk, bf16};
  // The instantiation: tiles 0-5 as themselves (a stream-K tile runs its tile
  // 3-5), the 192-wide tiles, and the pairs.
  switch (tile_pair(t) ? (tile_bn(t) == 256 ? 7 : 8) : tile_bn(t) == 192 ? 6 : sk ? t - 3 : t) {
    case 0: launch_as<256, false, 1>(ops); break;
    case 1: launch_as<128, false, 1>(ops); break;
    case 2: launch_as<64, false, 1>(ops); break;
    case 3: launch_as<256, true, 1>(ops); break;
    case 4: launch_as<128, true, 1>(ops); break;
    case 5: launch_as<64, true, 1>(ops); break;
    case 6: launch_as<192, true, 1>(ops); break;
    case 7: launch_as<256, true, 2>(ops); break;
    default: launch_as<192, true, 2>(ops); break;
  }
  return c;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_wgmma(Tensor a, Tensor b, int tile=-1) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_wgmma", &gemm_wgmma);
}
