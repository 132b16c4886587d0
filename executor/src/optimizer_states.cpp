#include "ztune/executor/optimizer_states.hpp"

#include <cassert>
#include <istream>
#include <ostream>
#include <stdexcept>

#include "buffer_io.hpp"
#include "ztune/executor/host_adam.hpp"
#include "ztune/executor/nvme_optimizer_states.hpp"
#include "ztune/executor/onebit_adam.hpp"

namespace ztune::executor {

OptimizerStates::OptimizerStates(std::size_t n, const OptimizerStateOptions& options, Communicator& dp,
                                 Backend& backend, kernels::ThreadPool& host_pool)
    : n_(n), offload_(options.offload), storage_(options.storage), grad_storage_(options.grad_storage),
      states_(options.states), be_(backend), host_pool_(host_pool) {
  if (storage_ == StorageDtype::fp32) states_.master = StorageDtype::fp32;  // the parameters are the master
  if (!states_.fp32() && (options.offload || options.onebit_freeze_step >= 0))
    throw std::logic_error("16-bit optimizer states with offload or 1-bit Adam (refused by check_plan)");
  if (options.onebit_freeze_step >= 0 && !options.offload &&
      (storage_ != StorageDtype::fp32 || grad_storage_ != StorageDtype::fp32))
    throw std::logic_error("1-bit Adam with 16-bit storage (refused by executor_support)");
  if (options.offload && !options.nvme_file.empty()) {
    nvme_ = std::make_unique<NvmeOptimizerStates>(options.nvme_file, n);
    host_grad_ = be_.allocate(n, MemCategory::host_staging);
  } else if (options.offload) {
    host_master_ = be_.allocate(n, MemCategory::host_optimizer);
    host_m_ = be_.allocate(n, MemCategory::host_optimizer);
    host_v_ = be_.allocate(n, MemCategory::host_optimizer);
    host_grad_ = be_.allocate(n, MemCategory::host_staging);
  } else if (options.onebit_freeze_step >= 0) {
    onebit_ = std::make_unique<OnebitAdam>(n, options.onebit_freeze_step, dp, be_, host_pool_);
  } else {
    if (has_master()) master_ = be_.allocate(n, MemCategory::optimizer, states_.master);
    m_ = be_.allocate(n, MemCategory::optimizer, states_.moments);
    v_ = be_.allocate(n, MemCategory::optimizer, states_.moments);
  }
}

OptimizerStates::~OptimizerStates() = default;

bool OptimizerStates::gradients_local(int step) const { return onebit_ && onebit_->compressing(step); }

std::optional<bool> OptimizerStates::nvme_direct_io() const {
  if (!nvme_) return std::nullopt;
  return nvme_->direct_io();
}

void OptimizerStates::initialise_master(std::size_t off, ConstTensorRef params, std::size_t len) {
  assert(has_master() && "these states keep no master copy");
  if (!offload_) {
    be_.copy(master_.ref(off), params, len);  // the 16-bit values, widened (Megatron's main params)
    return;
  }
  const Backend::StagedIn src(be_, params, len);  // 16-bit parameters cross to the host as fp32
  if (nvme_) {
    // The master copy starts as the parameters, staged through host_grad_.
    be_.to_host(host_grad_.data() + off, src.data(), len);
    nvme_->initialise(off, host_grad_.data() + off, len);
  } else {
    be_.to_host(host_master_.data() + off, src.data(), len);
  }
}

void OptimizerStates::step_replicated(TensorRef params, ConstTensorRef grads, const kernels::AdamWParams& h, int step,
                                      float grad_scale) {
  if (onebit_) {
    if (grad_scale != 1.0f) throw std::logic_error("1-bit Adam takes unscaled gradients");
    onebit_->step(params.f32(), grads.f32(), h, step);
    return;
  }
  this->step({{params, grads, 0, n_}}, h, grad_scale);
}

void OptimizerStates::step(TensorRef param, ConstTensorRef grad, std::size_t off, std::size_t len,
                           const kernels::AdamWParams& h, float grad_scale) {
  if (!offload_) {
    step({{param, grad, off, len}}, h, grad_scale);
    return;
  }
  // ZeRO-Offload: gradients down (as fp32, scaled), Adam on the host, parameters back up.
  Buffer wide;
  const float* g = static_cast<const float*>(grad.ptr);
  if (!grad.is_fp32() || grad_scale != 1.0f) {
    wide = be_.allocate(len, MemCategory::workspace);
    be_.copy(wide.data(), grad, len);
    if (grad_scale != 1.0f) be_.scale(wide.data(), grad_scale, static_cast<long>(len));
    g = wide.data();
  }
  {
    ScopedOp t(be_.ops(), OpKind::offload_copy, static_cast<double>(len * sizeof(float)));
    be_.to_host(host_grad_.data() + off, g, len);
  }
  float* updated = host_master_.data() + off;
  if (nvme_) {
    // ZeRO-Infinity: the states stream from the drive; the updated master
    // weights come back in host_grad_'s range (its gradients are consumed).
    ScopedOp t(be_.ops(), OpKind::host_adam);
    updated = host_grad_.data() + off;
    nvme_->step(off, host_grad_.data() + off, updated, len, h, host_pool_);
  } else {
    ScopedOp t(be_.ops(), OpKind::host_adam);
    host_adamw(host_master_.data() + off, host_grad_.data() + off, host_m_.data() + off, host_v_.data() + off, len, h,
               host_pool_);
  }
  ScopedOp t(be_.ops(), OpKind::offload_copy, static_cast<double>(len * sizeof(float)));
  wide.release();  // the gradients' copy is on the host now
  Backend::StagedOut up(be_, param, len, false);  // 16-bit parameters: the new masters, rounded
  be_.from_host(up.data(), updated, len);
  up.commit();
}

void OptimizerStates::step(const std::vector<Range>& ranges, const kernels::AdamWParams& h, float grad_scale) {
  if (offload_) {
    for (const auto& r : ranges) step(r.param, r.grad, r.off, r.len, h, grad_scale);
    return;
  }
  const bool in_place = params_are_master();  // the step updates the parameters themselves
  std::vector<AdamWSpan> spans;
  for (const auto& r : ranges) {
    if (r.param.dtype != storage_ || r.grad.dtype != grad_storage_)
      throw std::logic_error("OptimizerStates: a range's storage differs from the states'");
    AdamWSpan s;
    s.master = in_place ? r.param.ptr : master_.ref(r.off).ptr;
    s.m = m_.ref(r.off).ptr;
    s.v = v_.ref(r.off).ptr;
    s.grad = r.grad.ptr;
    s.param = in_place ? nullptr : r.param.ptr;
    s.n = static_cast<long>(r.len);
    spans.push_back(s);
  }
  be_.adamw_fused(spans, grad_storage_, storage_, h, grad_scale, states_);
}

bool OptimizerStates::wrote_legacy_master(bool legacy_master) const {
  return legacy_master && params_are_master() && storage_ != StorageDtype::fp32;  // not 1-bit Adam's: fp32 only
}

std::size_t OptimizerStates::state_bytes(bool legacy_master) const {
  if (onebit_) return onebit_->state_floats() * sizeof(float);
  if (offload_) return 3 * n_ * sizeof(float);
  const bool master = has_master() || wrote_legacy_master(legacy_master);
  return n_ * ((master ? storage_bytes(states_.master) : 0) + 2 * storage_bytes(states_.moments));
}

void OptimizerStates::write_state(std::ostream& out) const {
  if (onebit_) {
    onebit_->write_state(out);
  } else if (nvme_) {
    nvme_->write_state(out);
  } else if (offload_) {
    write_buffer(out, host_master_, be_);
    write_buffer(out, host_m_, be_);
    write_buffer(out, host_v_, be_);
  } else {
    if (!master_.empty()) write_buffer(out, master_, be_);
    write_buffer(out, m_, be_);
    write_buffer(out, v_, be_);
  }
}

void OptimizerStates::read_state(std::istream& in, bool legacy_master) {
  if (onebit_) {
    onebit_->read_state(in);
  } else if (nvme_) {
    nvme_->read_state(in);
  } else if (offload_) {
    read_buffer(in, host_master_, be_);
    read_buffer(in, host_m_, be_);
    read_buffer(in, host_v_, be_);
  } else {
    if (!master_.empty()) read_buffer(in, master_, be_);
    if (wrote_legacy_master(legacy_master)) {
      // An older shard's copy of the master: the parameters read before it hold the same values.
      const auto copy = static_cast<std::streamsize>(n_ * storage_bytes(states_.master));
      in.ignore(copy);
      if (in.gcount() != copy) throw std::runtime_error("checkpoint ends early");
    }
    read_buffer(in, m_, be_);
    read_buffer(in, v_, be_);
  }
}

}  // namespace ztune::executor
