#include "ztune/executor/cuda/pinned_offload.hpp"

#include <cuda_runtime.h>

#include <utility>

#include "ztune/kernels/cuda/check.hpp"

namespace ztune::executor::cuda {

PinnedBuffer::PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes_ > 0) ZT_CUDA_CHECK(cudaHostAlloc(&data_, bytes_, cudaHostAllocDefault));
}
PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

CopyHandle::~CopyHandle() {
  if (done_ != nullptr) cudaEventDestroy(done_);
}
void CopyHandle::wait_host() const { ZT_CUDA_CHECK(cudaEventSynchronize(done_)); }
void CopyHandle::wait_compute() const { ZT_CUDA_CHECK(cudaStreamWaitEvent(compute_, done_, 0)); }

CopyHandle PinnedOffload::start(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  cudaEvent_t ready = nullptr, done = nullptr;
  ZT_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  ZT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  ZT_CUDA_CHECK(cudaEventRecord(ready, compute_));
  ZT_CUDA_CHECK(cudaStreamWaitEvent(copy_, ready, 0));
  ZT_CUDA_CHECK(cudaEventDestroy(ready));
  ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, copy_));
  ZT_CUDA_CHECK(cudaEventRecord(done, copy_));
  return {done, compute_};
}

CopyHandle PinnedOffload::to_host_async(float* pinned_host, const float* device, std::size_t n) {
  return start(pinned_host, device, n * sizeof(float), cudaMemcpyDeviceToHost);
}
CopyHandle PinnedOffload::to_device_async(float* device, const float* pinned_host, std::size_t n) {
  return start(device, pinned_host, n * sizeof(float), cudaMemcpyHostToDevice);
}

}  // namespace ztune::executor::cuda
