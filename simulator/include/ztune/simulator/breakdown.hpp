#pragma once
// Where one stage's iteration time went, in prediction.hpp's TimePart terms:
// the parts sum to the iteration time. Compute parts are the stage's compute
// stream busy time. Every idle gap of the stream is charged to what the next
// compute (or, after the last one, the end of the iteration) waited for: the
// chain of latest-finishing inputs is walked back through the gap; the
// stage's own collectives, incoming pipeline sends, ZeRO-3 gathers, offload
// copies and host optimizer steps count as exposed time of their kind; time
// spent waiting for another stage's work is pipeline bubble.
#include <array>
#include <vector>

#include "ztune/model/prediction.hpp"
#include "ztune/simulator/event_loop.hpp"
#include "ztune/simulator/op_graph.hpp"

namespace ztune::sim {

using TimeParts = std::array<double, static_cast<std::size_t>(TimePart::count)>;

/// One breakdown per pipeline stage; each sums to t.iteration_s. With
/// `only` >= 0, only that stage's is computed (the others stay zero).
[[nodiscard]] std::vector<TimeParts> stage_breakdowns(const OpGraph& g, const Timeline& t, int only = -1);

/// The stage that paces the iteration: its own last operation ends last
/// (ties: more compute-stream time, then the lower index). Its breakdown is
/// the one reported against the analytical model's.
[[nodiscard]] int pacing_stage(const OpGraph& g, const Timeline& t);

}  // namespace ztune::sim
