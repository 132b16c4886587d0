#pragma once
// A run's measured memory beside the memory model's prediction of the same
// plan, as `ztune run` and `ztune --run` show it. The memory model answers for
// the most loaded stage, so the measurement is the rank that peaked highest:
// each line's own peak there and, where the run record keeps it (at_peak),
// the line's share of that rank's peak, which the predicted lines add up to.
#include <string>

#include <nlohmann/json.hpp>

#include "ztune/model/prediction.hpp"
#include "ztune/vocab/run_record.hpp"

namespace ztune::cli {

/// `ztune run --json`'s memory_vs_prediction: per tracked line its own peak
/// (measured_bytes), its share of the peak (at_peak_bytes), the prediction
/// and its error against the share (against the own peak for a record
/// without it); "total" with the rank it was measured on.
nlohmann::json memory_vs_prediction(const RunRecord& record, const MemoryPrediction& mp);

/// Each line's prediction beside what it held at the measured peak, MiB, one
/// line each; "" for a record without the peak's composition.
std::string memory_at_peak_table(const RunRecord& record, const MemoryPrediction& mp);

}  // namespace ztune::cli
