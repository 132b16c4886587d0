#include "ztune/executor/onebit_adam.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <istream>
#include <ostream>
#include <stdexcept>

#include "ztune/executor/host_adam.hpp"
#include "ztune/kernels/onebit.hpp"

namespace ztune::executor {

namespace {

constexpr int kTagOnebit = 1001;

// Sign bits travel inside the float payload (the Communicator moves fp32
// words; the bits are copied, never computed on).
std::uint8_t* bits_of(float* payload) { return reinterpret_cast<std::uint8_t*>(payload + 1); }
const std::uint8_t* bits_of(const float* payload) { return reinterpret_cast<const std::uint8_t*>(payload + 1); }

}  // namespace

OnebitAdam::OnebitAdam(std::size_t n, int freeze_step, Communicator& dp, Backend& backend, kernels::ThreadPool& pool)
    : n_(n), freeze_step_(freeze_step), dp_(dp), be_(backend), pool_(pool) {
  const auto ranks = static_cast<std::size_t>(dp_.size());
  chunk_ = (n_ + ranks - 1) / ranks;
  chunk_ = (chunk_ + 31) / 32 * 32;
  payload_ = 1 + chunk_ / 32;
  const std::size_t padded = chunk_ * ranks;
  m_ = be_.allocate(padded, MemCategory::host_optimizer);
  v_ = be_.allocate(n_, MemCategory::host_optimizer);
  worker_error_ = be_.allocate(padded, MemCategory::host_optimizer);
  server_error_ = be_.allocate(chunk_, MemCategory::host_optimizer);
  params_ = be_.allocate(n_, MemCategory::host_staging);
  grads_ = be_.allocate(n_, MemCategory::host_staging);
}

void OnebitAdam::step(float* params, const float* grads, const kernels::AdamWParams& h, int step) {
  be_.to_host(params_.data(), params, n_);
  be_.to_host(grads_.data(), grads, n_);
  if (!compressing(step)) {
    host_adamw(params_.data(), grads_.data(), m_.data(), v_.data(), n_, h, pool_);
    be_.from_host(params, params_.data(), n_);
    return;
  }
  // Local momentum: the store's gradients sum to the batch gradient over ranks.
  const auto scale_up = static_cast<float>(dp_.size());
  float* m = m_.data();
  const float* g = grads_.data();
  for (std::size_t i = 0; i < n_; ++i) m[i] = h.beta1 * m[i] + (1.0f - h.beta1) * scale_up * g[i];
  compressed_average();
  const float bc1 = 1.0f - std::pow(h.beta1, static_cast<float>(h.step));
  const float bc2 = 1.0f - std::pow(h.beta2, static_cast<float>(std::max(1, freeze_step_)));
  float* p = params_.data();
  const float* v = v_.data();
  for (std::size_t i = 0; i < n_; ++i)
    p[i] -= h.lr * ((m[i] / bc1) / (std::sqrt(v[i] / bc2) + h.eps) + h.weight_decay * p[i]);
  be_.from_host(params, params_.data(), n_);
}

void OnebitAdam::compressed_average() {
  const int ranks = dp_.size();
  const int me = dp_.rank();
  const auto chunk = static_cast<long>(chunk_);
  send_.assign(payload_ * static_cast<std::size_t>(ranks), 0.0f);
  recv_.assign(payload_ * static_cast<std::size_t>(ranks), 0.0f);
  // 1. Worker compression, one scale per destination chunk.
  for (int j = 0; j < ranks; ++j) {
    float* out = send_.data() + payload_ * static_cast<std::size_t>(j);
    const std::size_t off = chunk_ * static_cast<std::size_t>(j);
    out[0] = kernels::cpu::onebit_compress(bits_of(out), worker_error_.data() + off, m_.data() + off, chunk);
  }
  // 2. All-to-all on point-to-point messages.
  std::vector<RequestPtr> reqs;
  for (int j = 0; j < ranks; ++j) {
    if (j == me) continue;
    reqs.push_back(dp_.recv_async(recv_.data() + payload_ * static_cast<std::size_t>(j), payload_, j, kTagOnebit));
    reqs.push_back(dp_.send_async(send_.data() + payload_ * static_cast<std::size_t>(j), payload_, j, kTagOnebit));
  }
  std::memcpy(recv_.data() + payload_ * static_cast<std::size_t>(me), send_.data() + payload_ * static_cast<std::size_t>(me),
              payload_ * sizeof(float));
  for (auto& r : reqs) r->wait();
  // 3. Server: average the ranks' chunks, compress with the server error.
  average_.assign(chunk_, 0.0f);
  for (int j = 0; j < ranks; ++j) {
    const float* in = recv_.data() + payload_ * static_cast<std::size_t>(j);
    kernels::cpu::onebit_decompress_add(average_.data(), bits_of(in), in[0], 1.0f / static_cast<float>(ranks), chunk);
  }
  server_payload_.assign(payload_, 0.0f);
  server_payload_[0] =
      kernels::cpu::onebit_compress(bits_of(server_payload_.data()), server_error_.data(), average_.data(), chunk);
  // 4. All-gather the servers' chunks; everyone decompresses the same momentum.
  gathered_.assign(payload_ * static_cast<std::size_t>(ranks), 0.0f);
  dp_.all_gather(server_payload_.data(), gathered_.data(), payload_);
  std::fill(m_.data(), m_.data() + m_.size(), 0.0f);
  for (int j = 0; j < ranks; ++j) {
    const float* in = gathered_.data() + payload_ * static_cast<std::size_t>(j);
    kernels::cpu::onebit_decompress_add(m_.data() + chunk_ * static_cast<std::size_t>(j), bits_of(in), in[0], 1.0f,
                                        chunk);
  }
  // The padding past n carries no parameter: keep its momentum at zero.
  for (std::size_t i = n_; i < m_.size(); ++i) m_.data()[i] = 0.0f;
}

namespace {
void write_buffer(std::ostream& out, const Buffer& b) {
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size() * sizeof(float)));
}
void read_buffer(std::istream& in, Buffer& b) {
  in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size() * sizeof(float)));
  if (!in) throw std::runtime_error("checkpoint ends early (1-bit Adam state)");
}
}  // namespace

void OnebitAdam::write_state(std::ostream& out) const {
  write_buffer(out, m_);
  write_buffer(out, v_);
  write_buffer(out, worker_error_);
  write_buffer(out, server_error_);
}

void OnebitAdam::read_state(std::istream& in) {
  read_buffer(in, m_);
  read_buffer(in, v_);
  read_buffer(in, worker_error_);
  read_buffer(in, server_error_);
}

std::size_t OnebitAdam::state_floats() const {
  return m_.size() + v_.size() + worker_error_.size() + server_error_.size();
}

}  // namespace ztune::executor
