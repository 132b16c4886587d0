#pragma once
// A buffer owned by a Backend (host memory on the CPU backend, device memory on
// CUDA), of fp32 elements unless allocated with a 16-bit StorageDtype: ref()
// names it with its type for the Backend and Communicator interfaces, data() is
// its fp32 pointer (a 16-bit buffer refuses it: passing one as fp32 would
// misread its bytes). Move-only; returns its bytes to the backend's allocator and memory
// tracker when destroyed, so every byte is counted under one category.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "ztune/executor/memory_tracker.hpp"
#include "ztune/executor/storage.hpp"

namespace ztune::executor {

class Backend;

class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* owner, float* data, std::size_t numel, MemCategory category)
      : owner_(owner), data_(data), numel_(numel), category_(category) {}
  Buffer(Backend* owner, float* data, std::size_t numel, MemCategory category, StorageDtype dtype)
      : owner_(owner), data_(data), numel_(numel), category_(category), dtype_(dtype) {}
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      owner_ = std::exchange(o.owner_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      numel_ = std::exchange(o.numel_, 0);
      category_ = o.category_;
      dtype_ = o.dtype_;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  [[nodiscard]] float* data() const {
    if (dtype_ != StorageDtype::fp32)
      throw std::logic_error(std::string("Buffer::data() on ") + storage_name(dtype_) + " storage (use ref())");
    return data_;
  }
  /// The tensor with its storage type; `offset` elements in.
  [[nodiscard]] TensorRef ref(std::size_t offset = 0) const { return TensorRef(data_, dtype_) + offset; }
  /// The address, whatever the type (for byte-level I/O).
  [[nodiscard]] void* raw() const { return data_; }
  [[nodiscard]] std::size_t size() const { return numel_; }
  [[nodiscard]] bool empty() const { return data_ == nullptr; }
  [[nodiscard]] MemCategory category() const { return category_; }
  [[nodiscard]] StorageDtype dtype() const { return dtype_; }
  [[nodiscard]] std::size_t bytes() const { return numel_ * storage_bytes(dtype_); }
  /// Frees now (the buffer becomes empty).
  void release();

 private:
  Backend* owner_ = nullptr;
  float* data_ = nullptr;
  std::size_t numel_ = 0;
  MemCategory category_ = MemCategory::workspace;
  StorageDtype dtype_ = StorageDtype::fp32;
};

}  // namespace ztune::executor
