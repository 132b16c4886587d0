#pragma once
// The search objectives: throughput (tokens/s), time (days to train a token
// budget) and cost (GPU-hours × price for that budget).
#include <optional>
#include <string>

#include "ztune/model/plan.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/tuner/search_options.hpp"

namespace ztune {

std::string to_string(Objective o);
/// "throughput" | "time" | "cost"; nullopt otherwise.
std::optional<Objective> objective_from_string(const std::string& s);

/// True when a larger objective value is better (throughput only).
[[nodiscard]] constexpr bool higher_is_better(Objective o) { return o == Objective::throughput; }

/// Days to process `tokens` at `tokens_per_s` (infinite when the rate is 0).
[[nodiscard]] double days_to_train(double tokens, double tokens_per_s);

/// The objective's value for a timed plan: tokens/s, days, or cost
/// (GPU-hours × price, or GPU-hours when price is 0).
[[nodiscard]] double objective_value(Objective o, const TimePrediction& t, int gpus, double tokens, double price);

/// The unit objective_value() is in, for tables ("tokens/s", "days", "GPU-h", "$").
[[nodiscard]] std::string objective_unit(Objective o, double price);

}  // namespace ztune
