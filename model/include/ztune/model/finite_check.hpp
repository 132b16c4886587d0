#pragma once
// Derived figures are checked finite before they are printed, stored, exported
// or simulated (issue 20). Every input figure is read as a finite number > 0, but
// a bandwidth, peak or efficiency of 5e-324 still makes a time infinite; such a
// prediction is an InputError naming the part and the inputs that feed it, not
// "iteration inf" on stdout and Inf in the database.
#include <string>

#include "ztune/model/prediction.hpp"
#include "ztune/vocab/cluster.hpp"

namespace ztune {

/// The first figure of `t` that is not a finite number >= 0 ("dp_comm = inf",
/// "iteration_s = nan"), or "" when every one is.
[[nodiscard]] std::string non_finite_time(const TimePrediction& t);

/// Why a plan's time cannot be priced on this cluster at all, or "": the
/// cluster states no throughput for the plan's precision ("cluster local-cpu
/// states no bf16 throughput for its cpu-rank (node.gpu.peak_tflops.bf16 is
/// 0)"), as
/// CPU ranks that train 16-bit plans through fp32 staging do. `ztune predict`
/// refuses such a plan with it, `ztune run` compares the memory only.
[[nodiscard]] std::string unpriced_precision(const Cluster& c, Precision p);

/// Throws InputError("<where>: the predicted time is not finite (dp_comm = inf): ...")
/// naming what feeds that part, when non_finite_time(t) is not empty.
void require_finite_time(const TimePrediction& t, const std::string& where);

}  // namespace ztune
