// C = A @ B on tensor cores with mma.sync (sm_80+), row-major A (M x K),
// B (K x N), C (M x N), float16 or bfloat16 with fp32 accumulation.
//
// Each CTA computes a BM x BN tile of C with 8 warps; each warp owns a
// WM x WN sub-tile held in registers as m16n8 accumulator fragments.  K is
// walked BK at a time through a STAGES-deep ring of shared-memory buffers
// filled by cp.async, so the loads of tile k+STAGES-1 overlap the math on
// tile k.  Shared rows are padded by 8 elements (16 bytes): the eight 16-byte
// rows one ldmatrix phase reads then fall into eight different bank groups,
// which removes the conflicts a plain power-of-two stride would cause.
// Out-of-range rows and columns are zero-filled by cp.async (zeros add
// nothing to the dot products) and masked on the store, so any M works.  When
// K or N is not a multiple of 8, rows of A or B are not 16-byte aligned and
// cp.async cannot be used: the ALIGNED=false instantiation then fills shared
// memory with guarded 2-byte loads (synchronous, so slower; an edge path, not
// the fast one) and stores C element by element.

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ksuite/common.cuh"
#include "ksuite/mma_ptx.cuh"

namespace ksuite_gemm {

using namespace ksuite::ptx;

template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, int MIN_BLOCKS_>
struct TileConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_;
  static constexpr int STAGES = STAGES_, MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int A_LD = BK + 8;  // padded row lengths, in elements
  static constexpr int B_LD = BN + 8;
  static constexpr int A_STAGE = BM * A_LD;
  static constexpr int B_STAGE = BK * B_LD;
  static constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;  // 2-byte elements
  static constexpr int MT = WM / 16;  // m16 fragments per warp
  static constexpr int NT = WN / 8;   // n8 fragments per warp
  static constexpr int A_COPIES = BM * BK / 8 / THREADS;  // 16-byte copies per thread
  static constexpr int B_COPIES = BK * BN / 8 / THREADS;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0);
  static_assert(A_COPIES * THREADS * 8 == BM * BK && B_COPIES * THREADS * 8 == BK * BN);
  static_assert(STAGES >= 2);
};

// The tiles the op can run (the `tile` argument; -1 picks one, see dispatch).
// 128x128: 8 warps of 64x32, 2 CTAs per SM, enough CTAs for medium and skinny problems.
using Tile0 = TileConfig<128, 128, 32, 64, 32, 4, 2>;
// 128x256: 8 warps of 64x64, fewer shared-memory reads per mma, for large problems.
using Tile1 = TileConfig<128, 256, 32, 64, 64, 4, 1>;
// The same two with BK = 64: half the barriers per FLOP, at fewer stages.
using Tile2 = TileConfig<128, 256, 64, 64, 64, 3, 1>;
using Tile3 = TileConfig<128, 128, 64, 64, 32, 3, 2>;
constexpr int NUM_TILES = 4;

constexpr int GROUP_M = 8;  // CTAs sharing a column band run together, so B stays in L2

// Eight consecutive elements src[0..7], of which the first `valid` (0..8)
// exist, to 16-byte aligned shared memory at dst, zero-filling the rest.
template <bool ALIGNED, typename T>
__device__ __forceinline__ void copy8(T* dst, const T* src, int valid) {
  if constexpr (ALIGNED) {
    cp_async_16(smem_addr(dst), src, valid > 0);  // aligned: valid is 0 or 8
  } else {
    // Raw 16-bit patterns: 0 is +0.0 in both float16 and bfloat16.
    const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
    uint32_t w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const uint32_t lo = 2 * e < valid ? s[2 * e] : 0u;
      const uint32_t hi = 2 * e + 1 < valid ? s[2 * e + 1] : 0u;
      w[e] = lo | (hi << 16);
    }
    *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

template <typename T, typename Cfg, bool ALIGNED>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
gemm_mma_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                int M, int N, int K) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WM, WN = Cfg::WN;
  constexpr int STAGES = Cfg::STAGES, THREADS = Cfg::THREADS;
  constexpr int A_LD = Cfg::A_LD, B_LD = Cfg::B_LD, MT = Cfg::MT, NT = Cfg::NT;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sA = reinterpret_cast<T*>(smem_raw);
  T* sB = sA + STAGES * Cfg::A_STAGE;

  // Grouped raster: walk GROUP_M row-tiles down a column before moving right.
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int pid = blockIdx.x;
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (pid / per_group) * GROUP_M;
  const int group_rows = min(tiles_m - first_m, GROUP_M);
  const int tm = first_m + (pid % per_group) % group_rows;
  const int tn = (pid % per_group) / group_rows;
  const int m0 = tm * BM, n0 = tn * BN;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;

  // Out-of-range chunks point at the matrix start: never read, but a valid address.
  auto load_stage = [&](int slot, int kt) {
    const int k0 = kt * BK;
    T* a = sA + slot * Cfg::A_STAGE;
    T* b = sB + slot * Cfg::B_STAGE;
#pragma unroll
    for (int i = 0; i < Cfg::A_COPIES; ++i) {
      const int c = tid + i * THREADS;
      const int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
      const int gm = m0 + r, gk = k0 + kc;
      const int valid = gm < M ? max(0, min(8, K - gk)) : 0;
      copy8<ALIGNED>(a + r * A_LD + kc, valid > 0 ? A + (static_cast<int64_t>(gm) * K + gk) : A, valid);
    }
#pragma unroll
    for (int i = 0; i < Cfg::B_COPIES; ++i) {
      const int c = tid + i * THREADS;
      const int r = c / (BN / 8), nc = (c % (BN / 8)) * 8;
      const int gk = k0 + r, gn = n0 + nc;
      const int valid = gk < K ? max(0, min(8, N - gn)) : 0;
      copy8<ALIGNED>(b + r * B_LD + nc, valid > 0 ? B + (static_cast<int64_t>(gk) * N + gn) : B, valid);
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const int ktiles = (K + BK - 1) / BK;
  // Prologue: STAGES-1 tiles in flight, one commit group each (empty past the end,
  // so that the group count, and with it the wait below, stays uniform).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) load_stage(s, s);
    cp_async_commit();
  }

  for (int kt = 0; kt < ktiles; ++kt) {
    // Groups committed so far: STAGES-1+kt; allowing STAGES-2 in flight means tile kt landed.
    cp_async_wait<STAGES - 2>();
    // Makes every thread's copies visible, and guarantees everyone finished tile kt-1,
    // whose slot the next load overwrites.
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < ktiles) load_stage(next % STAGES, next);
    cp_async_commit();

    const T* a = sA + (kt % STAGES) * Cfg::A_STAGE;
    const T* b = sB + (kt % STAGES) * Cfg::B_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[MT][4];
      uint32_t bf[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        // lanes 0-15: rows 0-15 at k+0; lanes 16-31: rows 0-15 at k+8 -> a0..a3
        const int row = wm * WM + i * 16 + (lane & 15);
        ldmatrix_x4(af[i], smem_addr(a + row * A_LD + kk + (lane >> 4) * 8));
      }
#pragma unroll
      for (int j = 0; j < NT / 2; ++j) {
        // lanes 0-15: k rows 0-15 at n+0; lanes 16-31: the same at n+8; transposed,
        // registers 0,1 are b0,b1 of the first n8 fragment and 2,3 of the second.
        uint32_t r[4];
        const int col = wn * WN + j * 16 + (lane >> 4) * 8;
        ldmatrix_x4_trans(r, smem_addr(b + (kk + (lane & 15)) * B_LD + col));
        bf[2 * j][0] = r[0];
        bf[2 * j][1] = r[1];
        bf[2 * j + 1][0] = r[2];
        bf[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_16816<T>(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
  cp_async_wait<0>();  // only empty groups remain; leave nothing in flight

  // Accumulator fragment: c0,c1 at (row g, cols 2t, 2t+1), c2,c3 at row g+8.
  // ALIGNED: N % 8 == 0 and the column is even, so a pair is wholly inside or
  // outside and one 4-byte store writes it; otherwise element by element.
  const int g = lane >> 2, t = lane & 3;
  auto store2 = [&](int row, int col, float lo, float hi) {
    if (row >= M || col >= N) return;
    const uint32_t v = pack2<T>(lo, hi);
    T* p = C + (static_cast<int64_t>(row) * N + col);
    if constexpr (ALIGNED) {
      *reinterpret_cast<uint32_t*>(p) = v;
    } else {
      uint16_t* q = reinterpret_cast<uint16_t*>(p);
      q[0] = static_cast<uint16_t>(v & 0xffffu);
      if (col + 1 < N) q[1] = static_cast<uint16_t>(v >> 16);
    }
  };
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    const int row = m0 + wm * WM + i * 16 + g;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int col = n0 + wn * WN + j * 8 + 2 * t;
      store2(row, col, acc[i][j][0], acc[i][j][1]);
      store2(row + 8, col, acc[i][j][2], acc[i][j][3]);
    }
  }
}

template <typename T, typename Cfg, bool ALIGNED>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  const int M = static_cast<int>(a.size(0)), K = static_cast<int>(a.size(1));
  const int N = static_cast<int>(b.size(1));
  auto kernel = gemm_mma_kernel<T, Cfg, ALIGNED>;
  // More than 48 KiB of dynamic shared memory must be opted into per kernel.
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      Cfg::SMEM_BYTES));
  const int64_t tiles = static_cast<int64_t>((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
  kernel<<<static_cast<unsigned>(tiles), Cfg::THREADS, Cfg::SMEM_BYTES,
           ksuite::current_stream()>>>(
      reinterpret_cast<const T*>(a.data_ptr()), reinterpret_cast<const T*>(b.data_ptr()),
      reinterpret_cast<T*>(c.data_ptr()), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Without a choice: the large tile for problems that still fill two waves of
// CTAs on this GPU, else the 128x128 one, which keeps more SMs busy.
// Mirrored in implementations/gemm/cuda/__init__.py (_tile) for `config`.
int auto_tile(int64_t M, int64_t N) {
  const int64_t tiles = ((M + 127) / 128) * ((N + 255) / 256);
  return tiles >= 2 * ksuite::sm_count() ? 1 : 0;
}

template <typename T>
void dispatch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, bool aligned, int64_t tile) {
  if (!aligned) return launch<T, Tile0, false>(a, b, c);  // the edge path has one tile
  switch (tile < 0 ? auto_tile(a.size(0), b.size(1)) : tile) {
    case 0: return launch<T, Tile0, true>(a, b, c);
    case 1: return launch<T, Tile1, true>(a, b, c);
    case 2: return launch<T, Tile2, true>(a, b, c);
    default: return launch<T, Tile3, true>(a, b, c);
  }
}

at::Tensor gemm_mma(const at::Tensor& a, const at::Tensor& b, int64_t tile) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "gemm_mma: a and b must be CUDA tensors, got ",
              a.device(), " and ", b.device());
  TORCH_CHECK(a.device() == b.device(), "gemm_mma: a and b are on different devices (",
              a.device(), ", ", b.device(), ")");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "gemm_mma: a and b must be matrices, got ", a.dim(),
              "-d and ", b.dim(), "-d tensors");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "gemm_mma: a and b must share a dtype, got ",
              a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16,
              "gemm_mma: only float16 and bfloat16 are supported (tensor-core mma), got ",
              a.scalar_type());
  TORCH_CHECK(a.size(1) == b.size(0), "gemm_mma: inner dimensions differ: a is ", ksuite::shape_str(a),
              ", b is ", ksuite::shape_str(b));
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous(),
              "gemm_mma: a and b must be contiguous (row-major)");
  TORCH_CHECK(tile >= -1 && tile < NUM_TILES, "gemm_mma: tile must be -1 (automatic) or 0..",
              NUM_TILES - 1, ", got ", tile);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31),
              "gemm_mma: dimensions must fit in 32-bit ints");

  const c10::cuda::CUDAGuard guard(a.device());
  at::Tensor c = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  if (K == 0) return c.zero_();
  // 16-byte copies need every row of A and B to start on a 16-byte boundary.
  const bool aligned = K % 8 == 0 && N % 8 == 0 && ksuite::aligned16(a.data_ptr()) &&
                       ksuite::aligned16(b.data_ptr());
  if (a.scalar_type() == at::kHalf) {
    dispatch<__half>(a, b, c, aligned, tile);
  } else {
    dispatch<__nv_bfloat16>(a, b, c, aligned, tile);
  }
  return c;
}

}  // namespace ksuite_gemm

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_mma(Tensor a, Tensor b, int tile=-1) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_mma", &ksuite_gemm::gemm_mma);
}
