#pragma once
// Helpers of the GPU benchmarks: device arrays, CUDA-event timing of N back-to-back
// launches after warm-up (nccl-tests' protocol: warm up, time many, never time setup),
// and the device's measured ceilings.
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <vector>

#include "ztune/kernels/cuda/check.hpp"

namespace ztune::bench {

/// A device array owned for the benchmark's lifetime.
template <typename T>
class Device {
 public:
  explicit Device(std::size_t n) : n_(n) {
    ZT_CUDA_CHECK(cudaMalloc(&p_, std::max<std::size_t>(n, 1) * sizeof(T)));
    ZT_CUDA_CHECK(cudaMemset(p_, 0, std::max<std::size_t>(n, 1) * sizeof(T)));
  }
  ~Device() { cudaFree(p_); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

/// Mean seconds per call of `body` over `iters` launches on `stream`, after `warmup`.
inline double time_per_call(cudaStream_t stream, const std::function<void()>& body, int iters = 20, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) body();
  cudaEvent_t start, stop;
  ZT_CUDA_CHECK(cudaEventCreate(&start));
  ZT_CUDA_CHECK(cudaEventCreate(&stop));
  ZT_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) body();
  ZT_CUDA_CHECK(cudaEventRecord(stop, stream));
  ZT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  ZT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(ms) / 1e3 / iters;
}

/// Exit 77 unless a device is present; prints it.
inline bool require_device() {
  if (kernels::cuda::device_count() == 0) {
    std::printf("no CUDA device visible: benchmark skipped (exit 77)\n");
    return false;
  }
  cudaDeviceProp p{};
  ZT_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf("device: %s, sm_%d%d, %d SMs, %.1f GiB\n", p.name, p.major, p.minor, p.multiProcessorCount,
              static_cast<double>(p.totalGlobalMem) / (1 << 30));
  return true;
}

}  // namespace ztune::bench
