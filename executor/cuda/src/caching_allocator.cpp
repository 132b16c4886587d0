#include "ztune/executor/cuda/caching_allocator.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ztune/kernels/cuda/check.hpp"

namespace ztune::executor::cuda {

namespace {
constexpr std::size_t kSmall = std::size_t{1} << 20;
std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }
}  // namespace

std::size_t CachingAllocator::rounded(std::size_t bytes) {
  const std::size_t unit = bytes < kSmall ? 512 : 2 * kSmall;
  return std::max<std::size_t>(unit, (bytes + unit - 1) / unit * unit);
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mutex_);
  free_cached_locked();
  for (auto& [p, size] : live_) cudaFree(p);  // leaked buffers: still return them to the driver
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = rounded(bytes);
  std::lock_guard lock(mutex_);
  void* p = nullptr;
  std::size_t got = size;
  auto it = cached_.lower_bound(size);
  if (it != cached_.end() && it->first <= size + size / 4) {
    p = it->second;
    got = it->first;
    cached_.erase(it);
    ++stats_.cache_hits;
  } else {
    cudaError_t status = cudaMalloc(&p, size);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      free_cached_locked();
      status = cudaMalloc(&p, size);
    }
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      std::size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw kernels::cuda::CudaError("device allocation of " + mib(size) + " failed (" + cudaGetErrorString(status) +
                                     "): " + mib(stats_.in_use) + " in use by ztune, " + mib(free_b) + " free of " +
                                     mib(total_b));
    }
    ++stats_.device_mallocs;
    stats_.reserved += size;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  }
  live_.emplace(p, got);
  stats_.in_use += got;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return p;
}

void CachingAllocator::release(void* p) noexcept {
  if (p == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(p);
  if (it == live_.end()) {
    std::fprintf(stderr, "ztune: internal error: CachingAllocator::release(%p): a pointer it did not allocate\n", p);
    std::abort();
  }
  stats_.in_use -= it->second;
  cached_.emplace(it->second, p);
  live_.erase(it);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  free_cached_locked();
}

void CachingAllocator::free_cached_locked() {
  for (auto& [size, p] : cached_) {
    cudaFree(p);
    stats_.reserved -= size;
  }
  cached_.clear();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace ztune::executor::cuda
