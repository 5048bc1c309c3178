// A probe: float32 attention forward on the tensor cores as three TF32
// products (3xTF32), FlashAttention-2 style with mma.sync m16n8k8 (sm_80+).
// O = softmax(Q K^T / sqrt(D)) V for (B, H, S, D) float32 contiguous tensors.
//
// Per CTA 64 query rows of one (batch, head), 4 warps of 16 rows each:
//  - Q's tile sits in shared memory; K and V stream through a double buffer of
//    BN-key tiles by cp.async (16-byte chunks, rows past S zero-filled), one
//    barrier a tile.  Rows are padded to D + 4 floats: the scalar fragment
//    loads below hit 32 distinct banks.
//  - Each fragment is split as it is loaded from shared memory into a TF32
//    head and tail (ksuite::ptx::split_tf32), and each product is three MMAs,
//    tail x head + head x tail + head x head.
//  - The online softmax in fp32 (ex2 of one FFMA's worth, max and sum over
//    the quad that holds a row); P goes from the S accumulators to the A
//    operand of P V in registers: the k order of the m16n8k8 A fragment
//    (t, t + 4) is mapped to keys (2t, 2t + 1) of each 8-key slice, the order
//    the accumulators hold them in, and V's B fragment is read in that order.
//  - Causal CTAs take the heaviest query blocks first and stop at their
//    diagonal; masks are applied on every tile (a probe, not tuned).
//
// run(q, k, v, causal, bn) -> o, with bn 32 or 64 (keys a tile).

#include <torch/extension.h>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "ksuite/common.cuh"
#include "ksuite/mma_ptx.cuh"

namespace {

using namespace ksuite::ptx;

constexpr int WARPS = 4, THREADS = 32 * WARPS, BM = 16 * WARPS;

template <int D, int BN>
struct Tile {
  static constexpr int LD = D + 4;  // padded row, in floats
  static constexpr size_t SMEM = size_t(BM + 4 * BN) * LD * sizeof(float);  // Q, 2 K and 2 V tiles
};

// ROWS rows of D floats from src (row stride D, the tile's first row) into dst
// (row stride D + 4); rows at or past `rows` are zero-filled.
template <int ROWS, int D>
__device__ __forceinline__ void load_rows(float* dst, const float* src, int rows) {
  constexpr int CHUNKS = D / 4;
  for (int c = threadIdx.x; c < ROWS * CHUNKS; c += THREADS) {
    const int r = c / CHUNKS, col = (c % CHUNKS) * 4;
    const bool ok = r < rows;
    cp_async_16(smem_addr(dst + r * (D + 4) + col), ok ? src + static_cast<int64_t>(r) * D + col : src, ok);
  }
}

template <int D, int BN>
__global__ void __launch_bounds__(THREADS)
attn_tf32x3_kernel(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                   float* __restrict__ O, int S, float scale_log2, bool causal) {
  constexpr int LD = Tile<D, BN>::LD, DK = D / 8, SN = BN / 8;
  extern __shared__ __align__(16) float smem[];
  float* sQ = smem;
  float* sK = sQ + BM * LD;       // [2][BN][LD]
  float* sV = sK + 2 * BN * LD;   // [2][BN][LD]

  const int qb = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int q0 = qb * BM;
  const int64_t head = static_cast<int64_t>(blockIdx.y) * S * D;
  const float* q = Q + head;
  const float* k = K + head;
  const float* v = V + head;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int row0 = q0 + warp * 16 + g;  // this thread's rows: row0 and row0 + 8

  const int kv_end = causal ? min(S, q0 + BM) : S;
  const int blocks = (kv_end + BN - 1) / BN;
  load_rows<BM, D>(sQ, q + static_cast<int64_t>(q0) * D, S - q0);
  load_rows<BN, D>(sK, k, S);
  load_rows<BN, D>(sV, v, S);
  cp_async_commit();

  float o[DK][4];
#pragma unroll
  for (int i = 0; i < DK; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int j = 0; j < blocks; ++j) {
    cp_async_wait<0>();
    __syncthreads();  // tile j landed; every warp is done with tile j - 1's buffer
    if (j + 1 < blocks) {
      const int next = (j + 1) * BN, buf = (j + 1) & 1;
      load_rows<BN, D>(sK + buf * BN * LD, k + static_cast<int64_t>(next) * D, S - next);
      load_rows<BN, D>(sV + buf * BN * LD, v + static_cast<int64_t>(next) * D, S - next);
    }
    cp_async_commit();
    const float* tk = sK + (j & 1) * BN * LD;
    const float* tv = sV + (j & 1) * BN * LD;

    // S = Q K^T for this warp's 16 rows and the tile's BN keys
    float s[SN][4];
#pragma unroll
    for (int n = 0; n < SN; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
    const float* qa = sQ + (warp * 16 + g) * LD + t;
#pragma unroll 4
    for (int kk = 0; kk < DK; ++kk) {
      uint32_t ah[4], at[4];
      // a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4) of Q's 16 x 8 slice
      split_tf32(qa[kk * 8], ah[0], at[0]);
      split_tf32(qa[8 * LD + kk * 8], ah[1], at[1]);
      split_tf32(qa[kk * 8 + 4], ah[2], at[2]);
      split_tf32(qa[8 * LD + kk * 8 + 4], ah[3], at[3]);
#pragma unroll
      for (int n = 0; n < SN; ++n) {
        // b0 (k = t, n = g) = K[key g][d t], b1 = K[key g][d t + 4]
        const float* kb = tk + (n * 8 + g) * LD + kk * 8 + t;
        uint32_t bh[2], bt[2];
        split_tf32(kb[0], bh[0], bt[0]);
        split_tf32(kb[4], bh[1], bt[1]);
        mma_1688_tf32(s[n], at, bh);
        mma_1688_tf32(s[n], ah, bt);
        mma_1688_tf32(s[n], ah, bh);
      }
    }

    // online softmax: c0 (row g, key 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < SN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = j * BN + n * 8 + 2 * t + (e & 1), row = row0 + 8 * (e >> 1);
        const bool off = key >= S || (causal && key > row);
        s[n][e] = off ? -INFINITY : s[n][e] * scale_log2;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
      }
    float alpha[2], base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float m_new = fmaxf(m[h], mx[h]);
      base[h] = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet: every p is 0
      alpha[h] = ex2(m[h] - base[h]);
      m[h] = m_new;
      l[h] *= alpha[h];
    }
#pragma unroll
    for (int n = 0; n < SN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = ex2(s[n][e] - base[e >> 1]);
        l[e >> 1] += s[n][e];
      }
#pragma unroll
    for (int i = 0; i < DK; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }

    // O += P V: A fragment k order (t, t + 4) = keys (2t, 2t + 1) of each 8-key slice
#pragma unroll
    for (int n = 0; n < SN; ++n) {
      uint32_t ph[4], pt[4];
      split_tf32(s[n][0], ph[0], pt[0]);  // (g, key 2t)
      split_tf32(s[n][2], ph[1], pt[1]);  // (g + 8, key 2t)
      split_tf32(s[n][1], ph[2], pt[2]);  // (g, key 2t + 1)
      split_tf32(s[n][3], ph[3], pt[3]);  // (g + 8, key 2t + 1)
      const float* vb = tv + (n * 8 + 2 * t) * LD + g;
#pragma unroll  // wholly: o[i] must stay in registers
      for (int i = 0; i < DK; ++i) {
        // b0 = V[key 2t][d g], b1 = V[key 2t + 1][d g] of the slice's 8 x 8 block i
        uint32_t bh[2], bt[2];
        split_tf32(vb[i * 8], bh[0], bt[0]);
        split_tf32(vb[LD + i * 8], bh[1], bt[1]);
        mma_1688_tf32(o[i], pt, bh);
        mma_1688_tf32(o[i], ph, bt);
        mma_1688_tf32(o[i], ph, bh);
      }
    }
  }
  cp_async_wait<0>();

  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    inv[h] = l[h] > 0.f ? 1.f / l[h] : 0.f;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + 8 * h;
    if (row >= S) continue;
    float* out = O + head + static_cast<int64_t>(row) * D + 2 * t;
#pragma unroll
    for (int i = 0; i < DK; ++i)
      *reinterpret_cast<float2*>(out + i * 8) = make_float2(o[i][2 * h] * inv[h], o[i][2 * h + 1] * inv[h]);
  }
}

template <int D, int BN>
void launch(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& o, bool causal) {
  const int B = q.size(0), H = q.size(1), S = q.size(2);
  auto kernel = attn_tf32x3_kernel<D, BN>;
  constexpr size_t smem = Tile<D, BN>::SMEM;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid((S + BM - 1) / BM, B * H);
  kernel<<<grid, THREADS, smem, ksuite::current_stream()>>>(
      q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), o.data_ptr<float>(), S,
      static_cast<float>(1.4426950408889634 / std::sqrt(double(D))), causal);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, int64_t bn) {
  TORCH_CHECK(q.is_cuda() && q.scalar_type() == at::kFloat && q.dim() == 4, "q: a (B, H, S, D) float32 CUDA tensor");
  TORCH_CHECK(q.sizes() == k.sizes() && q.sizes() == v.sizes(), "q, k, v shapes differ");
  TORCH_CHECK(k.scalar_type() == at::kFloat && v.scalar_type() == at::kFloat, "float32 only");
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(), "contiguous tensors only");
  const c10::cuda::CUDAGuard guard(q.device());
  at::Tensor o = at::empty_like(q);
  const int64_t d = q.size(3);
  if (q.size(2) == 0 || q.numel() == 0) return o;
  if (d == 64 && bn == 64) launch<64, 64>(q, k, v, o, causal);
  else if (d == 64 && bn == 32) launch<64, 32>(q, k, v, o, causal);
  else if (d == 128 && bn == 64) launch<128, 64>(q, k, v, o, causal);
  else if (d == 128 && bn == 32) launch<128, 32>(q, k, v, o, causal);
  else TORCH_CHECK(false, "D must be 64 or 128 and bn 32 or 64, got D=", d, " bn=", bn);
  return o;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
