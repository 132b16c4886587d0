#pragma once
// The search objectives: throughput (tokens/s), time (days to train a token
// budget) and cost (GPU-hours × price for that budget).
#include <optional>
#include <string>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"
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

/// What a 1-bit Adam plan's run costs per step against its predict_time():
/// that is one step of the compression phase, while the run spends its first
/// freeze_step steps in plain Adam (onebit_adam_phases: average / compressed
/// iteration). 1 for every other plan (and when the model states no budget).
[[nodiscard]] double onebit_run_factor(const Transformer& m, const Plan& p, const Cluster& c,
                                       const HardwareProfile& hw);

/// `t` stretched to the run-averaged step (iteration × factor, rates ÷ factor):
/// what the search ranks 1-bit Adam plans by. The breakdown stays the phase's.
[[nodiscard]] TimePrediction run_averaged(TimePrediction t, double factor);

/// The unit objective_value() is in, for tables: "tokens/s", "days", and for cost
/// "cost" (GPU-hours × the price, in the price's currency) or "GPU-hours" without one.
[[nodiscard]] std::string objective_unit(Objective o, double price);

}  // namespace ztune
