// O = softmax(Q K^T / sqrt(D)) V, forward only, FlashAttention-2 style on
// tensor cores (mma.sync m16n8k16, fp32 accumulation).  q, k, v, o are
// (B, H, S, D) contiguous, float16 or bfloat16, D = 64 or 128.
//
// One CTA takes BM = 128 queries of one (batch, head); each of its 8 warps owns
// 16 query rows end to end, so the softmax statistics of a row never leave the
// four threads that hold it.  Q is read once into registers.  K and V stream
// through shared memory in tiles of BN = 64 keys, double buffered with
// cp.async: the copy of the next K tile overlaps S = Q K^T, the copy of the
// next V tile overlaps O += P V.  The S x S scores never exist: each 16 x 64
// tile of S lives in accumulator registers, goes through the online softmax
// (running max m and sum l in fp32, exponentials as exp2 with the 1/sqrt(D)
// scale folded into one FMA), is rounded to 16 bits in registers and used as
// the A operand of P V directly (an accumulator fragment of m16n8 has the
// layout of an m16k16 A fragment's halves).  Causal: tiles wholly above the
// diagonal are never visited; the ones crossing it, and the ragged last tile,
// are masked element by element.  Rows padded with 8 elements (16 bytes)
// make every ldmatrix phase conflict-free.

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cmath>

#include "ksuite/common.cuh"
#include "ksuite/mma_ptx.cuh"

namespace ksuite_attn {

using namespace ksuite::ptx;

constexpr int BM = 128, BN = 64, WARPS = 8, THREADS = WARPS * 32;
static_assert(BM == WARPS * 16, "each warp owns 16 query rows");

template <int D>
constexpr int smem_bytes() {
  return (BM + 4 * BN) * (D + 8) * 2;  // Q, two K tiles, two V tiles; 2-byte elements
}

// ROWS x D elements from rows row0.. of src (row stride D) into dst (row stride
// D + 8); rows at or past S are zero-filled, so they add nothing to P V and
// are masked out of S.
template <int ROWS, int D, typename T>
__device__ __forceinline__ void load_rows(T* dst, const T* src, int row0, int S, int tid) {
  constexpr int CHUNKS = D / 8;  // 16-byte copies per row
  static_assert(ROWS * CHUNKS % THREADS == 0);
#pragma unroll
  for (int i = 0; i < ROWS * CHUNKS / THREADS; ++i) {
    const int c = tid + i * THREADS;
    const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
    const bool ok = row0 + r < S;
    const T* p = ok ? src + (static_cast<int64_t>(row0 + r) * D + col) : src;
    cp_async_16(smem_addr(dst + r * (D + 8) + col), p, ok);
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(THREADS, D == 64 ? 2 : 1)
flash_fwd_kernel(const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V,
                 T* __restrict__ O, int S, float scale_log2, bool causal) {
  constexpr int LD = D + 8;
  constexpr int DK = D / 16;  // k16 steps of Q K^T
  constexpr int DN = D / 8;   // n8 fragments of O
  constexpr int SN = BN / 8;  // n8 fragments of S

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * LD;
  T* sV = sK + 2 * BN * LD;

  // Causal CTAs differ in work by up to S/BN tiles; starting the heaviest first
  // lets the light ones fill the last wave.
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
  const int row_a = q0 + warp * 16 + g, row_b = row_a + 8;  // this thread's two query rows

  const int kv_end = causal ? min(S, q0 + BM) : S;
  const int n_tiles = (kv_end + BN - 1) / BN;

  // Commit groups, in order: {Q, K0}, {V0}, then per tile j {K(j+1)}, {V(j+1)}
  // (empty past the end).  At the top of iteration j, 2j+2 groups are committed.
  load_rows<BM, D>(sQ, Q, q0, S, tid);
  load_rows<BN, D>(sK, K, 0, S, tid);
  cp_async_commit();
  load_rows<BN, D>(sV, V, 0, S, tid);
  cp_async_commit();

  uint32_t qf[DK][4];
  float o[DN][4];
#pragma unroll
  for (int i = 0; i < DN; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[i][e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};  // running max of raw scores, rows a and b
  float l_run[2] = {0.f, 0.f};              // this thread's share of the running sum

  for (int j = 0; j < n_tiles; ++j) {
    const int k0 = j * BN, slot = j & 1;
    cp_async_wait<1>();  // K(j) landed; V(j) may still be in flight
    __syncthreads();     // ...for every thread; and all are done with tile j-1
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < DK; ++kk)
        ldmatrix_x4(qf[kk], smem_addr(sQ + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8));
    }
    if (j + 1 < n_tiles) load_rows<BN, D>(sK + (slot ^ 1) * BN * LD, K, k0 + BN, S, tid);
    cp_async_commit();

    // S = Q K^T for this warp's 16 rows x 64 keys.  K is [key][d] in shared
    // memory, which is already the "col" layout of the B operand: no transpose.
    float s[SN][4];
#pragma unroll
    for (int i = 0; i < SN; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[i][e] = 0.f;
    const T* kt = sK + slot * BN * LD;
#pragma unroll
    for (int kk = 0; kk < DK; ++kk) {
#pragma unroll
      for (int np = 0; np < SN / 2; ++np) {
        // matrices: keys 0-7 x d 0-7, keys 0-7 x d 8-15, keys 8-15 x d 0-7, keys 8-15 x d 8-15
        uint32_t r[4];
        const int key = np * 16 + (lane & 7) + (lane >> 4) * 8;
        ldmatrix_x4(r, smem_addr(kt + key * LD + kk * 16 + ((lane >> 3) & 1) * 8));
        mma_16816<T>(s[2 * np], qf[kk], r[0], r[1]);
        mma_16816<T>(s[2 * np + 1], qf[kk], r[2], r[3]);
      }
    }

    // Masks: keys past S (the ragged last tile), keys after the query (causal).
    if (k0 + BN > S || (causal && k0 + BN - 1 > q0)) {
#pragma unroll
      for (int i = 0; i < SN; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = k0 + i * 8 + 2 * t + (e & 1);
          const int row = e < 2 ? row_a : row_b;
          if (col >= S || (causal && col > row)) s[i][e] = -INFINITY;
        }
      }
    }

    // Online softmax.  The four threads of a quad hold one row between them.
    float mx[2] = {m_run[0], m_run[1]};
#pragma unroll
    for (int i = 0; i < SN; ++i) {
      mx[0] = fmaxf(mx[0], fmaxf(s[i][0], s[i][1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[i][2], s[i][3]));
    }
    float alpha[2], m_scaled[2], row_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      // A row with no visible key yet keeps max -inf; subtracting 0 instead
      // keeps exp2 away from (-inf) - (-inf).  Key 0 is visible to every
      // query, so this only guards against future changes of the tile order.
      m_scaled[h] = (mx[h] == -INFINITY ? 0.f : mx[h]) * scale_log2;
      alpha[h] = ex2(m_run[h] * scale_log2 - m_scaled[h]);  // 0 on the first tile
      m_run[h] = mx[h];
    }
#pragma unroll
    for (int i = 0; i < SN; ++i) {
      s[i][0] = ex2(fmaf(s[i][0], scale_log2, -m_scaled[0]));
      s[i][1] = ex2(fmaf(s[i][1], scale_log2, -m_scaled[0]));
      s[i][2] = ex2(fmaf(s[i][2], scale_log2, -m_scaled[1]));
      s[i][3] = ex2(fmaf(s[i][3], scale_log2, -m_scaled[1]));
      row_sum[0] += s[i][0] + s[i][1];
      row_sum[1] += s[i][2] + s[i][3];
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) l_run[h] = l_run[h] * alpha[h] + row_sum[h];
#pragma unroll
    for (int i = 0; i < DN; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }

    cp_async_wait<1>();  // V(j) landed; only K(j+1) may be in flight
    __syncthreads();
    if (j + 1 < n_tiles) load_rows<BN, D>(sV + (slot ^ 1) * BN * LD, V, k0 + BN, S, tid);
    cp_async_commit();

    // O += P V.  P's accumulator fragments for keys 16kk..16kk+15 (n8 tiles
    // 2kk and 2kk+1) are exactly the a0..a3 registers of an m16k16 A fragment.
    const T* vt = sV + slot * BN * LD;
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        // V is [key][d]: row-major B, so transpose on load.
        uint32_t r[4];
        ldmatrix_x4_trans(r, smem_addr(vt + (kk * 16 + (lane & 15)) * LD + dp * 16 + (lane >> 4) * 8));
        mma_16816<T>(o[2 * dp], pa, r[0], r[1]);
        mma_16816<T>(o[2 * dp + 1], pa, r[2], r[3]);
      }
    }
  }
  cp_async_wait<0>();  // only empty groups remain; leave nothing in flight

  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    inv[h] = l > 0.f ? 1.f / l : 0.f;
  }
#pragma unroll
  for (int i = 0; i < DN; ++i) {
    const int col = i * 8 + 2 * t;
    if (row_a < S)
      *reinterpret_cast<uint32_t*>(O + static_cast<int64_t>(row_a) * D + col) =
          pack2<T>(o[i][0] * inv[0], o[i][1] * inv[0]);
    if (row_b < S)
      *reinterpret_cast<uint32_t*>(O + static_cast<int64_t>(row_b) * D + col) =
          pack2<T>(o[i][2] * inv[1], o[i][3] * inv[1]);
  }
}

template <typename T, int D>
void launch(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& o,
            bool causal) {
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2);
  auto kernel = flash_fwd_kernel<T, D>;
  // More than 48 KiB of dynamic shared memory must be opted into per kernel.
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      smem_bytes<D>()));
  const dim3 grid(static_cast<unsigned>((S + BM - 1) / BM), static_cast<unsigned>(B * H));
  const float scale_log2 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)) * 1.4426950408889634);  // log2(e)
  kernel<<<grid, THREADS, smem_bytes<D>(), ksuite::current_stream()>>>(
      reinterpret_cast<const T*>(q.data_ptr()), reinterpret_cast<const T*>(k.data_ptr()),
      reinterpret_cast<const T*>(v.data_ptr()), reinterpret_cast<T*>(o.data_ptr()),
      static_cast<int>(S), scale_log2, causal);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void dispatch_d(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& o,
                bool causal) {
  if (q.size(3) == 64) {
    launch<T, 64>(q, k, v, o, causal);
  } else {
    launch<T, 128>(q, k, v, o, causal);
  }
}

at::Tensor attention_flash(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           bool causal) {
  TORCH_CHECK(q.is_cuda() && k.is_cuda() && v.is_cuda(),
              "attention_flash: q, k and v must be CUDA tensors");
  TORCH_CHECK(q.device() == k.device() && q.device() == v.device(),
              "attention_flash: q, k and v must be on one device, got ", q.device(), ", ",
              k.device(), ", ", v.device());
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
              "attention_flash: q, k and v must share a dtype, got ", q.scalar_type(), ", ",
              k.scalar_type(), ", ", v.scalar_type());
  TORCH_CHECK(q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16,
              "attention_flash: only float16 and bfloat16 are supported (tensor-core mma), got ",
              q.scalar_type());
  TORCH_CHECK(q.dim() == 4, "attention_flash: q must be (B, H, S, D), got ", q.dim(), " dims");
  TORCH_CHECK(k.sizes() == q.sizes() && v.sizes() == q.sizes(),
              "attention_flash: q, k and v must have one shape (self-attention), got ", ksuite::shape_str(q),
              ", ", ksuite::shape_str(k), ", ", ksuite::shape_str(v));
  TORCH_CHECK(q.size(3) == 64 || q.size(3) == 128,
              "attention_flash: head dim D must be 64 or 128, got ", q.size(3));
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(),
              "attention_flash: q, k and v must be contiguous (B, H, S, D)");
  TORCH_CHECK(ksuite::aligned16(q.data_ptr()) && ksuite::aligned16(k.data_ptr()) &&
                  ksuite::aligned16(v.data_ptr()),
              "attention_flash: q, k and v must start on a 16-byte boundary");
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2);
  TORCH_CHECK(B * H <= 65535, "attention_flash: B*H = ", B * H, " exceeds the grid's y limit 65535");
  TORCH_CHECK(S * q.size(3) < (1LL << 31), "attention_flash: S*D must fit in 32-bit ints");

  const c10::cuda::CUDAGuard guard(q.device());
  at::Tensor o = at::empty_like(q);
  if (B == 0 || H == 0 || S == 0) return o;
  if (q.scalar_type() == at::kHalf) {
    dispatch_d<__half>(q, k, v, o, causal);
  } else {
    dispatch_d<__nv_bfloat16>(q, k, v, o, causal);
  }
  return o;
}

}  // namespace ksuite_attn

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("attention_flash(Tensor q, Tensor k, Tensor v, bool causal) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("attention_flash", &ksuite_attn::attention_flash);
}
