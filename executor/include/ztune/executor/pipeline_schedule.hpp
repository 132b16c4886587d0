#pragma once
// The order in which one pipeline stage runs the forward and backward passes of a
// step's micro-batches. GPipe (Huang et al. 2019): all forwards, then all
// backwards. 1F1B (Narayanan et al. 2021, PipeDream-Flush): stage s runs
// min(p − s − 1, m) warm-up forwards, then alternates one forward and one
// backward, then drains the remaining backwards; at most p − s micro-batches are
// in flight. Backwards run in micro-batch order in both, so gradient sums add up
// in the same order on every stage.
#include <vector>

#include "ztune/model/plan.hpp"

namespace ztune::executor {

struct PipeAction {
  bool forward = true;
  int micro = 0;
  bool operator==(const PipeAction&) const = default;
};

std::vector<PipeAction> pipeline_schedule(Schedule kind, int stages, int stage, int micro_batches);

}  // namespace ztune::executor
