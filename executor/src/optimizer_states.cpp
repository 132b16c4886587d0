#include "ztune/executor/optimizer_states.hpp"

#include <cassert>
#include <istream>
#include <ostream>

#include "buffer_io.hpp"
#include "ztune/executor/host_adam.hpp"
#include "ztune/executor/nvme_optimizer_states.hpp"
#include "ztune/executor/onebit_adam.hpp"

namespace ztune::executor {

OptimizerStates::OptimizerStates(std::size_t n, const OptimizerStateOptions& options, Communicator& dp,
                                 Backend& backend, kernels::ThreadPool& host_pool)
    : n_(n), offload_(options.offload), be_(backend), host_pool_(host_pool) {
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
    m_ = be_.allocate(n, MemCategory::optimizer);
    v_ = be_.allocate(n, MemCategory::optimizer);
  }
}

OptimizerStates::~OptimizerStates() = default;

bool OptimizerStates::gradients_local(int step) const { return onebit_ && onebit_->compressing(step); }

std::optional<bool> OptimizerStates::nvme_direct_io() const {
  if (!nvme_) return std::nullopt;
  return nvme_->direct_io();
}

void OptimizerStates::initialise_master(std::size_t off, const float* params, std::size_t len) {
  assert(offload_ && "only offloaded states keep a master copy");
  if (nvme_) {
    // The master copy starts as the parameters, staged through host_grad_.
    be_.to_host(host_grad_.data() + off, params, len);
    nvme_->initialise(off, host_grad_.data() + off, len);
  } else {
    be_.to_host(host_master_.data() + off, params, len);
  }
}

void OptimizerStates::step_replicated(float* params, const float* grads, const kernels::AdamWParams& h, int step) {
  if (onebit_) {
    onebit_->step(params, grads, h, step);
    return;
  }
  this->step(params, grads, 0, n_, h);
}

void OptimizerStates::step(float* param, const float* grad, std::size_t off, std::size_t len,
                           const kernels::AdamWParams& h) {
  if (!offload_) {
    be_.adamw(param, grad, m_.data() + off, v_.data() + off, static_cast<long>(len), h);
    return;
  }
  // ZeRO-Offload: gradients down, Adam on the host, parameters back up.
  {
    ScopedOp t(be_.ops(), OpKind::offload_copy, static_cast<double>(len * sizeof(float)));
    be_.to_host(host_grad_.data() + off, grad, len);
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
  be_.from_host(param, updated, len);
}

void OptimizerStates::step(const std::vector<Range>& ranges, const kernels::AdamWParams& h) {
  if (offload_) {
    for (const auto& r : ranges) step(r.param, r.grad, r.off, r.len, h);
    return;
  }
  std::vector<AdamWSpan> spans;
  for (const auto& r : ranges)
    spans.push_back({r.param, m_.data() + r.off, v_.data() + r.off, r.grad, nullptr, static_cast<long>(r.len)});
  be_.adamw_fused(spans, StorageDtype::fp32, StorageDtype::fp32, h);
}

std::size_t OptimizerStates::state_floats() const {
  if (onebit_) return onebit_->state_floats();
  return (offload_ ? 3 : 2) * n_;
}

void OptimizerStates::write_state(std::ostream& out) const {
  if (onebit_) {
    onebit_->write_state(out);
  } else if (nvme_) {
    nvme_->write_state(out);
  } else if (offload_) {
    write_floats(out, host_master_, be_);
    write_floats(out, host_m_, be_);
    write_floats(out, host_v_, be_);
  } else {
    write_floats(out, m_, be_);
    write_floats(out, v_, be_);
  }
}

void OptimizerStates::read_state(std::istream& in) {
  if (onebit_) {
    onebit_->read_state(in);
  } else if (nvme_) {
    nvme_->read_state(in);
  } else if (offload_) {
    read_floats(in, host_master_, be_);
    read_floats(in, host_m_, be_);
    read_floats(in, host_v_, be_);
  } else {
    read_floats(in, m_, be_);
    read_floats(in, v_, be_);
  }
}

}  // namespace ztune::executor
