#pragma once
// CudaBackend's internals shared by its two sources (cuda_backend.cpp: memory,
// the fp32 kernels, the optimizer; cuda_backend_native.cpp: the 16-bit
// kernels on stored values): the per-call scratch and the 16-bit type switch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <utility>

#include "ztune/executor/cuda/cuda_backend.hpp"
#include "ztune/kernels/cuda/check.hpp"

namespace ztune::executor::cuda {

class CudaBackend::Scratch {
 public:
  explicit Scratch(CachingAllocator& a) : alloc_(a) {}
  ~Scratch() {
    for (void* p : held_) alloc_.release(p);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename T>
  T* get(std::size_t n) {
    ZT_REQUIRE(count_ < 4, "CudaBackend::Scratch holds at most 4 buffers");
    held_[count_] = alloc_.allocate(n * sizeof(T));
    return static_cast<T*>(held_[count_++]);
  }

 private:
  CachingAllocator& alloc_;
  void* held_[4] = {nullptr, nullptr, nullptr, nullptr};
  int count_ = 0;
};

// Runs f with the CUDA element type of a 16-bit storage type.
template <typename F>
void with_half_type(StorageDtype d, F&& f) {
  if (d == StorageDtype::bf16) f(__nv_bfloat16{});
  else f(__half{});
}
// A 16-bit native hook's shape: f(H{}) with the CUDA type of d, and true;
// false without running it when d is fp32 (the operands do not share a 16-bit
// type: Backend stages the op).
template <typename F>
bool on_half(StorageDtype d, F&& f) {
  if (d == StorageDtype::fp32) return false;
  with_half_type(d, std::forward<F>(f));
  return true;
}
template <typename H>
const H* as(ConstTensorRef r) {
  return static_cast<const H*>(r.ptr);
}
template <typename H>
H* as(TensorRef r) {
  return static_cast<H*>(r.ptr);
}

}  // namespace ztune::executor::cuda
