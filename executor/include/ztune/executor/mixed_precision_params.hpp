#pragma once
// Parameters, gradients and optimizer states of one rank in the storage layout of
// DeepSpeed's and Megatron's mixed precision (issue 24 item 3): with 16-bit storage
// the parameters the forward reads and the gradients the backward writes are
// bf16/fp16 (2 + 2 bytes per parameter, MemCategory params and grads), and the
// optimizer keeps fp32 master weights and Adam momentum and variance (4 + 8 bytes,
// MemCategory optimizer, as model/'s MemLine::optimizer counts them: 16 bytes per
// parameter in all). With fp32 storage the parameters are their own masters
// (4 + 4 + 8). step() is one Backend::adamw_fused over every tensor: on CUDA one
// launch that also writes the 16-bit copies.
//
// Not wired into ParamStore/the trainer yet: CudaBackend's kernel methods take
// float* (fp32 activations), so the training path still runs fp32 storage; this
// class is the storage and optimizer half, tested for its accounting on the CPU
// and for its step on a GPU (tests/gpu).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ztune/executor/backend.hpp"

namespace ztune::executor {

class MixedPrecisionParams {
 public:
  /// One flat allocation per role over all tensors, `sizes` in elements.
  MixedPrecisionParams(Backend& be, std::span<const std::int64_t> sizes, StorageDtype storage);

  [[nodiscard]] StorageDtype storage() const { return storage_; }
  [[nodiscard]] std::size_t numel() const { return numel_; }
  [[nodiscard]] std::size_t offset(std::size_t tensor) const { return offsets_[tensor]; }
  /// The parameters the forward reads and the gradients the backward writes, in storage().
  [[nodiscard]] Buffer& params() { return params_; }
  [[nodiscard]] Buffer& grads() { return grads_; }
  /// fp32 master weights: params() itself under fp32 storage.
  [[nodiscard]] float* master() { return storage_ == StorageDtype::fp32 ? params_.data() : master_.data(); }
  [[nodiscard]] Buffer& m() { return m_; }
  [[nodiscard]] Buffer& v() { return v_; }
  /// The fused step's table: one span per tensor (device addresses on CUDA).
  [[nodiscard]] const std::vector<AdamWSpan>& spans() const { return spans_; }
  /// AdamW on every tensor; gradients times grad_scale first (1/loss scale).
  void step(const kernels::AdamWParams& h, float grad_scale = 1.0f);

 private:
  Backend& be_;
  StorageDtype storage_;
  std::vector<std::size_t> offsets_;
  std::size_t numel_ = 0;
  Buffer params_, grads_, master_, m_, v_;
  std::vector<AdamWSpan> spans_;
};

}  // namespace ztune::executor
