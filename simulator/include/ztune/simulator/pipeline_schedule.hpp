#pragma once
// The order in which one pipeline stage runs its forward and backward passes.
// The engine never reorders a stage's compute stream: this order is enforced
// with edges, as the frameworks enforce it in their schedule loops.
#include <cstdint>
#include <vector>

#include "ztune/model/plan.hpp"

namespace ztune::sim {

enum class Pass : std::uint8_t { forward, backward };

struct ScheduleStep {
  Pass pass = Pass::forward;
  int microbatch = 0;
  int chunk = 0;  // model chunk on this stage; virtual stage = chunk · stages + stage
};

/// Steps of `stage` (0-based) for `microbatches` micro-batches.
///  - gpipe: all forwards, then all backwards in reverse micro-batch order
///    (Huang et al. 2019, Fig. 2c).
///  - one_f_one_b: PipeDream-flush (Narayanan et al. 2021 §2.2, Megatron's
///    forward_backward_pipelining_without_interleaving): min(p−s−1, m) warm-up
///    forwards, then one-forward-one-backward, then the remaining backwards.
///  - interleaved: Megatron's forward_backward_pipelining_with_interleaving
///    (Narayanan et al. 2021 §2.2.2): 2(p−s−1) + (v−1)p warm-up forwards over
///    v chunks in groups of p micro-batches; needs m divisible by p.
[[nodiscard]] std::vector<ScheduleStep> stage_schedule(Schedule schedule, int stage, int stages, int chunks,
                                                       int microbatches);

}  // namespace ztune::sim
