#pragma once
// Per-collective totals: count, bytes, time; algbw and busbw as nccl-tests define
// them (doc/PERFORMANCE.md): S = the whole array (the gathered array for
// all-gather, the input for reduce-scatter), algbw = S/t, busbw = algbw·factor with
// factor 2(n−1)/n for all-reduce, (n−1)/n for reduce-scatter and all-gather,
// 1 for broadcast and point-to-point. GB/s are decimal (1e9).
#include <array>
#include <cstdint>

#include "ztune/vocab/collective.hpp"

namespace ztune::executor {

// Kinds, names and bus factors: vocab/collective.hpp (one vocabulary with the
// cost model and the calibration fit).

struct CollTotal {
  std::int64_t count = 0;
  double bytes = 0;    // Σ S
  double seconds = 0;  // Σ launch-to-completion time
  [[nodiscard]] double algbw_gbps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
};

class CommStats {
 public:
  void add(Collective k, double bytes, double seconds) {
    auto& t = totals_[static_cast<std::size_t>(k)];
    ++t.count;
    t.bytes += bytes;
    t.seconds += seconds;
  }
  [[nodiscard]] const CollTotal& total(Collective k) const { return totals_[static_cast<std::size_t>(k)]; }
  void reset() { totals_ = {}; }

 private:
  std::array<CollTotal, static_cast<std::size_t>(Collective::count)> totals_{};
};

}  // namespace ztune::executor
