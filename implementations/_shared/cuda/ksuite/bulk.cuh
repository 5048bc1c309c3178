// Bulk copies (TMA, 1-D cp.async.bulk) from global into shared memory, the
// mbarriers that count their bytes, and the number of clusters of a kernel
// the device holds at once (the size of a persistent, clustered grid).  sm_90+.
#pragma once

#include <cstdint>
#include <mutex>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include "ksuite/common.cuh"
#include "ksuite/mma_ptx.cuh"

namespace ksuite::bulk {

using ksuite::ptx::smem_addr;

// Initialises the mbarrier at shared address `bar` for COUNT arrivals a phase.
template <uint32_t COUNT = 1>
__device__ __forceinline__ void mbar_init(uint32_t bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "n"(COUNT) : "memory");
}

// Makes the mbarriers initialised before it visible to the bulk copies (the
// async proxy) and the cluster; a CTA barrier after it, before their first use.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Spins until the mbarrier at shared address `bar` completes phase `parity`.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{.reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}

// The same, acquiring at cluster scope: the phase's bytes came from other
// CTAs' st.async (whose complete_tx releases at cluster scope).
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{.reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}

// Arrives on `bar` and expects `bytes` more of transaction count this phase.
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Bulk copy of `bytes` (a multiple of 16, 16-byte aligned ends) from global
// `src` to shared `dst` in pieces of <= 16 KB, counted by `bar`.
__device__ __forceinline__ void bulk_copy(uint32_t dst, const char* src, uint32_t bytes, uint32_t bar) {
  constexpr uint32_t kPiece = 16384;
  for (uint32_t off = 0; off < bytes; off += kPiece) {
    const uint32_t size = min(kPiece, bytes - off);
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst + off),
        "l"(src + off), "r"(size), "r"(bar)
        : "memory");
  }
}

// Arms `bar` for `bytes` and bulk-copies them (one thread).  bytes == 0
// completes the barrier's phase at once.
__device__ __forceinline__ void tma_load(uint32_t dst, const char* src, uint32_t bytes, uint32_t bar) {
  mbar_expect(bar, bytes);
  bulk_copy(dst, src, bytes, bar);
}

// Clusters of `ctas` CTAs of `kernel` (threads, smem bytes each) that fit the
// device at once (cudaOccupancyMaxActiveClusters, which knows how clusters
// pack into GPCs), cached per device and configuration.
template <typename... Params>
int max_active_clusters(void (*kernel)(Params...), int threads, int smem, int ctas) {
  struct Entry {
    const void* kernel;
    int device, threads, smem, ctas, clusters;
  };
  constexpr int kEntries = 64;
  static std::mutex mutex;
  static Entry cache[kEntries] = {};
  static int next = 0;
  const int device = c10::cuda::current_device();
  const void* key = reinterpret_cast<const void*>(kernel);
  const std::lock_guard<std::mutex> lock(mutex);
  for (const Entry& e : cache)
    if (e.kernel == key && e.device == device && e.threads == threads && e.smem == smem && e.ctas == ctas)
      return e.clusters;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config = ksuite::cluster_config(key, unsigned(ctas), threads, smem, ctas, nullptr, &attr);
  int clusters = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  cache[next] = Entry{key, device, threads, smem, ctas, clusters};
  next = (next + 1) % kEntries;
  return clusters;
}

}  // namespace ksuite::bulk
