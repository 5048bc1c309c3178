// The tensor-core GEMM kernel of gemm_mma.cu, free of torch headers so that
// it can be compiled alone for register and SASS inspection.  C = A @ B,
// row-major, float16 or bfloat16 in, fp32 accumulation, rounded to the input dtype.
//
// Per CTA a BM x BN tile of C; per warp a 64 x 64 sub-tile held as 4 x 8
// m16n8 fp32 accumulator fragments, 128 registers a thread:
//  - K is walked BK at a time through a STAGES-deep ring of shared-memory
//    buffers filled by cp.async (16-byte chunks, zero-filled out of range);
//    wait_group STAGES-2 and one __syncthreads per BK step.
//  - Shared rows are padded by 8 elements: row strides of 80/144/272/528 bytes
//    put the eight 16-byte rows of every ldmatrix phase (and of every
//    epilogue store phase) in eight distinct bank groups, and keep every
//    ldmatrix address a per-thread base plus a compile-time offset: no
//    address arithmetic in the inner loop.
//  - The A and B fragments are double-buffered in registers: the ldmatrix of
//    k16 slice kk+1 is issued before the 32 mma of slice kk, so its latency
//    hides behind them.  The barrier for the next BK step sits just before
//    the last slice's mma, whose fragments are already loaded, and the
//    cp.async of the tile STAGES-1 ahead is issued right after it.
//  - One global pointer per operand, advanced by BK a step; M/N bounds are
//    per-thread bit masks computed once, the K bound one compare a chunk; an
//    invalid chunk reads the matrix base with src-size 0 (16 zero bytes).
//  - CTAs run in groups of GROUP_M row tiles down each column band, so the
//    resident CTAs share their A rows and B columns in L2.
//  - Epilogue: accumulators rounded, staged through (padded) shared memory
//    and written as coalesced 16-byte rows.
// ALIGNED=false (K or N not a multiple of 8, or a base not 16-byte aligned):
// guarded, synchronous 2-byte loads fill shared memory (the edge path, not the
// fast one) and C is stored element by element from shared memory.
// SPLIT=true (split-K, for grids of few tiles and a long K; split_plan in
// gemm_mma.cu decides): grid.y = S slices of K, slice z walking k-tiles
// [z * kt / S, (z + 1) * kt / S) of the kt = ceil(K / BK), so every slice has
// floor or ceil of kt / S of them.  Each slice stores its fp32 accumulators
// to the workspace W in their fragment layout (per warp, fragment and lane
// one float4: a warp store is 512 contiguous bytes, and the reduction reads
// each thread's own fragments back the same way), skipping fragments wholly
// past M or N; then the tile's arrival counter (split_k.cuh) picks the last
// slice to finish, which adds the S partials in slice order (the same bits
// whichever slice is last), resets the counter and runs the usual epilogue.
// SPLIT=false is the kernel without any of this.
#pragma once

#include <cstdint>

#include "ksuite/mma_ptx.cuh"
#include "raster.cuh"
#include "split_k.cuh"
#include "warp_tile.cuh"

namespace ksuite_gemm {

using namespace ksuite::ptx;

template <int BM_, int BN_, int BK_, int STAGES_, int MIN_BLOCKS_, bool SPREAD_ = false>
struct TileConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, STAGES = STAGES_, MIN_BLOCKS = MIN_BLOCKS_;
  // SPREAD: the cp.async of a k-tile are issued in KG-1 parts, one after the
  // ldmatrix of each of the first KG-1 k16 slices, instead of all at slice 0.
  // The compiler keeps every ldmatrix behind the shared-memory writes that
  // precede it in program order and spreads those writes over the mma that
  // follow, so with one batch the ldmatrix of slice 2 end up right before
  // their mma; in parts, each slice's copies sit in the shadow of that
  // slice's mma and the next slice's ldmatrix still issue a slice early.
  static constexpr bool SPREAD = SPREAD_;
  static constexpr int COPY_PARTS = SPREAD ? BK / 16 - 1 : 1;
  static constexpr int WM = 64, WN = 64;  // warp tile
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int A_LD = BK + 8;  // padded row lengths, in elements
  static constexpr int B_LD = BN + 8;
  static constexpr int C_LD = BN + 8;
  static constexpr int A_STAGE = BM * A_LD;  // elements
  static constexpr int B_STAGE = BK * B_LD;
  static constexpr int PIPE_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;
  static constexpr int C_BYTES = BM * C_LD * 2;
  static constexpr int SMEM_BYTES = PIPE_BYTES > C_BYTES ? PIPE_BYTES : C_BYTES;
  static constexpr int MT = WM / 16;  // m16 fragments per warp
  static constexpr int NT = WN / 8;   // n8 fragments per warp
  static constexpr int KG = BK / 16;  // k16 slices per BK step
  // cp.async mapping: thread t copies chunks t, t+THREADS, ...; a row of A has
  // A_CPR 16-byte chunks, so thread t's chunks sit in column (t % A_CPR) of
  // rows t / A_CPR + i * A_RSTEP (likewise for B).
  static constexpr int A_CPR = BK / 8, B_CPR = BN / 8;
  static constexpr int A_RSTEP = THREADS / A_CPR, B_RSTEP = THREADS / B_CPR;
  static constexpr int A_COPIES = BM * BK / 8 / THREADS;
  static constexpr int B_COPIES = BK * BN / 8 / THREADS;
  static_assert(BM % WM == 0 && BN % WN == 0 && BK % 16 == 0);
  static_assert(THREADS % A_CPR == 0 && THREADS % B_CPR == 0);
  static_assert(A_COPIES * THREADS * 8 == BM * BK && B_COPIES * THREADS * 8 == BK * BN);
  static_assert(A_COPIES <= 32 && B_COPIES <= 32);
  // Fragment buffer b holds slice kk with kk % 2 == b, across k-tiles too.
  static_assert(STAGES >= 2 && KG % 2 == 0);
  static_assert(COPY_PARTS >= 1);
};

constexpr int GROUP_M = 8;

// Eight consecutive elements src[0..7], of which the first `valid` (0..8)
// exist, to 16-byte aligned shared memory at dst, zero-filling the rest
// (nothing is read past them: with valid == 0, src may point anywhere).
// Raw 16-bit patterns: 0 is +0.0 in both float16 and bfloat16.
template <typename T>
__device__ __forceinline__ void copy8_guarded(uint32_t dst, const T* src, int valid) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  uint32_t w[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const uint32_t lo = 2 * e < valid ? s[2 * e] : 0u;
    const uint32_t hi = 2 * e + 1 < valid ? s[2 * e + 1] : 0u;
    w[e] = lo | (hi << 16);
  }
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" ::"r"(dst), "r"(w[0]), "r"(w[1]), "r"(w[2]),
               "r"(w[3])
               : "memory");
}

// W: the split's fp32 workspace, BM * BN floats a (tile, slice), tile-major;
// counters: one a tile.  Both unused (null) when !SPLIT.
template <typename T, typename Cfg, bool ALIGNED, bool SPLIT = false>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
gemm_mma_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                int M, int N, int K, float* __restrict__ W, int* __restrict__ counters) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WM, WN = Cfg::WN;
  constexpr int STAGES = Cfg::STAGES, THREADS = Cfg::THREADS, KG = Cfg::KG;
  constexpr int A_LD = Cfg::A_LD, B_LD = Cfg::B_LD, C_LD = Cfg::C_LD, MT = Cfg::MT, NT = Cfg::NT;
  constexpr uint32_t A_STAGE_B = Cfg::A_STAGE * 2, B_STAGE_B = Cfg::B_STAGE * 2;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t sA0 = smem_addr(smem_raw);
  const uint32_t sB0 = sA0 + STAGES * A_STAGE_B;

  int tm, tn;
  grouped_tile(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN, GROUP_M, tm, tn);
  const int m0 = tm * BM, n0 = tn * BN;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;

  // ---- global -> shared copies: per-thread constants ----
  const int a_row = tid / Cfg::A_CPR, a_col = (tid % Cfg::A_CPR) * 8;
  const int b_row = tid / Cfg::B_CPR, b_col = (tid % Cfg::B_CPR) * 8;
  uint32_t a_rows_ok = 0;  // bit i: chunk i's row of A is inside M
#pragma unroll
  for (int i = 0; i < Cfg::A_COPIES; ++i)
    a_rows_ok |= (m0 + a_row + i * Cfg::A_RSTEP < M ? 1u : 0u) << i;
  const bool b_col_ok = n0 + b_col < N;
  const int64_t a_step = static_cast<int64_t>(Cfg::A_RSTEP) * K;  // elements between chunk rows
  const int64_t b_step = static_cast<int64_t>(Cfg::B_RSTEP) * N;
  const int64_t b_ktile = static_cast<int64_t>(BK) * N;
  // This CTA's k-tiles: all of them, or with SPLIT slice blockIdx.y's share.
  const int ktiles_all = (K + BK - 1) / BK;
  int kt_first = 0, ktiles = ktiles_all;
  if constexpr (SPLIT) {
    kt_first = static_cast<int>(static_cast<int64_t>(blockIdx.y) * ktiles_all / gridDim.y);
    ktiles = static_cast<int>(static_cast<int64_t>(blockIdx.y + 1) * ktiles_all / gridDim.y) - kt_first;
  }
  const int k_left = K - kt_first * BK;  // columns of A from this CTA's first k-tile on
  const T* gA = A + (static_cast<int64_t>(min(m0 + a_row, M - 1)) * K + a_col + kt_first * BK);
  const T* gB = B + (static_cast<int64_t>(b_row + kt_first * BK) * N + min(n0 + b_col, N - 1));
  const uint32_t sA_thr = (a_row * A_LD + a_col) * 2;
  const uint32_t sB_thr = (b_row * B_LD + b_col) * 2;

  // Loads k-tile `kt` (its first column k0 = kt*BK; gA/gB already point at it)
  // into stage `slot`: part `part` of Cfg::COPY_PARTS (the chunks of A, then
  // of B, are numbered 0 .. A_COPIES + B_COPIES - 1 and split evenly); the
  // last part advances gA and gB.
  // `part` is a constant after unrolling, so the chunk selection folds away.
  auto load_stage = [&](int slot, int k0, int part) {
    constexpr int PARTS = Cfg::COPY_PARTS, NCH = Cfg::A_COPIES + Cfg::B_COPIES;
    const int LO = part * NCH / PARTS, HI = (part + 1) * NCH / PARTS;
    const int kres = k_left - k0;  // columns of A / rows of B left from k0
    const uint32_t sa = sA0 + slot * A_STAGE_B + sA_thr;
    const uint32_t sb = sB0 + slot * B_STAGE_B + sB_thr;
    if constexpr (ALIGNED && PARTS > 1) {
#pragma unroll
      for (int i = 0; i < Cfg::A_COPIES; ++i) {
        if (i < LO || i >= HI) continue;
        const bool ok = ((a_rows_ok >> i) & 1u) && a_col < kres;
        cp_async_16(sa + i * Cfg::A_RSTEP * A_LD * 2, ok ? gA + i * a_step : A, ok);
      }
#pragma unroll
      for (int i = 0; i < Cfg::B_COPIES; ++i) {
        if (Cfg::A_COPIES + i < LO || Cfg::A_COPIES + i >= HI) continue;
        const bool ok = b_col_ok && b_row + i * Cfg::B_RSTEP < kres;
        cp_async_16(sb + i * Cfg::B_RSTEP * B_LD * 2, ok ? gB + i * b_step : B, ok);
      }
    } else if constexpr (ALIGNED) {
      const T* p = gA;
#pragma unroll
      for (int i = 0; i < Cfg::A_COPIES; ++i) {
        const bool ok = ((a_rows_ok >> i) & 1u) && a_col < kres;
        cp_async_16(sa + i * Cfg::A_RSTEP * A_LD * 2, ok ? p : A, ok);
        p += a_step;
      }
      const T* q = gB;
#pragma unroll
      for (int i = 0; i < Cfg::B_COPIES; ++i) {
        const bool ok = b_col_ok && b_row + i * Cfg::B_RSTEP < kres;
        cp_async_16(sb + i * Cfg::B_RSTEP * B_LD * 2, ok ? q : B, ok);
        q += b_step;
      }
    } else {
      static_assert(ALIGNED || PARTS == 1, "the guarded path loads a stage in one part");
      const int a_valid = max(0, min(8, kres - a_col));
      const T* p = gA;
#pragma unroll
      for (int i = 0; i < Cfg::A_COPIES; ++i) {
        const int v = ((a_rows_ok >> i) & 1u) ? a_valid : 0;
        copy8_guarded(sa + i * Cfg::A_RSTEP * A_LD * 2, p, v);
        p += a_step;
      }
      const int b_valid = max(0, min(8, N - (n0 + b_col)));
      const T* q = gB;
#pragma unroll
      for (int i = 0; i < Cfg::B_COPIES; ++i) {
        const int v = b_row + i * Cfg::B_RSTEP < kres ? b_valid : 0;
        copy8_guarded(sb + i * Cfg::B_RSTEP * B_LD * 2, q, v);
        q += b_step;
      }
    }
    if (part == PARTS - 1) {
      gA += BK;
      gB += b_ktile;
    }
  };

  // ---- shared -> registers: per-thread ldmatrix bases ----
  // A (x4): lanes 0-15 address rows 0-15 at k+0, lanes 16-31 the same rows at
  // k+8 -> a0..a3 of the m16k16 fragment.
  const uint32_t a_frag_thr = ((wm * WM + (lane & 15)) * A_LD + (lane >> 4) * 8) * 2;
  // B (x4, transposed): lanes 0-15 address k rows 0-15 at n+0, lanes 16-31 the
  // same at n+8 -> b0,b1 of two adjacent n8 fragments.
  const uint32_t b_frag_thr = ((lane & 15) * B_LD + wn * WN + (lane >> 4) * 8) * 2;

  uint32_t af[2][MT][4];
  uint32_t bf[2][NT][2];
  auto load_frags = [&](int buf, uint32_t sa, uint32_t sb, int kk) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
      ldmatrix_x4(af[buf][i], sa + (i * 16 * A_LD + kk * 16) * 2);
#pragma unroll
    for (int j = 0; j < NT / 2; ++j) load_b_pair(bf[buf], j, sb + (kk * 16 * B_LD + j * 16) * 2);
  };

  float acc[MT][NT][4];
  zero_acc(acc);

  // Prologue: STAGES-1 k-tiles in flight, one commit group each (empty past
  // the end, so that the group count, and with it every wait, stays uniform).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) {
#pragma unroll
      for (int part = 0; part < Cfg::COPY_PARTS; ++part) load_stage(s, s * BK, part);
    }
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>();
  __syncthreads();

  int read_slot = 0, write_slot = STAGES - 1;
  uint32_t sa_rd = sA0 + a_frag_thr, sb_rd = sB0 + b_frag_thr;
  load_frags(0, sa_rd, sb_rd, 0);

  for (int kt = 0; kt < ktiles; ++kt) {
#pragma unroll
    for (int kk = 0; kk < KG; ++kk) {
      if (kk == KG - 1) {
        // Groups committed: STAGES-1+kt+1; allowing STAGES-2 pending means
        // k-tile kt+1 has landed.  The barrier publishes every thread's copies
        // and, since all ldmatrix of k-tile kt are issued by now, frees its
        // slot for the copy issued at kk == 0 of the next step.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        read_slot = read_slot == STAGES - 1 ? 0 : read_slot + 1;
        sa_rd = sA0 + read_slot * A_STAGE_B + a_frag_thr;
        sb_rd = sB0 + read_slot * B_STAGE_B + b_frag_thr;
      }
      // The k-tile STAGES-1 ahead in one part, at slice 0 (its slot was freed
      // by the previous k-tile's barrier).
      auto copy_whole = [&]() {
        if (kk == 0) {
          const int next = kt + STAGES - 1;
          if (next < ktiles) load_stage(write_slot, next * BK, 0);
          cp_async_commit();
          write_slot = write_slot == STAGES - 1 ? 0 : write_slot + 1;
        }
      };
      // The guarded copies pass through registers (64 loads a thread a
      // k-tile, all in flight before their stores).  In the split kernel,
      // whose slice bounds take registers too, they go before the next
      // slice's fragments are loaded, so that the loads share the registers
      // with one fragment buffer rather than two.  The stores wait for the
      // loads either way, and the fragments still load a slice ahead of
      // their mma.
      constexpr bool COPY_FIRST = !ALIGNED && SPLIT;
      if constexpr (COPY_FIRST) copy_whole();
      // Next slice's fragments (the next k-tile's first slice at kk == KG-1;
      // past the last k-tile they are read and never used).
      load_frags((kk + 1) & 1, sa_rd, sb_rd, (kk + 1) % KG);
      if constexpr (Cfg::COPY_PARTS == 1 && !COPY_FIRST) {
        copy_whole();
      } else if constexpr (Cfg::COPY_PARTS > 1) {
        // Part kk of the k-tile STAGES-1 ahead (its slot was freed by the
        // previous k-tile's barrier); committed as one group after the last part.
        if (kk < Cfg::COPY_PARTS && kt + STAGES - 1 < ktiles)
          load_stage(write_slot, (kt + STAGES - 1) * BK, kk);
        if (kk == Cfg::COPY_PARTS - 1) {
          cp_async_commit();
          write_slot = write_slot == STAGES - 1 ? 0 : write_slot + 1;
        }
      }
      mma_slice<T>(acc, af[kk & 1], bf[kk & 1]);
    }
  }

  // ---- epilogue: round, stage the C tile in shared memory, store rows ----
  const int g = lane >> 2, t = lane & 3;
  const uint32_t sC = sA0;
  // Fragment (i, j) of this warp, rounded, into the staging (shared memory).
  auto stage = [&](int i, int j, float x0, float x1, float x2, float x3) {
    const int row = wm * WM + i * 16 + g, col = wn * WN + j * 8 + 2 * t;
    st_shared_b32(sC + (row * C_LD + col) * 2, pack2<T>(x0, x1));
    st_shared_b32(sC + ((row + 8) * C_LD + col) * 2, pack2<T>(x2, x3));
  };
  if constexpr (SPLIT) {
    // ---- split-K: this slice's partial out; the last slice adds them all ----
    cp_async_wait<0>();  // only empty groups remain
    constexpr int FRAG4 = 32;  // float4s of one fragment of one warp
    const int slices = gridDim.y, tile = blockIdx.x;
    const int64_t tile4 = BM * BN / 4;  // float4s of one partial
    // Thread (warp, lane)'s float4 of fragment f = i * NT + j of slice z is
    // element (tile * slices + z) * tile4 + (warp * MT * NT + f) * FRAG4 + lane of W.
    const float4* const mine = reinterpret_cast<const float4*>(W) + static_cast<int64_t>(tile) * slices * tile4 +
                               (warp * MT * NT * FRAG4 + lane);
    // A fragment whose 16 rows are all past M, or 8 columns all past N, is
    // neither stored nor read back (its values never reach C): with few rows
    // of C most of the tile is such padding.
    const int row_w = m0 + wm * WM, col_w = n0 + wn * WN;
    auto inside = [&](int f) { return row_w + f / NT * 16 < M && col_w + f % NT * 8 < N; };
    float4* const part = const_cast<float4*>(mine) + blockIdx.y * tile4;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        if (inside(i * NT + j))
          part[(i * NT + j) * FRAG4] = make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]);
    // Arrive: every thread's stores fenced, then one count for the CTA.  The
    // flag goes through the (idle) pipeline buffers: every warp is past its
    // last ldmatrix at the first barrier, and only empty cp.async groups remain.
    volatile int* const last = reinterpret_cast<int*>(smem_raw);
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      const bool is_last = ksuite_gemm_split::arrive(&counters[tile]) == slices - 1;
      if (is_last) counters[tile] = 0;  // no other slice of this launch touches it again
      *last = is_last;
    }
    __syncthreads();
    if (!*last) return;
    __threadfence();  // every thread's reads below after thread 0's acquire
    __syncthreads();  // the flag is read before the staging overwrites it
    // C's tile = the S partials added in slice order (from zero), FB
    // fragments at a time (FB x the z unroll float4 loads in flight a
    // thread), read from L2 (.cg: never a stale L1 line), each thread its own
    // fragments; the accumulators are dead here.
    constexpr int FB = 4;
    static_assert(MT * NT % FB == 0);
#pragma unroll
    for (int f0 = 0; f0 < MT * NT; f0 += FB) {
      float4 sum[FB];
#pragma unroll
      for (int q = 0; q < FB; ++q) sum[q] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
      for (int z = 0; z < slices; ++z) {
#pragma unroll
        for (int q = 0; q < FB; ++q) {
          if (!inside(f0 + q)) continue;
          const float4 v = __ldcg(mine + z * tile4 + (f0 + q) * FRAG4);
          sum[q].x += v.x;
          sum[q].y += v.y;
          sum[q].z += v.z;
          sum[q].w += v.w;
        }
      }
#pragma unroll
      for (int q = 0; q < FB; ++q) stage((f0 + q) / NT, (f0 + q) % NT, sum[q].x, sum[q].y, sum[q].z, sum[q].w);
    }
  } else {
    cp_async_wait<0>();  // only empty groups remain
    __syncthreads();     // every warp is done with the pipeline buffers
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) stage(i, j, acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]);
  }
  __syncthreads();
  constexpr int CPR = BN / 8;  // 16-byte chunks per C row
#pragma unroll 4
  for (int c = tid; c < BM * CPR; c += THREADS) {
    const int r = c / CPR, cc = (c % CPR) * 8;
    const int gr = m0 + r, gc = n0 + cc;
    if (gr >= M || gc >= N) continue;
    const uint4 v4 = ld_shared_v4(sC + (r * C_LD + cc) * 2);
    const uint32_t v[4] = {v4.x, v4.y, v4.z, v4.w};
    T* p = C + (static_cast<int64_t>(gr) * N + gc);
    if constexpr (ALIGNED) {
      *reinterpret_cast<uint4*>(p) = v4;
    } else {
      uint16_t* q = reinterpret_cast<uint16_t*>(p);
      const int n = min(8, N - gc);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (e < n) q[e] = static_cast<uint16_t>(v[e >> 1] >> (16 * (e & 1)));
    }
  }
}

}  // namespace ksuite_gemm
