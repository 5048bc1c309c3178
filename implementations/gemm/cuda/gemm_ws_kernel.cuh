// The warp-specialised mma.sync GEMM of gemm_ws.cu (sm_90a): the same
// mma.sync m16n8k16 math as gemm_mma_kernel.cuh, fed by TMA instead of
// cp.async.
//
// C = A @ B, row-major A (M x K), B (K x N), C (M x N), float16 or bfloat16,
// fp32 accumulation; K and N multiples of 8, 16-byte aligned bases (TMA).
//
// Why: in gemm_mma_kernel.cuh the 8 warps that run the mma also issue every
// cp.async (with its address and bound arithmetic) and meet at a CTA barrier
// each k-tile, so one slow warp stalls all and 2 warps a scheduler have
// little else to issue while the tensor pipe waits.  Here:
//  - One thread of a producer warpgroup issues the TMA loads of a ring of
//    STAGES shared-memory stages: A as one box of 64 k (128 bytes) x BM
//    rows, B as BN/64 boxes of 64 n x 64 k-rows, all in the 128-byte
//    swizzle.  Two mbarriers a stage: `full` (expect_tx + the TMA bytes),
//    `empty` (one arrival from each consumer warp once it has read the stage).
//  - 8 consumer warps, 64 x 64 of C each (4 x 8 m16n8 fp32 fragments), only
//    wait on mbarriers, ldmatrix and mma: no CTA barrier in the main loop.
//    Fragments are double-buffered in registers across k16 slices and across
//    stages (the next stage's first slice is loaded before the last slice's
//    mma).  A stage is released after the mma that consumes its last
//    fragments has issued, so every ldmatrix from it has completed.
//  - Registers: a warp's registers come from its SM sub-partition's quarter
//    of the file, so 9 warps (3 on one sub-partition) would cap every thread
//    at 168 and spill the 128 accumulators and 64 fragment registers.  With
//    a whole producer warpgroup, setmaxnreg moves registers from it (40) to
//    the consumers (232): no spills.
//  - Persistent grid (one CTA an SM) over output tiles in groups of 8 tile
//    rows; the producer runs ahead across tile boundaries, so the next
//    tile's loads overlap this tile's epilogue (straight from registers,
//    4-byte stores masked by M and N).
//  - ldmatrix from the swizzled layout: the 16-byte chunk c of 128-byte row
//    r sits at chunk c ^ (r % 8).  A lane's row is fixed, so its chunk for
//    k16 slice kk is (2 kk + hi) ^ (r % 8) = 2 kk ^ (hi ^ r % 8): one XOR of
//    a per-lane base with kk << 5.  The eight rows of every ldmatrix phase
//    hit eight different chunks: no bank conflicts.
// Tried and dropped: clusters of two vertically adjacent tiles, each CTA
// loading half of their common B and multicasting it to both (B crosses L2
// once a pair).  On the H200 that was slower (384-413 TFLOP/s against
// 434-461 at 4096^3 and 8192^3 with the tune script): the pair's lockstep
// (a stage is refilled only once both CTAs freed it) cost more than the
// L2 traffic it saved.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "hopper.cuh"
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
  static constexpr int SMEM_BYTES = STAGES * (A_BYTES + B_BYTES) + 1024;  // + alignment slack
  static constexpr int MT = WM / 16, NT = WN / 8;
  static_assert(BM % 64 == 0 && BM <= 256, "one A box of at most 256 rows");
  static_assert(BN % 64 == 0 && CONSUMER_WARPS == 8, "8 consumer warps of 64 x 64");
};

// The 8 consumer warps meet (named barrier 1; the producer warpgroup is not in it).
__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }

// Spins until *p >= n (acquire, GPU scope).  The loop is inside the asm, so
// the compiler sees no data-dependent loop: a spin written in C++ made it
// treat the consumers as possibly diverged and put WARPSYNC before every
// later mma of the main loop.
__device__ __forceinline__ void wait_at_least(const int* p, int n) {
  asm volatile(
      "{\n"
      ".reg .pred more;\n"
      ".reg .b32 v;\n"
      "SPIN_%=:\n"
      "ld.acquire.gpu.global.b32 v, [%0];\n"
      "setp.lt.s32 more, v, %1;\n"
      "@more nanosleep.u32 64;\n"
      "@more bra SPIN_%=;\n"
      "}\n" :: "l"(p), "r"(n) : "memory");
}

// The stream-K remainder (tiles 2 and 3 of gemm_ws.cu): the output tiles of
// the last partial wave would leave SMs idle while the rest finish one more
// tile each.  Instead the first `dp_tiles` tiles go round-robin as whole
// tiles (full waves), and the k-tiles of the last `sk_tiles` tiles, laid end
// to end, are cut into gridDim.x equal ranges, one a CTA.  A tile cut between
// ranges is finished by the CTA that ran its k = 0 part, which is always the
// end of that CTA's range: the others (at most two, the host checks) wrote
// their fp32 partial sums to `ws` and counted themselves in `flags` first.
struct WsSplit {
  int dp_tiles = 0, sk_tiles = 0;
  float4* ws = nullptr;  // [sk_tiles][2 slots][32 float4][256 consumer threads]
  int* flags = nullptr;  // [sk_tiles] contributors arrived; the finisher resets to 0
};

// One piece of work: k-tiles [kb, ke) of output tile `tile`.
struct WsWork {
  int tile, kb, ke;
};

// The same sequence of WsWork for the producer and the consumers of a CTA.
// 32-bit: the host splits only when sk_tiles * k_tiles * grid < 2^31.
struct WsSchedule {
  int dp_tiles, k_tiles, grid, next_dp, units, u, u_end;
  __device__ WsSchedule(const WsSplit& sp, int k_tiles_, int cta, int grid_)
      : dp_tiles(sp.dp_tiles), k_tiles(k_tiles_), grid(grid_), next_dp(cta), units(sp.sk_tiles * k_tiles_),
        u(units * cta / grid_), u_end(units * (cta + 1) / grid_) {}
  // The CTA whose range holds unit v (ranges start at floor(c * units / grid)).
  __device__ int owner(int v) const { return ((v + 1) * grid - 1) / units; }
  __device__ bool next(WsWork& w) {
    if (next_dp < dp_tiles) {
      w = {next_dp, 0, k_tiles};
      next_dp += grid;
      return true;
    }
    if (u >= u_end) return false;
    const int local = u / k_tiles, kb = u % k_tiles;
    const int ke = min(k_tiles, kb + (u_end - u));
    w = {dp_tiles + local, kb, ke};
    u += ke - kb;
    return true;
  }
};

template <typename T, typename Cfg, bool STREAM_K>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
gemm_ws_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
               T* __restrict__ C, int M, int N, int K, const WsSplit split) {
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

  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
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
      WsSchedule sched(split, k_tiles, blockIdx.x, gridDim.x);
      WsWork w;
      while (sched.next(w)) {
        if (!STREAM_K && w.tile >= split.dp_tiles) break;
        int tm, tn;
        coords(w.tile, tm, tn);
        const int m0 = tm * BM, n0 = tn * BN;
        // B boxes from column N on are not loaded: they only feed columns
        // that are never stored.  Rows, columns and k past the matrices in
        // a loaded box are zero-filled by TMA and still counted in bytes.
        const int boxes = min(BOXES, (N - n0 + 63) / 64);
        const uint32_t bytes = Cfg::A_BYTES + boxes * Cfg::B_BOX_BYTES;
        for (int kt = w.kb; kt < w.ke; ++kt) {
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
    const WsSchedule sched(split, k_tiles, blockIdx.x, gridDim.x);
    // k-tiles [w.kb, w.ke) of tile w.tile, stored or handed on.  Called from
    // two loops (whole tiles, then this CTA's stream-K range) rather than one
    // loop over sched.next(): with that one, ptxas took the consumers for
    // possibly diverged and put WARPSYNC before the main loop's mma.
    auto run = [&](const WsWork w) {
      const int n_k = w.ke - w.kb;
      zero_acc(acc);
      mbar_wait(&full_bar[stage], phase);
      load_frags(0, stage, 0);
      for (int kt = 0; kt < n_k; ++kt) {
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          const int done = stage;  // the stage this slice's fragments came from
          if (kk + 1 < BK / 16) {
            load_frags((kk + 1) & 1, stage, kk + 1);
          } else {
            if (++stage == STAGES) { stage = 0; phase ^= 1; }
            if (kt + 1 < n_k) {
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

      if (STREAM_K && (w.kb != 0 || w.ke != k_tiles)) {
        // A stream-K piece of a tile cut between CTAs.
        const int local = w.tile - split.dp_tiles;
        const int first = local * k_tiles;
        const int finisher = sched.owner(first);
        const int ctid = warp * 32 + lane;
        float4* slots = split.ws + static_cast<size_t>(local) * 2 * 32 * 256 + ctid;
        if (w.kb != 0) {
          // Not the k = 0 part: leave the partial sums for the finisher.
          float4* mine = slots + (static_cast<int>(blockIdx.x) - finisher - 1) * 32 * 256;
#pragma unroll
          for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
              __stcg(mine + (i * NT + j) * 256, make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]));
          __threadfence();
          consumer_sync();
          if (ctid == 0) atomicAdd(split.flags + local, 1);
          return;
        }
        const int others = sched.owner(first + k_tiles - 1) - finisher;
        if (ctid == 0) {
          wait_at_least(split.flags + local, others);
          split.flags[local] = 0;  // for the next launch (stream-ordered after this one)
        }
        consumer_sync();
        for (int o = 0; o < others; ++o) {
          const float4* theirs = slots + o * 32 * 256;
#pragma unroll
          for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j) {
              const float4 v = __ldcg(theirs + (i * NT + j) * 256);
              acc[i][j][0] += v.x;
              acc[i][j][1] += v.y;
              acc[i][j][2] += v.z;
              acc[i][j][3] += v.w;
            }
        }
      }

      int tm, tn;
      coords(w.tile, tm, tn);
      const int g = lane >> 2, t = lane & 3;
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
    };
    for (int tile = blockIdx.x; tile < split.dp_tiles; tile += gridDim.x) run(WsWork{tile, 0, k_tiles});
    if (STREAM_K)
      for (int u = sched.u; u < sched.u_end;) {
        const int kb = u % k_tiles, ke = min(k_tiles, kb + (sched.u_end - u));
        run(WsWork{split.dp_tiles + u / k_tiles, kb, ke});
        u += ke - kb;
      }
  }
}

}  // namespace ksuite_gemm
