// What feeding the tensor pipe costs the warp-specialised mma.sync GEMM
// (implementations/gemm/cuda/gemm_ws_kernel.cuh, tile 128 x 256 x 64): its
// consumer loop run on data that is already on chip, in three steps.
//
//   MODE 0  registers: each warp's A and B fragments are loaded once; the loop
//           is the GEMM's 32 mma per k16 slice (64 x 64 of C a warp, 8 warps)
//           and nothing else.
//   MODE 1  + ldmatrix: every slice loads its fragments from the GEMM's
//           swizzled shared-memory stages with the GEMM's ldmatrix pattern,
//           double-buffered in registers; the stages never change, so no
//           barrier is waited on.
//   MODE 2  + refills: a producer thread refills the stages with bulk copies
//           (48 KiB a stage, the GEMM's bytes) from a 192 KiB global buffer
//           that stays in L2, over the GEMM's full/empty mbarrier ring; the
//           consumers wait on `full` and release `empty` as the GEMM does.
//   MODE 3  as MODE 0, but every mma of a slice reads the same A and B
//           fragments (only the accumulators differ): what the loop of MODE 0
//           loses to reading a new B fragment (2 registers) for every mma.
//
// Against the real kernel this leaves out only DRAM and L2 misses, the
// epilogue and the last partial wave, so the three rates bound what the GEMM
// can reach with this warp tile and this way of filling shared memory.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>

#include "hopper.cuh"
#include "ksuite/bulk.cuh"
#include "ksuite/mma_ptx.cuh"
#include "warp_tile.cuh"

namespace {

constexpr int kStages = 4, kBM = 128, kBN = 256;
constexpr int kABytes = kBM * 128, kBoxBytes = 64 * 128, kBBytes = (kBN / 64) * kBoxBytes;
constexpr int kStageBytes = kABytes + kBBytes;               // 48 KiB
constexpr int kSmemBytes = kStages * kStageBytes + 1024;     // + alignment slack
constexpr int kConsumerWarps = 8, kThreads = 32 * (kConsumerWarps + 4);
constexpr int MT = 4, NT = 8;

template <typename T, int MODE>
__global__ void __launch_bounds__(kThreads, 1)
feed_loop(const uint4* __restrict__ src, float* __restrict__ out, long long* __restrict__ clocks, int n_stages) {
  using namespace ksuite_hopper;
  using namespace ksuite::ptx;
  __shared__ __align__(8) uint64_t full_bar[kStages];
  __shared__ __align__(8) uint64_t empty_bar[kStages];
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                             ~static_cast<uintptr_t>(1023));
  uint8_t* smem_a = smem;
  uint8_t* smem_b = smem + kStages * kABytes;

  // Every stage starts as a copy of src (random values of T).
  for (int i = threadIdx.x; i < kStages * kStageBytes / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(smem)[i] = src[i];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full_bar[s], 1);
      mbar_init(&empty_bar[s], kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0);
  const int lane = threadIdx.x % 32;
  if (warp >= kConsumerWarps) {
    setmaxnreg_dec<40>();
    if (MODE == 2 && warp == kConsumerWarps && lane == 0) {
      const char* g = reinterpret_cast<const char*>(src);
      int stage = 0;
      uint32_t phase = 0;
      for (int s = 0; s < n_stages; ++s) {
        mbar_wait(&empty_bar[stage], phase ^ 1);
        // The A part and the B part of the stage, as the GEMM's boxes land,
        // counted by one arrival that expects all of the stage's bytes.
        const uint32_t bar = smem_u32(&full_bar[stage]);
        ksuite::bulk::mbar_expect(bar, kStageBytes);
        ksuite::bulk::bulk_copy(smem_u32(smem_a + stage * kABytes), g + stage * kStageBytes, kABytes, bar);
        ksuite::bulk::bulk_copy(smem_u32(smem_b + stage * kBBytes), g + stage * kStageBytes + kABytes, kBBytes,
                                bar);
        if (++stage == kStages) { stage = 0; phase ^= 1; }
      }
    }
    return;
  }

  setmaxnreg_inc<232>();
  const int wm = warp / (kBN / 64), wn = warp % (kBN / 64);
  const uint32_t sw = ((static_cast<uint32_t>(lane) >> 4) ^ (static_cast<uint32_t>(lane) & 7u)) << 4;
  const uint32_t a_thr = smem_u32(smem_a) + (wm * 64 + (lane & 15)) * 128 + sw;
  const uint32_t b_thr = smem_u32(smem_b) + wn * kBoxBytes + (lane & 15) * 128 + sw;
  uint32_t af[2][MT][4];
  uint32_t bf[2][NT][2];
  auto load_frags = [&](int buf, int stage, int kk) {
    const uint32_t a = (a_thr + stage * kABytes) ^ (kk << 5);
#pragma unroll
    for (int i = 0; i < MT; ++i) ldmatrix_x4(af[buf][i], a + i * 16 * 128);
    const uint32_t b = b_thr + stage * kBBytes + kk * 16 * 128;
#pragma unroll
    for (int j = 0; j < NT / 2; ++j) ksuite_gemm::load_b_pair(bf[buf], j, b ^ (j << 5));
  };

  float acc[MT][NT][4];
  zero_acc(acc);
  load_frags(0, 0, 0);
  load_frags(1, 0, 1);
  long long c0 = clock64();
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  int stage = 0;
  uint32_t phase = 0;
  if (MODE == 2) mbar_wait(&full_bar[0], 0);
  for (int s = 0; s < n_stages; ++s) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int done = stage;
      if (MODE == 1 || MODE == 2) {
        if (kk + 1 < 4) {
          load_frags((kk + 1) & 1, stage, kk + 1);
        } else {
          if (++stage == kStages) { stage = 0; phase ^= 1; }
          if (s + 1 < n_stages) {
            if (MODE == 2) mbar_wait(&full_bar[stage], phase);
            load_frags(0, stage, 0);
          }
        }
      }
      if (MODE == 3) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int j = 0; j < NT; ++j) mma_16816<T>(acc[i][j], af[kk & 1][0], bf[kk & 1][0][0], bf[kk & 1][0][1]);
      } else {
        ksuite_gemm::mma_slice<T>(acc, af[kk & 1], bf[kk & 1]);
      }
      if (MODE == 2 && kk == 3 && lane == 0) mbar_arrive(&empty_bar[done]);
    }
  }
  long long c1 = clock64();
  unsigned long long t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) sum += acc[i][j][0] + acc[i][j][1] + acc[i][j][2] + acc[i][j][3];
  out[blockIdx.x * kConsumerWarps * 32 + threadIdx.x] = sum;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    clocks[0] = c1 - c0;
    clocks[1] = static_cast<long long>(t1 - t0);
  }
}

template <typename T, int MODE>
void launch(const uint4* src, float* out, long long* clocks, int blocks, int n_stages) {
  auto kernel = feed_loop<T, MODE>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  kernel<<<blocks, kThreads, kSmemBytes, c10::cuda::getCurrentCUDAStream()>>>(src, out, clocks, n_stages);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

// src: kStages * 48 KiB of random values of the dtype; out: blocks * 256
// floats.  Returns block 0's (SM cycles, nanoseconds) of its consumer loop.
torch::Tensor run(torch::Tensor src, torch::Tensor out, int64_t blocks, int64_t n_stages, int64_t mode, bool bf16) {
  TORCH_CHECK(src.is_cuda() && src.numel() * src.element_size() == kStages * kStageBytes,
              "mma_feed: src must be ", kStages * kStageBytes, " bytes on the GPU");
  TORCH_CHECK(out.is_cuda() && out.numel() >= blocks * kConsumerWarps * 32, "mma_feed: out too small");
  TORCH_CHECK(mode >= 0 && mode <= 3, "mma_feed: mode must be 0..3");
  auto clocks = torch::zeros({2}, src.options().dtype(torch::kInt64));
  const uint4* s = reinterpret_cast<const uint4*>(src.data_ptr());
  float* o = out.data_ptr<float>();
  long long* c = reinterpret_cast<long long*>(clocks.data_ptr<int64_t>());
  const int b = static_cast<int>(blocks), n = static_cast<int>(n_stages);
#define KS_FEED(M)                                                   \
  if (mode == M) {                                                   \
    if (bf16) launch<__nv_bfloat16, M>(s, o, c, b, n);               \
    else launch<__half, M>(s, o, c, b, n);                           \
  }
  KS_FEED(0) KS_FEED(1) KS_FEED(2) KS_FEED(3)
#undef KS_FEED
  return clocks;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
