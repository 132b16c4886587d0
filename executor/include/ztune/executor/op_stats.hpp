#pragma once
// Time and count per operation type, and bytes per collective, for the run record.
#include <array>
#include <chrono>
#include <cstdint>

namespace ztune::executor {

enum class OpKind : std::uint8_t {
  gemm,            // matmuls and the LM head
  attention,       // attention core (scores, softmax, weighted values)
  memory_bound,    // norms, activations, embeddings, residuals, loss, device AdamW
  host_adam,       // the offloaded optimizer step on the host
  offload_copy,    // device↔host copies of the offload path
  count
};
inline constexpr std::array<const char*, static_cast<std::size_t>(OpKind::count)> kOpKindNames{
    "gemm", "attention", "memory_bound", "host_adam", "offload_copy"};

struct OpTotal {
  double seconds = 0;
  std::int64_t count = 0;
  double bytes = 0;  // offload copies only
};

class OpStats {
 public:
  void add(OpKind k, double seconds, double bytes = 0) {
    auto& t = totals_[static_cast<std::size_t>(k)];
    t.seconds += seconds;
    t.count += 1;
    t.bytes += bytes;
  }
  [[nodiscard]] const OpTotal& total(OpKind k) const { return totals_[static_cast<std::size_t>(k)]; }
  void reset() { totals_ = {}; }

 private:
  std::array<OpTotal, static_cast<std::size_t>(OpKind::count)> totals_{};
};

/// Wall time of a scope added to `stats` under `kind` when it ends.
class ScopedOp {
 public:
  ScopedOp(OpStats& stats, OpKind kind, double bytes = 0)
      : stats_(stats), kind_(kind), bytes_(bytes), start_(std::chrono::steady_clock::now()) {}
  ~ScopedOp() {
    stats_.add(kind_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(), bytes_);
  }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  OpStats& stats_;
  OpKind kind_;
  double bytes_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ztune::executor
