// C = A @ B in float32 on Hopper's wgmma as three TF32 products (3xTF32, as
// gemm_tf32x3.cu: a * b = a_l b_h + a_h b_l + a_h b_h, each operand a TF32
// head h = rna_tf32(x) and tail l = rna_tf32(x - h)).  Row-major A (M x K),
// B (K x N), C (M x N), any shape; sm_90a.
//
// Why wgmma: the mma.sync kernel splits every operand element once per warp
// that reads it, from scalar shared-memory loads, and its tensor cores wait on
// that.  Here each element is split once per CTA, into shared memory, and the
// warpgroups' asynchronous wgmmas run while the next k-tile is split.
//
// Per CTA a BM x 128 tile of C (BM = 64 a warpgroup, one or two warpgroups),
// K walked 32 at a time (the caller picks BM: gemm/cuda/__init__.py):
//  - cp.async brings A's BM x 32 and B's 32 x 128 float32 into one of two
//    staging buffers (16-byte chunks where K and N are multiples of 4 and the
//    bases 16-byte aligned, else 4-byte ones), zero-filled past M, N and K.
//  - Every thread splits its share of the staged tile into heads and tails,
//    written as K-major tiles with 128-byte rows (32 floats of k) in the
//    128-byte swizzle that wgmma's descriptors read: A row by row, B
//    transposed (wgmma takes TF32 operands K-major only).  Two such sets, so
//    k-tile kt + 1 is split while kt's wgmmas read the other.
//  - Each warpgroup issues, per k8 step, the three m64n128k8 products of its
//    64 rows into `part`; once they complete, `part` is added to the float32
//    accumulators.  The tensor cores' own accumulation truncates its sums: fed
//    the whole of K it drifts in one direction, by up to a unit in the last
//    place a step, so it only ever holds one k-tile's 96 products.
//  - C is stored from the accumulators, two floats a store where N is even.
// An infinite operand gives NaN where float32 would give inf (as in gemm_tf32x3.cu).

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>

#include "ksuite/common.cuh"
#include "ksuite/mma_ptx.cuh"
#include "operands.h"
#include "raster.cuh"
#include "wgmma_ptx.cuh"

namespace ksuite_gemm_tf32x3_wgmma {

using namespace ksuite_wgmma;

constexpr int BN = 128, BK = 32, GROUP_M = 8;
constexpr int ROW_BYTES = BK * 4;  // one K-major row of a split tile: 32 floats, one 128-byte swizzle row

template <int WG>
struct Tile {
  static constexpr int BM = 64 * WG, THREADS = 128 * WG;
  static constexpr int A_STAGE = BM * BK, B_STAGE = BK * BN;          // floats a staging buffer
  static constexpr int A_SPLIT = BM * ROW_BYTES, B_SPLIT = BN * ROW_BYTES;  // bytes of one split tile
  static constexpr int SET = 2 * A_SPLIT + 2 * B_SPLIT;              // heads and tails of A and B
  static constexpr size_t SMEM = 1024 + 2 * SET + 2 * (A_STAGE + B_STAGE) * sizeof(float);
};

// D[64 x 128] (+)= A[64 x 8] B[8 x 128], TF32 operands both K-major from
// shared memory, float32 accumulators (64 a thread); scale_d = 0 overwrites D.
__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                     int scale_d) {
  asm volatile("{\n.reg .pred p;\n"
               "setp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
               "{" KSUITE_WGMMA_REGS_64 "}, %64, %65, p, 1, 1;\n}\n"
               : KSUITE_WGMMA_OUTS_64
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void split4(const float4& x, uint4& h, uint4& l) {
  ksuite::ptx::split_tf32(x.x, h.x, l.x);
  ksuite::ptx::split_tf32(x.y, h.y, l.y);
  ksuite::ptx::split_tf32(x.z, h.z, l.z);
  ksuite::ptx::split_tf32(x.w, h.w, l.w);
}

// Byte offset of the 16-byte chunk c (floats 4c..4c+3 of k) of row r in a
// K-major tile with 128-byte rows under the 128-byte swizzle: the chunk index
// XORed with the row's place in its group of 8 (tiles start 1024-aligned).
__device__ __forceinline__ int swizzled(int r, int c) { return r * ROW_BYTES + ((c ^ (r & 7)) << 4); }

// The staged k-tile (A: BM rows of 32 k; B: 32 k-rows of 128 n) into heads and
// tails: A's rows as they are, B's columns as rows (its transpose).
template <int WG>
__device__ __forceinline__ void split_tile(const float* sa, const float* sb, uint8_t* set) {
  using T = Tile<WG>;
  uint8_t* ah = set;
  uint8_t* al = ah + T::A_SPLIT;
  uint8_t* bh = al + T::A_SPLIT;
  uint8_t* bl = bh + T::B_SPLIT;
#pragma unroll
  for (int i = 0; i < T::BM * 8 / T::THREADS; ++i) {
    const int e = threadIdx.x + i * T::THREADS;
    const int r = e >> 3, c = e & 7;  // 8 lanes a row: one 128-byte row a phase
    const float4 x = *reinterpret_cast<const float4*>(sa + r * BK + 4 * c);
    uint4 h, l;
    split4(x, h, l);
    *reinterpret_cast<uint4*>(ah + swizzled(r, c)) = h;
    *reinterpret_cast<uint4*>(al + swizzled(r, c)) = l;
  }
#pragma unroll
  for (int i = 0; i < BN * 8 / T::THREADS; ++i) {
    const int e = threadIdx.x + i * T::THREADS;
    const int n = e % BN, c = e / BN;  // lanes on consecutive n: conflict-free column reads
    const float* p = sb + 4 * c * BN + n;
    const float4 x = make_float4(p[0], p[BN], p[2 * BN], p[3 * BN]);
    uint4 h, l;
    split4(x, h, l);
    *reinterpret_cast<uint4*>(bh + swizzled(n, c)) = h;
    *reinterpret_cast<uint4*>(bl + swizzled(n, c)) = l;
  }
}

template <int WG, bool VEC>
__global__ void __launch_bounds__(128 * WG, 1)
gemm_tf32x3_wgmma_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M,
                         int N, int K) {
  using T = Tile<WG>;
  extern __shared__ uint8_t smem_raw[];
  // Swizzled tiles must start on 1024-byte boundaries (the descriptors' base offset is 0).
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* sets = smem;                                            // 2 x [A heads, A tails, B heads, B tails]
  float* stage_a = reinterpret_cast<float*>(smem + 2 * T::SET);    // 2 x [BM][32]
  float* stage_b = stage_a + 2 * T::A_STAGE;                       // 2 x [32][128]

  int tm, tn;
  ksuite_gemm::grouped_tile(blockIdx.x, (M - 1) / T::BM + 1, (N - 1) / BN + 1, GROUP_M, tm, tn);
  const int m0 = tm * T::BM, n0 = tn * BN;
  const int ktiles = (K - 1) / BK + 1;

  auto load = [&](int kt) {
    const int s = kt & 1;
    ksuite::ptx::cp_async_tile_f32<VEC, T::BM, BK, BK, T::THREADS>(stage_a + s * T::A_STAGE, A, M, K, m0, kt * BK);
    ksuite::ptx::cp_async_tile_f32<VEC, BK, BN, BN, T::THREADS>(stage_b + s * T::B_STAGE, B, K, N, kt * BK, n0);
  };
  auto split = [&](int kt) {
    const int s = kt & 1;
    split_tile<WG>(stage_a + s * T::A_STAGE, stage_b + s * T::B_STAGE, sets + s * T::SET);
    fence_proxy_async();  // the generic-proxy stores, visible to wgmma once past a barrier
  };

  load(0);
  ksuite::ptx::cp_async_commit();
  if (ktiles > 1) load(1);
  ksuite::ptx::cp_async_commit();
  ksuite::ptx::cp_async_wait<1>();
  __syncthreads();
  split(0);
  __syncthreads();  // set 0 complete; staging buffer 0 read by everyone
  if (ktiles > 2) load(2);
  ksuite::ptx::cp_async_commit();

  const int wg = threadIdx.x / 128;
  // A: this warpgroup's 64 rows, 64 * 128 bytes in (a multiple of 1024); B:
  // all 128 rows of n.  8-row groups are SBO = 1024 bytes apart, LBO is unused
  // for swizzled K-major tiles; the k8 step kk starts 32 bytes into each row
  // (+2 in the descriptor's 16-byte units).
  const uint32_t base = ksuite::ptx::smem_addr(sets);
  auto desc = [&](int s, int offset) { return make_desc_sw128(base + s * T::SET + offset, 16, 1024); };
  const int a_off = wg * 64 * ROW_BYTES;

  float acc[64], part[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = part[i] = 0.f;

  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt & 1;
    const uint64_t ah = desc(s, a_off), al = desc(s, T::A_SPLIT + a_off);
    const uint64_t bh = desc(s, 2 * T::A_SPLIT), bl = desc(s, 2 * T::A_SPLIT + T::B_SPLIT);
#pragma unroll
    for (int i = 0; i < 64; ++i) fence_operand(part[i]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 8; ++kk) {
      wgmma_m64n128k8_tf32(part, al + 2 * kk, bh + 2 * kk, kk != 0);  // the k-tile's first product overwrites
      wgmma_m64n128k8_tf32(part, ah + 2 * kk, bl + 2 * kk, 1);
      wgmma_m64n128k8_tf32(part, ah + 2 * kk, bh + 2 * kk, 1);
    }
    wgmma_commit();
    if (kt + 1 < ktiles) {
      // While the wgmmas run: k-tile kt + 1 into the other set (whose wgmmas,
      // kt - 1's, completed in the last iteration).
      ksuite::ptx::cp_async_wait<1>();
      __syncthreads();
      split(kt + 1);
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      fence_operand(part[i]);
      acc[i] += part[i];
    }
    __syncthreads();  // set kt + 1 complete, its staging buffer free
    if (kt + 3 < ktiles) load(kt + 3);
    ksuite::ptx::cp_async_commit();
  }
  ksuite::ptx::cp_async_wait<0>();  // no copy may still target shared memory at exit

  // Accumulator fragment of m64n128 (float32): warp w of the warpgroup owns
  // rows 16w..16w+15; register 4j + 2h + q is row lane / 4 + 8h, column
  // 8j + 2 (lane % 4) + q.
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int row0 = m0 + wg * 64 + warp * 16 + lane / 4;
  const int col0 = n0 + 2 * (lane % 4);
  const bool pairs = (N % 2 == 0) && (reinterpret_cast<uintptr_t>(C) % 8 == 0);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + 8 * h;
    if (row >= M) continue;
    float* crow = C + static_cast<int64_t>(row) * N;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = col0 + 8 * j;
      const float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
      if (pairs && col + 1 < N) {
        *reinterpret_cast<float2*>(crow + col) = make_float2(v0, v1);
      } else {
        if (col < N) crow[col] = v0;
        if (col + 1 < N) crow[col + 1] = v1;
      }
    }
  }
}

template <int WG, bool VEC>
void launch(const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
  using T = Tile<WG>;
  const int M = static_cast<int>(a.size(0)), K = static_cast<int>(a.size(1));
  const int N = static_cast<int>(b.size(1));
  auto kernel = gemm_tf32x3_wgmma_kernel<WG, VEC>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(T::SMEM)));
  const int64_t tiles = ((static_cast<int64_t>(M) + T::BM - 1) / T::BM) * ((static_cast<int64_t>(N) + BN - 1) / BN);
  kernel<<<static_cast<unsigned>(tiles), T::THREADS, T::SMEM, ksuite::current_stream()>>>(
      a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor gemm_tf32x3_wgmma(const at::Tensor& a, const at::Tensor& b, int64_t rows) {
  ksuite_gemm_operands::check(a, b, "gemm_tf32x3_wgmma");
  KSUITE_CHECK(a.scalar_type() == at::kFloat, "gemm_tf32x3_wgmma: only float32 is supported, got ",
               a.scalar_type());
  KSUITE_CHECK(rows == 64 || rows == 128, "gemm_tf32x3_wgmma: rows must be 64 or 128, got ", rows);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const c10::cuda::CUDAGuard guard(a.device());
  KSUITE_CHECK(ksuite::compute_major() == 9, "gemm_tf32x3_wgmma: needs a Hopper GPU (sm_90), this one is sm_",
               ksuite::compute_major(), "x");
  if (M == 0 || N == 0) return at::empty({M, N}, a.options());
  if (K == 0) return at::zeros({M, N}, a.options());
  KSUITE_CHECK(((M + rows - 1) / rows) * ((N + BN - 1) / BN) < (1LL << 31),
               "gemm_tf32x3_wgmma: too many tiles for one grid");
  at::Tensor c = at::empty({M, N}, a.options());
  const bool vec = K % 4 == 0 && N % 4 == 0 && ksuite::aligned16(a.data_ptr()) && ksuite::aligned16(b.data_ptr());
  if (rows == 128) {
    vec ? launch<2, true>(a, b, c) : launch<2, false>(a, b, c);
  } else {
    vec ? launch<1, true>(a, b, c) : launch<1, false>(a, b, c);
  }
  return c;
}

}  // namespace ksuite_gemm_tf32x3_wgmma

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gemm_tf32x3_wgmma(Tensor a, Tensor b, int rows) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gemm_tf32x3_wgmma", &ksuite_gemm_tf32x3_wgmma::gemm_tf32x3_wgmma);
}
