#pragma once
// The planning workflows the shells (cli/, gui/) run, assembled here so that a
// shell parses, calls one function and prints (issue 22 item 3): a plan's time
// from the discrete-event simulator, and the published runs predicted by
// either estimator, and the accuracy every prediction carries (validation/
// accuracy.hpp: validate's cross-validated error for a GPU and engine, the
// error band). The fit hints and "the best plan on N devices" are in
// explain.hpp. The shells reach the simulator and validation through this
// header only (tests/import_rules.py). Nothing here prints or parses flags.
#include <optional>
#include <string>

#include "ztune/model/prediction.hpp"
#include "ztune/validation/accuracy.hpp"
#include "ztune/validation/validation.hpp"

namespace ztune {

/// One plan's iteration as the discrete-event simulator runs it.
struct SimulatedPlan {
  TimePrediction time;       // the simulator's, with the analytical estimate's per-part split where it has none
  double analytical_s = 0;   // the analytical estimate's iteration time, for comparison
  std::size_t operations = 0;  // operations in the simulated graph
  int pacing_stage = 0;        // the pipeline stage whose breakdown `time` shows
};

/// Simulates one iteration of `p` (`analytical` is predict_time's answer for
/// it); writes the Chrome trace JSON (Perfetto) to `trace_path` unless empty.
[[nodiscard]] SimulatedPlan simulate_plan(const Transformer& m, const Plan& p, const Cluster& c,
                                          const HardwareProfile& hw, const TimePrediction& analytical,
                                          const std::string& trace_path = {});

/// The published runs of `dir` predicted as `ztune validate` does: by the
/// analytical estimate, or by the simulator (`simulated`) with the analytical
/// report beside it for comparison.
struct PublishedRunsReport {
  ValidationReport report;                  // the estimator asked for
  std::optional<ValidationReport> analytical;  // set when report is the simulator's
};
[[nodiscard]] PublishedRunsReport validate_published_runs(const std::string& dir, ValidationOptions opt,
                                                          bool simulated);

}  // namespace ztune
