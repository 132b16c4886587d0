#include "ztune/executor/nvme_optimizer_states.hpp"

#include <algorithm>
#include <cstring>
#include <future>
#include <istream>
#include <ostream>
#include <stdexcept>

#include "ztune/executor/host_adam.hpp"

namespace ztune::executor {

namespace {

std::size_t aligned(std::size_t bytes) {
  return (bytes + NvmeStore::kAlignment - 1) / NvmeStore::kAlignment * NvmeStore::kAlignment;
}

float* floats(AlignedHostBuffer& b) { return static_cast<float*>(b.data()); }

}  // namespace

NvmeOptimizerStates::NvmeOptimizerStates(std::filesystem::path file, std::size_t n, std::size_t chunk_floats)
    : n_(n),
      chunk_floats_(std::max<std::size_t>(1, std::min(chunk_floats, n))),
      chunk_bytes_(aligned(chunk_floats_ * sizeof(float))),
      region_bytes_(aligned(n * sizeof(float))),
      // Direct I/O where the file system allows it (tmpfs and overlay file
      // systems refuse O_DIRECT: buffered I/O there, NvmeStore::direct() says so).
      store_(std::move(file), 3 * region_bytes_, DirectIo::prefer),
      swap_{AlignedHostBuffer(chunk_bytes_), AlignedHostBuffer(chunk_bytes_), AlignedHostBuffer(chunk_bytes_)} {}

std::size_t NvmeOptimizerStates::region_offset(int region, std::size_t chunk) const {
  return static_cast<std::size_t>(region) * region_bytes_ + chunk * chunk_floats_ * sizeof(float);
}

std::size_t NvmeOptimizerStates::chunk_len(std::size_t chunk) const {
  return std::min(chunk_floats_, n_ - chunk * chunk_floats_);
}

// Whole aligned chunks move (the last one's tail is the region's padding).
void NvmeOptimizerStates::read_chunk(std::size_t chunk) {
  const std::size_t bytes = aligned(chunk_len(chunk) * sizeof(float));
  std::future<void> io[3];
  for (int r = 0; r < 3; ++r) io[r] = store_.read_async(region_offset(r, chunk), swap_[r].data(), bytes);
  for (auto& f : io) f.get();
}

void NvmeOptimizerStates::write_chunk(std::size_t chunk) {
  const std::size_t bytes = aligned(chunk_len(chunk) * sizeof(float));
  std::future<void> io[3];
  for (int r = 0; r < 3; ++r) io[r] = store_.write_async(region_offset(r, chunk), swap_[r].data(), bytes);
  for (auto& f : io) f.get();
}

void NvmeOptimizerStates::initialise(std::size_t off, const float* values, std::size_t len) {
  if (off + len > n_) throw std::out_of_range("NvmeOptimizerStates::initialise: range beyond the states");
  for (std::size_t c = off / chunk_floats_; len > 0 && c * chunk_floats_ < off + len; ++c) {
    const std::size_t c0 = c * chunk_floats_, c1 = c0 + chunk_len(c);
    const std::size_t a = std::max(off, c0), e = std::min(off + len, c1);
    read_chunk(c);
    std::memcpy(floats(swap_[kMaster]) + (a - c0), values + (a - off), (e - a) * sizeof(float));
    std::fill(floats(swap_[kM]) + (a - c0), floats(swap_[kM]) + (e - c0), 0.0f);
    std::fill(floats(swap_[kV]) + (a - c0), floats(swap_[kV]) + (e - c0), 0.0f);
    write_chunk(c);
  }
}

void NvmeOptimizerStates::step(std::size_t off, const float* grad, float* master_out, std::size_t len,
                               const kernels::AdamWParams& h, kernels::ThreadPool& pool) {
  if (off + len > n_) throw std::out_of_range("NvmeOptimizerStates::step: range beyond the states");
  for (std::size_t c = off / chunk_floats_; len > 0 && c * chunk_floats_ < off + len; ++c) {
    const std::size_t c0 = c * chunk_floats_, c1 = c0 + chunk_len(c);
    const std::size_t a = std::max(off, c0), e = std::min(off + len, c1);
    read_chunk(c);
    host_adamw(floats(swap_[kMaster]) + (a - c0), grad + (a - off), floats(swap_[kM]) + (a - c0),
               floats(swap_[kV]) + (a - c0), e - a, h, pool);
    std::memcpy(master_out + (a - off), floats(swap_[kMaster]) + (a - c0), (e - a) * sizeof(float));
    write_chunk(c);
  }
}

void NvmeOptimizerStates::write_state(std::ostream& out) {
  for (int r = 0; r < 3; ++r) {
    for (std::size_t c = 0; c * chunk_floats_ < n_; ++c) {
      store_.read_async(region_offset(r, c), swap_[r].data(), aligned(chunk_len(c) * sizeof(float))).get();
      out.write(static_cast<const char*>(swap_[r].data()),
                static_cast<std::streamsize>(chunk_len(c) * sizeof(float)));
    }
  }
}

void NvmeOptimizerStates::read_state(std::istream& in) {
  for (int r = 0; r < 3; ++r) {
    for (std::size_t c = 0; c * chunk_floats_ < n_; ++c) {
      const std::size_t len = chunk_len(c);
      in.read(static_cast<char*>(swap_[r].data()), static_cast<std::streamsize>(len * sizeof(float)));
      if (!in) throw std::runtime_error("checkpoint ends early");
      std::fill(floats(swap_[r]) + len, floats(swap_[r]) + chunk_bytes_ / sizeof(float), 0.0f);
      store_.write_async(region_offset(r, c), swap_[r].data(), aligned(len * sizeof(float))).get();
    }
  }
}

}  // namespace ztune::executor
