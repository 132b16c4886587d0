#include "ztune/executor/mixed_precision_params.hpp"

#include <stdexcept>
#include <string>

namespace ztune::executor {

MixedPrecisionParams::MixedPrecisionParams(Backend& be, std::span<const std::int64_t> sizes, StorageDtype storage)
    : be_(be), storage_(storage) {
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] < 0)
      throw std::invalid_argument("MixedPrecisionParams: tensor " + std::to_string(k) + " has " +
                                  std::to_string(sizes[k]) + " elements, expected >= 0");
    offsets_.push_back(numel_);
    numel_ += static_cast<std::size_t>(sizes[k]);
  }
  params_ = be.allocate(numel_, MemCategory::params, storage);
  grads_ = be.allocate(numel_, MemCategory::grads, storage);
  if (storage != StorageDtype::fp32) master_ = be.allocate(numel_, MemCategory::optimizer);
  m_ = be.allocate(numel_, MemCategory::optimizer);
  v_ = be.allocate(numel_, MemCategory::optimizer);
  const std::size_t elem = storage_bytes(storage);
  auto* p = static_cast<unsigned char*>(params_.raw());
  auto* g = static_cast<unsigned char*>(grads_.raw());
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] == 0) continue;
    const std::size_t o = offsets_[k];
    AdamWSpan s;
    s.master = master() + o;
    s.m = m_.data() + o;
    s.v = v_.data() + o;
    s.grad = g + o * elem;
    s.param = storage == StorageDtype::fp32 ? nullptr : static_cast<void*>(p + o * elem);
    s.n = static_cast<long>(sizes[k]);
    spans_.push_back(s);
  }
}

void MixedPrecisionParams::step(const kernels::AdamWParams& h, float grad_scale) {
  be_.adamw_fused(spans_, storage_, storage_, h, grad_scale);
}

}  // namespace ztune::executor
