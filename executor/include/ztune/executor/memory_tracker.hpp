#pragma once
// Bytes held per memory category, current and peak, as the run record reports
// them. The category names follow model/'s MemLine names (prediction.hpp) so the
// CLI can put measured and predicted lines side by side; host_* are host memory.
#include <array>
#include <cstddef>
#include <cstdint>

namespace ztune::executor {

enum class MemCategory : std::uint8_t {
  params,          // parameters (master fp32 on the CPU backend)
  grads,           // gradients, full or partitioned
  optimizer,       // Adam momentum and variance on the device
  activations,     // stored activations of micro-batches in flight
  comm_buckets,    // pipeline send buffers and collective staging
  zero3_gathered,  // ZeRO-3 gathered parameter buckets
  workspace,       // temporaries of one op (recompute buffers, attention grads)
  logits,          // LM-head logits and loss buffers
  host_optimizer,  // offloaded fp32 master weights, momentum, variance (host)
  host_staging,    // offload staging copies of gradients and parameters (host)
  host_params,     // ZeRO-3 parameter partitions offloaded to the host (ZeRO-Infinity)
  count
};
inline constexpr std::array<const char*, static_cast<std::size_t>(MemCategory::count)> kMemCategoryNames{
    "params", "grads", "optimizer", "activations", "comm_buckets", "zero3_gathered",
    "workspace", "logits", "host_optimizer", "host_staging", "host_params"};

class MemoryTracker {
 public:
  void on_allocate(MemCategory c, std::size_t bytes);
  void on_free(MemCategory c, std::size_t bytes);
  [[nodiscard]] std::size_t current(MemCategory c) const { return current_[index(c)]; }
  [[nodiscard]] std::size_t peak(MemCategory c) const { return peak_[index(c)]; }
  /// Peak of the sum over device categories (the high-water mark a GPU would need).
  [[nodiscard]] std::size_t peak_device_total() const { return peak_device_total_; }
  [[nodiscard]] std::size_t peak_host_total() const { return peak_host_total_; }
  /// What each device category held when the device total last reached its
  /// peak: the peak's composition (the per-category peaks fall at different
  /// moments and sum to more than it).
  [[nodiscard]] std::size_t at_device_peak(MemCategory c) const { return at_device_peak_[index(c)]; }

  static constexpr std::size_t index(MemCategory c) { return static_cast<std::size_t>(c); }
  static constexpr bool is_host(MemCategory c) {
    return c == MemCategory::host_optimizer || c == MemCategory::host_staging || c == MemCategory::host_params;
  }

 private:
  std::array<std::size_t, static_cast<std::size_t>(MemCategory::count)> current_{};
  std::array<std::size_t, static_cast<std::size_t>(MemCategory::count)> peak_{};
  std::array<std::size_t, static_cast<std::size_t>(MemCategory::count)> at_device_peak_{};
  std::size_t device_total_ = 0, host_total_ = 0, peak_device_total_ = 0, peak_host_total_ = 0;
};

}  // namespace ztune::executor
