#pragma once
// One plan the search evaluated: the plan, the cost model's prediction, the
// objective's value and, for the top few, the simulator's iteration time.
#include <cstdint>
#include <optional>

#include "ztune/vocab/plan.hpp"
#include "ztune/model/prediction.hpp"

namespace ztune {

struct Candidate {
  Plan plan;
  Prediction prediction;         // memory always; time when the rank pass ran
  bool timed = false;            // prediction.time is filled
  double objective = 0;          // objective_value() of the (simulated, if any) time
  std::uint64_t id = 0;          // position in the enumeration: deterministic tie-break
  std::optional<TimePrediction> simulated;  // from the simulate pass

  /// The time the ranking uses: simulated when available, else analytical.
  [[nodiscard]] const TimePrediction& time() const { return simulated ? *simulated : prediction.time; }
  /// Largest used/capacity ratio over GPU, host and NVMe (<= 1 fits).
  [[nodiscard]] double memory_pressure() const;
};

}  // namespace ztune
