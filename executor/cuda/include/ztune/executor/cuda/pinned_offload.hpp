#pragma once
// ZeRO-Offload's device↔host traffic (Ren et al. 2021, §4): gradients go down to
// pinned host memory and updated parameters come back up on a copy stream of their
// own, so the transfers overlap the compute stream's kernels. A copy starts after
// the work already enqueued on the compute stream (its source is ready); its handle
// lets the host wait (before the host Adam reads the gradients) or the compute
// stream wait (before a kernel reads the uploaded parameters).
#include <cuda_runtime_api.h>

#include <cstddef>

namespace ztune::executor::cuda {

/// Page-locked host memory (cudaHostAlloc): DMA-able, so copies are asynchronous,
/// and page-aligned, so it can also feed executor::NvmeStore's direct I/O.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  [[nodiscard]] void* data() const { return data_; }
  [[nodiscard]] float* floats() const { return static_cast<float*>(data_); }
  [[nodiscard]] std::size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class CopyHandle {
 public:
  CopyHandle(cudaEvent_t done, cudaStream_t compute) : done_(done), compute_(compute) {}
  ~CopyHandle();
  CopyHandle(CopyHandle&& o) noexcept : done_(o.done_), compute_(o.compute_) { o.done_ = nullptr; }
  CopyHandle& operator=(CopyHandle&&) = delete;
  CopyHandle(const CopyHandle&) = delete;
  CopyHandle& operator=(const CopyHandle&) = delete;
  /// Blocks the host until the copy finished.
  void wait_host() const;
  /// Orders later compute-stream work after the copy (no host block).
  void wait_compute() const;

 private:
  cudaEvent_t done_;
  cudaStream_t compute_;
};

class PinnedOffload {
 public:
  PinnedOffload(cudaStream_t compute, cudaStream_t copy) : compute_(compute), copy_(copy) {}
  CopyHandle to_host_async(float* pinned_host, const float* device, std::size_t n);
  CopyHandle to_device_async(float* device, const float* pinned_host, std::size_t n);

 private:
  CopyHandle start(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
  cudaStream_t compute_;
  cudaStream_t copy_;
};

}  // namespace ztune::executor::cuda
