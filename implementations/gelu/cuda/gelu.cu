// gelu: y = x * 0.5 * (1 + erf(x / sqrt 2)), elementwise, computed in float32.
//
// Napkin math (H200, copy ceiling ~4.2 TB/s): bf16 N = 2^28 moves 1 GiB, 0.25 ms
// at the ceiling.  The issue rate is the other limit: 132 SMs x 4 schedulers x
// 1.98 GHz issue ~1.0e12 warp instructions/s, ~2.6e8 in 0.25 ms, i.e. ~31
// instructions per element at 100% issue.  erff (libdevice) with one-element
// conversions and 64-bit index math would take ~30 of them; ksuite::gelu_fast
// is ~16 (rcp + ex2 on the MUFU pipe, 10 FMAs; gelu_as, for 16-bit outputs,
// 5 FMAs), bf16 is converted two elements per instruction and indices inside
// a tile are 32-bit (only the tile base is 64-bit): ~17 a bf16 element, half
// the memory time.  float32 has twice the time per element.
//
// Memory side: each thread loads UNROLL 16-byte packs of one contiguous tile
// (THREADS x UNROLL packs) before any math; at UNROLL 4 a resident SM has
// 2048 x 64 B = 128 KB in flight (Little: ~4.2 TB/s x ~1 us / 132 SMs ~ 32 KB
// needed).  Variants (gelu_v's `variant`, 0 = auto), all tuned by the
// registered op (implementations/gelu/cuda/__init__.py); 3 names no design:
//  1 tiles of 256 threads x 4 packs, one tile a block, grid = tiles (the
//    copy kernel's shape).
//  2 persistent: the same tiles, grid = resident blocks (occupancy API) x SMs,
//    grid-stride over tiles.
//  4 tiles, UNROLL 8 (128 B a thread in flight).
//  5 tiles, UNROLL 2.
//  6 tiles, UNROLL 1 (auto's choice below 4 waves of UNROLL-4 tiles).
//  7 tiles of 128 threads x 2 packs with plain ld.global (no .nc, no L1
//    no_allocate hint): the shape of a Triton pointwise kernel (1024 float32
//    elements on 4 warps, no eviction hint), which meets the copy ceiling at
//    2^28 float32.
//  8 tiles of 256 threads x 1 pack with plain ld.global.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "ksuite/common.cuh"
#include "ksuite/gelu.cuh"

namespace {

constexpr int kThreads = 256;

template <typename T, bool FAST>
__device__ __forceinline__ float gelu1(float v) {
  if constexpr (FAST) {
    return ksuite::gelu_out<T>(v);
  } else {
    return ksuite::gelu_erf(v);
  }
}

// PATH: how x is read (ksuite::LoadPath): the read-only no-allocate path by
// default, or plain ld.global.
template <typename T, int UNROLL, int THREADS = kThreads, int PATH = ksuite::kNcStream>
__global__ void __launch_bounds__(THREADS)
gelu_tile_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t packs, int64_t n, int64_t tiles) {
  constexpr int VEC = ksuite::vec16<T>();
  constexpr int TILE = THREADS * UNROLL;  // packs
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t base = tile * TILE;
    const T* xt = x + base * VEC;
    T* yt = y + base * VEC;
    uint4 raw[UNROLL];
    if (base + TILE <= packs) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        raw[u] = ksuite::ld16_path<PATH>(xt + (u * THREADS + threadIdx.x) * VEC);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        float f[VEC];
        ksuite::raw_to_floats<T>(raw[u], f);
#pragma unroll
        for (int k = 0; k < VEC; ++k) f[k] = ksuite::gelu_out<T>(f[k]);
        ksuite::st16(yt + (u * THREADS + threadIdx.x) * VEC, ksuite::floats_to_raw<T>(f));
      }
    } else {
      const int left = static_cast<int>(packs - base);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = u * THREADS + threadIdx.x;
        if (i < left) raw[u] = ksuite::ld16_path<PATH>(xt + i * VEC);
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = u * THREADS + threadIdx.x;
        if (i < left) {
          float f[VEC];
          ksuite::raw_to_floats<T>(raw[u], f);
#pragma unroll
          for (int k = 0; k < VEC; ++k) f[k] = ksuite::gelu_out<T>(f[k]);
          ksuite::st16(yt + i * VEC, ksuite::floats_to_raw<T>(f));
        }
      }
    }
  }
  // The n % VEC elements after the last pack.
  if (blockIdx.x == 0) {
    const int64_t i = packs * VEC + threadIdx.x;
    if (i < n) y[i] = ksuite::from_float<T>(ksuite::gelu_out<T>(ksuite::to_float(x[i])));
  }
}

// One element per thread: misaligned views (FAST) and the cuda:scalar
// baseline (erff), which shows what the vector loads buy.
template <typename T, bool FAST>
__global__ void __launch_bounds__(kThreads)
gelu_scalar_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = ksuite::from_float<T>(gelu1<T, FAST>(ksuite::to_float(x[i])));
}

void check_input(const at::Tensor& x, const char* op) {
  KSUITE_CHECK(x.is_cuda(), op, ": x must be a CUDA tensor, got one on ", x.device());
  KSUITE_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf ||
                   x.scalar_type() == at::kBFloat16,
               op, ": x must be float32, float16 or bfloat16, got ", x.scalar_type());
  KSUITE_CHECK(x.is_contiguous(), op, ": x must be contiguous (call .contiguous() first)");
}

constexpr int kGeluVariants = 8;

// 3 names no design: the other numbers stay those that benchmarks and NOTES.md use.
bool valid_gelu_variant(int64_t v) { return v >= 0 && v <= kGeluVariants && v != 3; }

template <typename T, int UNROLL, int THREADS = kThreads, int PATH = ksuite::kNcStream>
void launch_tiles(const T* x, T* y, int64_t n, bool persistent, cudaStream_t stream) {
  constexpr int VEC = ksuite::vec16<T>();
  const int64_t packs = n / VEC;
  const int64_t tiles = (packs + int64_t(THREADS) * UNROLL - 1) / (int64_t(THREADS) * UNROLL);
  int64_t grid = std::max<int64_t>(tiles, 1);  // >= 1 block: the tail needs one
  if (persistent) {
    constexpr auto kernel = gelu_tile_kernel<T, UNROLL, THREADS, PATH>;
    const int per_sm = std::max(ksuite::resident_blocks<kernel, THREADS>(), 1);
    grid = std::min<int64_t>(grid, int64_t(per_sm) * ksuite::sm_count());
  }
  grid = std::min<int64_t>(grid, 0x7fffffff);
  gelu_tile_kernel<T, UNROLL, THREADS, PATH><<<static_cast<unsigned>(grid), THREADS, 0, stream>>>(
      x, y, packs, n, tiles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Variant 0 (auto): for 16-bit types, tiles of 4 packs a thread once there
// are >= 4 waves of them (2048 threads an SM), else tiles of 1 pack, so a
// small N still spreads over every SM.  float32 always takes 1 pack a thread,
// the faster of the two in a variant sweep on the H200 at 2^28 elements
// (gelu_v's variants 1 and 6 let a suite run check it again).
int auto_variant(int64_t n, int vec) {
  if (vec == 4) return 6;
  const int64_t tiles4 = n / vec / (kThreads * 4);
  const int64_t wave = int64_t(ksuite::sm_count()) * (2048 / kThreads);
  return tiles4 >= 4 * wave ? 1 : 6;
}

at::Tensor gelu_run(const at::Tensor& x, int64_t variant, const char* op) {
  check_input(x, op);
  KSUITE_CHECK(valid_gelu_variant(variant), op, ": variant must be 0 (auto), 1, 2 or 4 .. ", kGeluVariants,
               ", got ", variant);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  cudaStream_t stream = ksuite::current_stream();
  KSUITE_DISPATCH_FLOATS(x.scalar_type(), "ksuite_gelu", [&] {
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    scalar_t* yp = y.mutable_data_ptr<scalar_t>();
    if (!(ksuite::aligned16(xp) && ksuite::aligned16(yp))) {
      // A view whose storage offset breaks 16-byte alignment: no vector loads.
      const int64_t blocks = (n + kThreads - 1) / kThreads;
      gelu_scalar_kernel<scalar_t, true><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(xp, yp, n);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    const int v = variant == 0 ? auto_variant(n, ksuite::vec16<scalar_t>()) : static_cast<int>(variant);
    switch (v) {
      case 1: launch_tiles<scalar_t, 4>(xp, yp, n, false, stream); break;
      case 2: launch_tiles<scalar_t, 4>(xp, yp, n, true, stream); break;
      case 4: launch_tiles<scalar_t, 8>(xp, yp, n, false, stream); break;
      case 5: launch_tiles<scalar_t, 2>(xp, yp, n, false, stream); break;
      case 7: launch_tiles<scalar_t, 2, 128, ksuite::kPlain>(xp, yp, n, false, stream); break;
      case 8: launch_tiles<scalar_t, 1, 256, ksuite::kPlain>(xp, yp, n, false, stream); break;
      default: launch_tiles<scalar_t, 1>(xp, yp, n, false, stream); break;  // 6
    }
  });
  return y;
}

at::Tensor gelu_cuda(const at::Tensor& x) { return gelu_run(x, 0, "kernel_suite::gelu"); }

at::Tensor gelu_v_cuda(const at::Tensor& x, int64_t variant) {
  return gelu_run(x, variant, "kernel_suite::gelu_v");
}

at::Tensor gelu_scalar_cuda(const at::Tensor& x) {
  check_input(x, "kernel_suite::gelu_scalar");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  cudaStream_t stream = ksuite::current_stream();
  KSUITE_DISPATCH_FLOATS(x.scalar_type(), "ksuite_gelu_scalar", [&] {
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    gelu_scalar_kernel<scalar_t, false><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        x.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return y;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kernel_suite, m) {
  m.def("gelu(Tensor x) -> Tensor");
  m.def("gelu_v(Tensor x, int variant) -> Tensor");
  m.def("gelu_scalar(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(kernel_suite, CUDA, m) {
  m.impl("gelu", &gelu_cuda);
  m.impl("gelu_v", &gelu_v_cuda);
  m.impl("gelu_scalar", &gelu_scalar_cuda);
}
