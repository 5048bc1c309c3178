// The attention forward kernel as a template over its tiling, shared by the
// translation units that instantiate it (flash_attention_*.cu) and described
// by flash_attention.cu, which defines the op.  O = softmax(Q K^T / sqrt(D)) V,
// FlashAttention-2 style on tensor cores (mma.sync m16n8k16, fp32
// accumulation); q, k, v, o are (B, H, S, D) contiguous, float16 or bfloat16.
//
// Tiling (template Cfg): a CTA takes BM = WARPS * 16 * MT queries of one
// (batch, head); each warp owns 16 * MT consecutive query rows end to end
// (MT m16 tiles), so the softmax statistics of a row never leave the four
// threads of a quad that hold it.  With MT = 2 every K or V fragment a warp
// reads from shared memory feeds two MMAs, half the shared-memory traffic per
// FLOP of MT = 1, which at D = 128 reads 32 KB through ldmatrix per 0.5 MFLOP
// of a warp: more than the 128 B/clk of an SM can feed the tensor cores.  Q is
// kept in registers (QREG) or, where they do not allow it (D = 128 with
// MT = 2: O alone takes 128), read again from shared memory for every K tile.
//
// K and V stream through shared memory in tiles of BN keys, double buffered
// with cp.async and one barrier per tile: at the top of tile j the copy of
// tile j has landed and every warp is done with tile j - 1, so tile j + 1 is
// issued into that buffer at once and has the whole of tile j's math to land.
//
// Per tile: S = Q K^T in accumulator registers; causal and ragged masks only
// on the tiles that need them (a warp skips tiles wholly above its rows);
// online softmax in fp32, exponentials as ex2 of one FFMA (log2(e) / sqrt(D)
// folded in); P rounded to 16 bits in registers and used straight as the A
// operand of P V (two n8 accumulator tiles are the m16k16 A layout); O
// rescaled by exp2(m_old - m_new).  Causal CTAs start with the heaviest query
// blocks.  Shared rows are padded by 8 elements (16 bytes): every ldmatrix
// phase and the O staging stores are conflict-free.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "flash_attention.h"
#include "ksuite/mma_ptx.cuh"

namespace ksuite_attn {

using namespace ksuite::ptx;

// PIPE, LAZY and STAGES select the second kernel (flash_fwd_pipe_kernel
// below); the first four tilings of each head dim leave them at their
// defaults and run flash_fwd_kernel.
template <int D_, int MT_, int WARPS_, int BN_, bool QREG_, int MINB_, bool PIPE_ = false,
          bool LAZY_ = false, int STAGES_ = 2>
struct Cfg {
  static constexpr int D = D_, MT = MT_, WARPS = WARPS_, BN = BN_, MINB = MINB_, STAGES = STAGES_;
  static constexpr bool QREG = QREG_, PIPE = PIPE_, LAZY = LAZY_;
  static constexpr int THREADS = WARPS * 32;
  static constexpr int BM = WARPS * 16 * MT;
  static constexpr int LD = D + 8;  // padded row, in elements
  // Q, then STAGES K tiles and STAGES V tiles; 2-byte elements.
  static constexpr int SMEM = (BM + 2 * STAGES * BN) * LD * 2;
  static_assert(D % 16 == 0 && BN % 16 == 0, "tile sizes");
  static_assert(STAGES >= 2, "at least double buffered");
  static_assert(!PIPE || LAZY, "the pipelined kernel always rescales lazily");
};

// ROWS x D elements of src (row stride D, already at the tile's first row)
// into dst (row stride D + 8).  Rows at or past `rows` are zero-filled, so
// they add nothing to P V and are masked out of S.  Where the threads divide
// a row's 16-byte chunks, each thread copies the same column of rows r0,
// r0 + THREADS / CHUNKS, ...: one pointer and one shared address per tile,
// the rest immediate offsets.
template <int ROWS, int D, int THREADS, typename T>
__device__ __forceinline__ void load_tile(uint32_t dst, const T* src, int rows, int tid) {
  constexpr int CHUNKS = D / 8;  // 16-byte copies per row
  constexpr int STEP = THREADS / CHUNKS;
  if constexpr (THREADS % CHUNKS == 0 && ROWS % STEP == 0) {
    const int r0 = tid / CHUNKS, col = (tid % CHUNKS) * 8;
    const T* p = src + r0 * D + col;
    dst += (r0 * (D + 8) + col) * 2;
    if (rows >= ROWS) {
#pragma unroll
      for (int i = 0; i < ROWS / STEP; ++i) cp_async_16(dst + i * STEP * (D + 8) * 2, p + i * STEP * D, true);
    } else {
#pragma unroll
      for (int i = 0; i < ROWS / STEP; ++i) {
        const bool ok = r0 + i * STEP < rows;
        cp_async_16(dst + i * STEP * (D + 8) * 2, ok ? p + i * STEP * D : src, ok);
      }
    }
  } else {
    // rows that do not split evenly over the threads (D = 96: 12 chunks):
    // chunk by chunk, each thread every THREADS-th
    static_assert(ROWS * CHUNKS % THREADS == 0, "whole copies per thread");
#pragma unroll
    for (int i = 0; i < ROWS * CHUNKS / THREADS; ++i) {
      const int c = tid + i * THREADS, r = c / CHUNKS, col = (c % CHUNKS) * 8;
      const bool ok = r < rows;
      cp_async_16(dst + (r * (D + 8) + col) * 2, ok ? src + r * D + col : src, ok);
    }
  }
}

// The epilogue of both kernels: normalise this warp's rows of O by their
// sums, stage them in the warp's own rows of sQ (read by no other warp, and by
// this one no more), then 16-byte coalesced stores.  o, l_run: the warp's
// accumulators and this thread's share of each row's sum; w0, wrow: the
// warp's first row in the sequence and in the CTA's block.
template <typename T, class C>
__device__ __forceinline__ void store_output(const float (&o)[C::MT][C::D / 8][4], const float (&l_run)[C::MT][2],
                                             T* sQ, T* O, int S, int w0, int wrow, int lane) {
  constexpr int D = C::D, MT = C::MT, LD = C::LD;
  constexpr int DN = D / 8;
  constexpr int WROWS = 16 * MT;
  const int g = lane >> 2, t = lane & 3;
  __syncwarp();
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = l_run[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv[h] = l > 0.f ? 1.f / l : 0.f;
    }
    T* srow = sQ + (wrow + mt * 16 + g) * LD + 2 * t;
#pragma unroll
    for (int i = 0; i < DN; ++i) {
      *reinterpret_cast<uint32_t*>(srow + i * 8) = pack2<T>(o[mt][i][0] * inv[0], o[mt][i][1] * inv[0]);
      *reinterpret_cast<uint32_t*>(srow + 8 * LD + i * 8) =
          pack2<T>(o[mt][i][2] * inv[1], o[mt][i][3] * inv[1]);
    }
  }
  __syncwarp();
  constexpr int CHUNKS = D / 8;
#pragma unroll
  for (int i = 0; i < WROWS * CHUNKS / 32; ++i) {
    const int c = lane + i * 32;
    const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
    if (w0 + r < S)
      *reinterpret_cast<uint4*>(O + static_cast<int64_t>(w0 + r) * D + col) =
          *reinterpret_cast<const uint4*>(sQ + (wrow + r) * LD + col);
  }
}

template <typename T, class C>
__global__ void __launch_bounds__(C::THREADS, C::MINB)
flash_fwd_kernel(const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,
                 T* __restrict__ O, int S, float scale_log2, bool causal) {
  constexpr int D = C::D, MT = C::MT, BN = C::BN, BM = C::BM, LD = C::LD, THREADS = C::THREADS;
  constexpr int DK = D / 16;  // k16 steps of Q K^T
  constexpr int DN = D / 8;   // n8 fragments of O
  constexpr int SN = BN / 8;  // n8 fragments of S
  constexpr int WROWS = 16 * MT;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * LD;
  T* sV = sK + 2 * BN * LD;

  // Causal CTAs differ in work by up to S / BN tiles; the heaviest (last)
  // query blocks go first so that light ones fill the last wave.
  const int q_blocks = gridDim.x;
  const int qb = causal ? q_blocks - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  const int q0 = qb * BM;
  const int64_t base = static_cast<int64_t>(blockIdx.y) * S * D;
  Q += base;
  K += base;
  V += base;
  O += base;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wrow = warp * WROWS;  // this warp's first row within the CTA's block
  const int w0 = q0 + wrow;       // ... and in the sequence

  const int kv_end = causal ? min(S, q0 + BM) : S;
  const int n_tiles = (kv_end + BN - 1) / BN;

  // One commit group per tile: {Q, K0, V0}, then {K(j+1), V(j+1)} from tile j.
  load_tile<BM, D, THREADS>(smem_addr(sQ), Q + static_cast<int64_t>(q0) * D, S - q0, tid);
  load_tile<BN, D, THREADS>(smem_addr(sK), K, S, tid);
  load_tile<BN, D, THREADS>(smem_addr(sV), V, S, tid);
  cp_async_commit();

  uint32_t qf[C::QREG ? MT : 1][C::QREG ? DK : 1][4];
  float o[MT][DN][4];
  zero_acc(o);
  float m_run[MT][2], l_run[MT][2];  // running max of raw scores; this thread's share of the sum
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m_run[mt][h] = -INFINITY;
      l_run[mt][h] = 0.f;
    }

  for (int j = 0; j < n_tiles; ++j) {
    const int k0 = j * BN, slot = j & 1;
    cp_async_wait<0>();  // tile j landed (this thread's copies)...
    __syncthreads();     // ...and everyone's; all warps are done with tile j - 1
    if (j + 1 < n_tiles) {
      const int64_t off = static_cast<int64_t>(k0 + BN) * D;
      load_tile<BN, D, THREADS>(smem_addr(sK + (slot ^ 1) * BN * LD), K + off, S - k0 - BN, tid);
      load_tile<BN, D, THREADS>(smem_addr(sV + (slot ^ 1) * BN * LD), V + off, S - k0 - BN, tid);
    }
    cp_async_commit();
    if constexpr (C::QREG) {
      if (j == 0) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int kk = 0; kk < DK; ++kk)
            ldmatrix_x4(qf[mt][kk],
                        smem_addr(sQ + (wrow + mt * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8));
      }
    }
    // Causal: every key of this tile is after every row of this warp (never
    // the case for tile 0, so the Q registers above are always loaded).
    if (causal && k0 > w0 + WROWS - 1) continue;

    // S = Q K^T for this warp's rows x BN keys.  K is [key][d] in shared
    // memory, already the "col" layout of the B operand.
    float s[MT][SN][4];
    zero_acc(s);
    const T* kt = sK + slot * BN * LD;
#pragma unroll
    for (int kk = 0; kk < DK; ++kk) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (C::QREG) {
#pragma unroll
          for (int e = 0; e < 4; ++e) qa[mt][e] = qf[mt][kk][e];
        } else {
          ldmatrix_x4(qa[mt], smem_addr(sQ + (wrow + mt * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8));
        }
      }
#pragma unroll
      for (int np = 0; np < SN / 2; ++np) {
        // matrices: keys 0-7 x d 0-7, keys 0-7 x d 8-15, keys 8-15 x d 0-7, keys 8-15 x d 8-15
        uint32_t r[4];
        const int key = np * 16 + (lane & 7) + (lane >> 4) * 8;
        ldmatrix_x4(r, smem_addr(kt + key * LD + kk * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<T>(s[mt][2 * np], qa[mt], r[0], r[1]);
          mma_16816<T>(s[mt][2 * np + 1], qa[mt], r[2], r[3]);
        }
      }
    }

    // Masks: keys past S (the ragged last tile), keys after the query (causal).
    if (k0 + BN > S || (causal && k0 + BN - 1 > w0)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < SN; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = k0 + i * 8 + 2 * t + (e & 1);
            const int row = w0 + mt * 16 + g + (e < 2 ? 0 : 8);
            if (col >= S || (causal && col > row)) s[mt][i][e] = -INFINITY;
          }
    }

    // Online softmax.  The four threads of a quad hold one row between them.
    // P is rounded to 16 bits as soon as it exists: pa[mt][kk] is the m16k16
    // A fragment of keys 16kk..16kk+15 (the accumulators of n8 tiles 2kk and
    // 2kk+1 have exactly its layout), half the registers of S.
    uint32_t pa[MT][BN / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float mx[2] = {m_run[mt][0], m_run[mt][1]};
#pragma unroll
      for (int i = 0; i < SN; ++i) {
        mx[0] = fmaxf(mx[0], fmaxf(s[mt][i][0], s[mt][i][1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[mt][i][2], s[mt][i][3]));
      }
      float alpha[2], m_scaled[2], row_sum[2] = {0.f, 0.f};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        // A row with no visible key yet keeps max -inf; subtracting 0 instead
        // keeps exp2 away from (-inf) - (-inf).  Key 0 is visible to every
        // query and tile 0 comes first, so this is only a guard.
        m_scaled[h] = (mx[h] == -INFINITY ? 0.f : mx[h]) * scale_log2;
        alpha[h] = ex2(fmaf(m_run[mt][h], scale_log2, -m_scaled[h]));  // 0 on the first tile
        m_run[mt][h] = mx[h];
      }
#pragma unroll
      for (int i = 0; i < SN; ++i) {
        const float p0 = ex2(fmaf(s[mt][i][0], scale_log2, -m_scaled[0]));
        const float p1 = ex2(fmaf(s[mt][i][1], scale_log2, -m_scaled[0]));
        const float p2 = ex2(fmaf(s[mt][i][2], scale_log2, -m_scaled[1]));
        const float p3 = ex2(fmaf(s[mt][i][3], scale_log2, -m_scaled[1]));
        row_sum[0] += p0 + p1;
        row_sum[1] += p2 + p3;
        pa[mt][i / 2][(i & 1) * 2] = pack2<T>(p0, p1);
        pa[mt][i / 2][(i & 1) * 2 + 1] = pack2<T>(p2, p3);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) l_run[mt][h] = l_run[mt][h] * alpha[h] + row_sum[h];
#pragma unroll
      for (int i = 0; i < DN; ++i) {
        o[mt][i][0] *= alpha[0];
        o[mt][i][1] *= alpha[0];
        o[mt][i][2] *= alpha[1];
        o[mt][i][3] *= alpha[1];
      }
    }

    // O += P V.
    const T* vt = sV + slot * BN * LD;
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        // V is [key][d]: row-major B, so transpose on load.
        uint32_t r[4];
        ldmatrix_x4_trans(r, smem_addr(vt + (kk * 16 + (lane & 15)) * LD + dp * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<T>(o[mt][2 * dp], pa[mt][kk], r[0], r[1]);
          mma_16816<T>(o[mt][2 * dp + 1], pa[mt][kk], r[2], r[3]);
        }
      }
    }
  }
  cp_async_wait<0>();  // only empty groups remain; leave nothing in flight
  store_output<T, C>(o, l_run, sQ, O, S, w0, wrow, lane);
}

// The second kernel: the same tiling, data layout and epilogue as
// flash_fwd_kernel, with two changes to the loop.
//
// Lazy rescaling.  The exponentials are taken against a reference max per row
// (log2 units) that moves only when a tile's max exceeds it by more than
// LAZY_LOG2 (8, so P <= 2^8: far inside fp32 for O and l, and bf16/fp16 round
// P relative to its size either way).  Each thread takes the max of its own
// scores (no shuffles) and the warp votes; only when some row of the warp has
// outgrown its reference (the first visible tile, and rarely after it) does the
// warp reduce the true row maxima over the quad, rescale O and l and take the
// exponentials again.  That drops the per-tile rescale of O (MT * D / 2 FMULs a
// thread) and the two quad shuffles per row from the common path.
//
// PIPE: P V lags Q K^T by one tile, so that in iteration j the warp's
// instruction stream holds the tensor-core work of P(j-1) V(j-1) and the
// softmax of S(j) (FFMA, ex2 on the SFU, pack) with no dependence between them,
// in one basic block: ptxas interleaves them, and the warp keeps the tensor
// cores fed through its own softmax instead of relying on the other warps of
// the SM being out of phase.  K and V then stream as separate stages, V one
// tile behind K: iteration j needs K(j) and V(j-1), and (STAGES deep) issues
// K(j + STAGES - 1) and V(j + STAGES - 2) into the slots iteration j - 1
// finished with.  It holds P of two tiles and S of one besides O, which is why
// it pairs with BN = 32 at MT = 2, D = 128.
constexpr float LAZY_LOG2 = 8.f;

template <typename T, class C>
__global__ void __launch_bounds__(C::THREADS, C::MINB)
flash_fwd_pipe_kernel(const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,
                      T* __restrict__ O, int S, float scale_log2, bool causal) {
  constexpr int D = C::D, MT = C::MT, BN = C::BN, BM = C::BM, LD = C::LD, THREADS = C::THREADS;
  constexpr int STAGES = C::STAGES;
  constexpr int DK = D / 16;  // k16 steps of Q K^T
  constexpr int DN = D / 8;   // n8 fragments of O
  constexpr int SN = BN / 8;  // n8 fragments of S
  constexpr int KP = BN / 16; // k16 steps of P V
  constexpr int WROWS = 16 * MT;
  constexpr int LAG = C::PIPE ? 1 : 0;  // P V of tile j runs in iteration j + LAG

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * LD;
  T* sV = sK + STAGES * BN * LD;

  const int q_blocks = gridDim.x;
  const int qb = causal ? q_blocks - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  const int q0 = qb * BM;
  const int64_t base = static_cast<int64_t>(blockIdx.y) * S * D;
  Q += base;
  K += base;
  V += base;
  O += base;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wrow = warp * WROWS;
  const int w0 = q0 + wrow;

  const int kv_end = causal ? min(S, q0 + BM) : S;
  const int n_tiles = (kv_end + BN - 1) / BN;
  // Whether this warp computes S for tile i: causal stops at the tile holding
  // its last row (a test, not a stored count: one register fewer to keep).
  auto warp_has = [&](int i) { return i < n_tiles && (!causal || i * BN <= w0 + WROWS - 1); };

  auto load_k = [&](int i) {
    load_tile<BN, D, THREADS>(smem_addr(sK + (i % STAGES) * BN * LD), K + static_cast<int64_t>(i) * BN * D,
                              S - i * BN, tid);
  };
  auto load_v = [&](int i) {
    load_tile<BN, D, THREADS>(smem_addr(sV + (i % STAGES) * BN * LD), V + static_cast<int64_t>(i) * BN * D,
                              S - i * BN, tid);
  };
  // Commit group i holds K(i) and V(i - LAG) (and Q in group 0); groups
  // 0..STAGES-2 here, group j + STAGES - 1 in iteration j.
  load_tile<BM, D, THREADS>(smem_addr(sQ), Q + static_cast<int64_t>(q0) * D, S - q0, tid);
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) {
    if (i < n_tiles) load_k(i);
    if (i - LAG >= 0 && i - LAG < n_tiles) load_v(i - LAG);
    cp_async_commit();
  }

  uint32_t qf[C::QREG ? MT : 1][C::QREG ? DK : 1][4];
  float o[MT][DN][4];
  zero_acc(o);
  // mref: the reference max of each row in log2 units (scores * scale_log2),
  // -inf until the row has seen a key; l_run: this thread's share of the sum.
  float mref[MT][2], l_run[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mref[mt][h] = -INFINITY;
      l_run[mt][h] = 0.f;
    }
  uint32_t pa[MT][KP][4];  // P of the tile whose P V is pending (PIPE), as m16k16 A fragments

  // S = Q K^T of tile j (this warp's rows x BN keys), masked.
  auto qk = [&](float (&s)[MT][SN][4], int j) {
    zero_acc(s);
    const T* kt = sK + (j % STAGES) * BN * LD;
#pragma unroll
    for (int kk = 0; kk < DK; ++kk) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (C::QREG) {
#pragma unroll
          for (int e = 0; e < 4; ++e) qa[mt][e] = qf[mt][kk][e];
        } else {
          ldmatrix_x4(qa[mt], smem_addr(sQ + (wrow + mt * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8));
        }
      }
#pragma unroll
      for (int np = 0; np < SN / 2; ++np) {
        uint32_t r[4];
        const int key = np * 16 + (lane & 7) + (lane >> 4) * 8;
        ldmatrix_x4(r, smem_addr(kt + key * LD + kk * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<T>(s[mt][2 * np], qa[mt], r[0], r[1]);
          mma_16816<T>(s[mt][2 * np + 1], qa[mt], r[2], r[3]);
        }
      }
    }
    const int k0 = j * BN;
    if (k0 + BN > S || (causal && k0 + BN - 1 > w0)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < SN; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = k0 + i * 8 + 2 * t + (e & 1);
            const int row = w0 + mt * 16 + g + (e < 2 ? 0 : 8);
            if (col >= S || (causal && col > row)) s[mt][i][e] = -INFINITY;
          }
    }
  };

  // O += P V for tile j, P in pa.
  auto pv = [&](int j) {
    const T* vt = sV + (j % STAGES) * BN * LD;
#pragma unroll
    for (int kk = 0; kk < KP; ++kk) {
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, smem_addr(vt + (kk * 16 + (lane & 15)) * LD + dp * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<T>(o[mt][2 * dp], pa[mt][kk], r[0], r[1]);
          mma_16816<T>(o[mt][2 * dp + 1], pa[mt][kk], r[2], r[3]);
        }
      }
    }
  };

  // P = exp2(S * scale_log2 - mref) into p, row sums into rs.
  auto exps = [&](const float (&s)[MT][SN][4], uint32_t (&p)[MT][KP][4], float (&rs)[MT][2]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      // A row that has seen no key keeps mref -inf; 0 instead keeps exp2 away
      // from (-inf) - (-inf) (its scores are all -inf: P = 0).
      const float m0 = mref[mt][0] == -INFINITY ? 0.f : mref[mt][0];
      const float m1 = mref[mt][1] == -INFINITY ? 0.f : mref[mt][1];
      rs[mt][0] = rs[mt][1] = 0.f;
#pragma unroll
      for (int i = 0; i < SN; ++i) {
        const float p0 = ex2(fmaf(s[mt][i][0], scale_log2, -m0));
        const float p1 = ex2(fmaf(s[mt][i][1], scale_log2, -m0));
        const float p2 = ex2(fmaf(s[mt][i][2], scale_log2, -m1));
        const float p3 = ex2(fmaf(s[mt][i][3], scale_log2, -m1));
        rs[mt][0] += p0 + p1;
        rs[mt][1] += p2 + p3;
        p[mt][i / 2][(i & 1) * 2] = pack2<T>(p0, p1);
        p[mt][i / 2][(i & 1) * 2 + 1] = pack2<T>(p2, p3);
      }
    }
  };

  // The softmax of one tile into p; O and l rescaled only when a row's max
  // moved past its reference by more than LAZY_LOG2 (then after whatever P V
  // precedes this call in program order, which the data dependence ensures).
  auto softmax = [&](const float (&s)[MT][SN][4], uint32_t (&p)[MT][KP][4]) {
    float tmax[MT][2];
    bool grow = false;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      tmax[mt][0] = tmax[mt][1] = -INFINITY;
#pragma unroll
      for (int i = 0; i < SN; ++i) {
        tmax[mt][0] = fmaxf(tmax[mt][0], fmaxf(s[mt][i][0], s[mt][i][1]));
        tmax[mt][1] = fmaxf(tmax[mt][1], fmaxf(s[mt][i][2], s[mt][i][3]));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) grow |= tmax[mt][h] * scale_log2 > mref[mt][h] + LAZY_LOG2;
    }
    // PIPE takes the exponentials against the old reference before the vote,
    // in the basic block of the P V before it, and again in the rare branch;
    // without PIPE there is nothing to overlap them with, so they wait for it.
    float rs[MT][2];
    if constexpr (C::PIPE) exps(s, p, rs);
    if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float mx = tmax[mt][h];
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float m_new = fmaxf(mref[mt][h], mx * scale_log2);
          // 0 for a row's first keys (mref -inf); 1 while it has none.
          const float alpha = m_new == -INFINITY ? 1.f : ex2(mref[mt][h] - m_new);
          mref[mt][h] = m_new;
          l_run[mt][h] *= alpha;
#pragma unroll
          for (int i = 0; i < DN; ++i) {
            o[mt][i][2 * h] *= alpha;
            o[mt][i][2 * h + 1] *= alpha;
          }
        }
      }
      if constexpr (C::PIPE) exps(s, p, rs);
    }
    if constexpr (!C::PIPE) exps(s, p, rs);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) l_run[mt][h] += rs[mt][h];
  };

  for (int j = 0; j < n_tiles + LAG; ++j) {
    cp_async_wait<STAGES - 2>();  // group j (K(j), V(j - LAG)) landed for this thread...
    __syncthreads();              // ...and for all; everyone is done with iteration j - 1
    {
      const int i = j + STAGES - 1;
      if (i < n_tiles) load_k(i);
      if (i - LAG < n_tiles) load_v(i - LAG);
      cp_async_commit();
    }
    if constexpr (C::QREG) {
      if (j == 0) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int kk = 0; kk < DK; ++kk)
            ldmatrix_x4(qf[mt][kk],
                        smem_addr(sQ + (wrow + mt * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8));
      }
    }
    const bool do_s = warp_has(j);                     // S(j) is not wholly above this warp's rows
    const bool do_pv = j >= LAG && warp_has(j - LAG);  // P(j - LAG) exists
    if constexpr (C::PIPE) {
      if (do_s) {
        float s[MT][SN][4];
        qk(s, j);
        uint32_t pn[MT][KP][4];
        if (do_pv) {
          pv(j - 1);  // independent of the softmax below until its rare rescale
          softmax(s, pn);
        } else {
          softmax(s, pn);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int kk = 0; kk < KP; ++kk)
#pragma unroll
            for (int e = 0; e < 4; ++e) pa[mt][kk][e] = pn[mt][kk][e];
      } else if (do_pv) {
        pv(j - 1);
      }
    } else {
      if (do_s) {
        float s[MT][SN][4];
        qk(s, j);
        softmax(s, pa);
        pv(j);
      }
    }
  }
  cp_async_wait<0>();  // only empty groups remain; leave nothing in flight
  store_output<T, C>(o, l_run, sQ, O, S, w0, wrow, lane);
}


// Launches one tiling; returns the first CUDA error (the caller raises it).
template <typename T, class C>
cudaError_t launch_cfg(const Args& a) {
  const int64_t B = a.B, H = a.H, S = a.S;
  auto kernel = [] {
    if constexpr (C::LAZY) return flash_fwd_pipe_kernel<T, C>;
    else return flash_fwd_kernel<T, C>;
  }();
  // More than 48 KiB of dynamic shared memory must be opted into per kernel.
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((S + C::BM - 1) / C::BM), static_cast<unsigned>(B * H));
  const float scale_log2 =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(C::D)) * 1.4426950408889634);  // log2(e)
  kernel<<<grid, C::THREADS, C::SMEM, a.stream>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<T*>(a.o), static_cast<int>(S), scale_log2, a.causal);
  return cudaGetLastError();
}

// The tilings the op offers, per head dim; index = the op's `variant`.
// Mirrored (descriptions, automatic choice) in __init__.py.
//   D = 128: 0: BM 128, 4 warps x 32 rows, BN 64, Q re-read from smem, 2 CTAs/SM
//            1: BM 256, 8 warps x 32 rows, BN 64, Q re-read from smem, 1 CTA/SM
//            2: BM 128, 8 warps x 16 rows, BN 64, Q in registers,      1 CTA/SM
//            3: BM 128, 4 warps x 32 rows, BN 32, Q re-read from smem, 2 CTAs/SM
//     flash_fwd_pipe_kernel (lazy rescale):
//            4: BM 128, 4 warps x 32 rows, BN 32, Q re-read from smem, 2 CTAs/SM,
//               P V one tile behind Q K^T, K/V 3 stages deep
//            5: BM 128, 4 warps x 32 rows, BN 64, Q re-read from smem, 2 CTAs/SM,
//               the tiling of 0 (K/V double buffered) with the lazy rescale alone
//            6: BM 128, 8 warps x 16 rows, BN 64, Q in registers,      1 CTA/SM,
//               P V one tile behind Q K^T, K/V 3 stages deep
//   D = 96:  0-3 as D = 128's (Phi-3-mini's head dim; rows of 208 bytes keep
//            ldmatrix conflict-free, 12 chunks a row copied chunk by chunk)
//   D = 64:  0: BM 128, 4 warps x 32 rows, BN 64,  Q in registers, 2 CTAs/SM
//            1: BM 128, 4 warps x 32 rows, BN 128, Q in registers, 2 CTAs/SM
//            2: BM 256, 8 warps x 32 rows, BN 64,  Q in registers, 1 CTA/SM
//            3: BM 128, 8 warps x 16 rows, BN 64,  Q in registers, 2 CTAs/SM
using D128V0 = Cfg<128, 2, 4, 64, false, 2>;
using D128V1 = Cfg<128, 2, 8, 64, false, 1>;
using D128V2 = Cfg<128, 1, 8, 64, true, 1>;
using D128V3 = Cfg<128, 2, 4, 32, false, 2>;
using D128V4 = Cfg<128, 2, 4, 32, false, 2, true, true, 3>;
using D128V5 = Cfg<128, 2, 4, 64, false, 2, false, true, 2>;
using D128V6 = Cfg<128, 1, 8, 64, true, 1, true, true, 3>;
using D96V0 = Cfg<96, 2, 4, 64, false, 2>;
using D96V1 = Cfg<96, 2, 8, 64, false, 1>;
using D96V2 = Cfg<96, 1, 8, 64, true, 1>;
using D96V3 = Cfg<96, 2, 4, 32, false, 2>;
using D64V0 = Cfg<64, 2, 4, 64, true, 2>;
using D64V1 = Cfg<64, 2, 4, 128, true, 2>;
using D64V2 = Cfg<64, 2, 8, 64, true, 1>;
using D64V3 = Cfg<64, 1, 8, 64, true, 2>;

// The definitions of the entry points declared in flash_attention.h.

#define KSUITE_ATTN_DEFINE(NAME, T, D)                                        \
  cudaError_t NAME(const Args& a, int variant) {                              \
    switch (variant) {                                                        \
      case 0: return launch_cfg<T, D##V0>(a);                                 \
      case 1: return launch_cfg<T, D##V1>(a);                                 \
      case 2: return launch_cfg<T, D##V2>(a);                                 \
      default: return launch_cfg<T, D##V3>(a);                                \
    }                                                                         \
  }

#define KSUITE_ATTN_DEFINE_D128_PIPE(NAME, T)                                 \
  cudaError_t NAME(const Args& a, int variant) {                              \
    switch (variant) {                                                        \
      case 4: return launch_cfg<T, D128V4>(a);                                \
      case 5: return launch_cfg<T, D128V5>(a);                                \
      default: return launch_cfg<T, D128V6>(a);                               \
    }                                                                         \
  }

}  // namespace ksuite_attn
