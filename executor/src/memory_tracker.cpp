#include "ztune/executor/memory_tracker.hpp"

#include <algorithm>
#include <cassert>

namespace ztune::executor {

void MemoryTracker::on_allocate(MemCategory c, std::size_t bytes) {
  auto i = index(c);
  current_[i] += bytes;
  peak_[i] = std::max(peak_[i], current_[i]);
  if (is_host(c)) {
    host_total_ += bytes;
    peak_host_total_ = std::max(peak_host_total_, host_total_);
  } else {
    device_total_ += bytes;
    if (device_total_ > peak_device_total_) {
      peak_device_total_ = device_total_;
      at_device_peak_ = current_;
    }
  }
}

void MemoryTracker::on_free(MemCategory c, std::size_t bytes) {
  auto i = index(c);
  assert(current_[i] >= bytes);
  current_[i] -= bytes;
  (is_host(c) ? host_total_ : device_total_) -= bytes;
}

}  // namespace ztune::executor
