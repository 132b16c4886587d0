#include "ztune/tuner/objective.hpp"

#include <limits>

#include "ztune/model/onebit_adam.hpp"

namespace ztune {

std::string to_string(Objective o) {
  switch (o) {
    case Objective::throughput: return "throughput";
    case Objective::time: return "time";
    case Objective::cost: return "cost";
  }
  return "?";
}

std::optional<Objective> objective_from_string(const std::string& s) {
  if (s == "throughput") return Objective::throughput;
  if (s == "time") return Objective::time;
  if (s == "cost") return Objective::cost;
  return std::nullopt;
}

double days_to_train(double tokens, double tokens_per_s) {
  if (tokens_per_s <= 0) return std::numeric_limits<double>::infinity();
  return tokens / tokens_per_s / 86400.0;
}

double objective_value(Objective o, const TimePrediction& t, int gpus, double tokens, double price) {
  switch (o) {
    case Objective::throughput: return t.tokens_per_s;
    case Objective::time: return days_to_train(tokens, t.tokens_per_s);
    case Objective::cost: {
      const double gpu_hours = days_to_train(tokens, t.tokens_per_s) * 24.0 * gpus;
      return price > 0 ? gpu_hours * price : gpu_hours;
    }
  }
  return 0;
}

double onebit_run_factor(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  if (!p.onebit_adam) return 1.0;
  const OnebitAdamPhases ph = onebit_adam_phases(m, p, c, hw);
  if (ph.compressed_iteration_s <= 0 || ph.average_iteration_s <= 0) return 1.0;
  return ph.average_iteration_s / ph.compressed_iteration_s;
}

TimePrediction run_averaged(TimePrediction t, double factor) {
  if (factor <= 0 || factor == 1.0) return t;
  t.iteration_s *= factor;
  t.tokens_per_s /= factor;
  t.model_tflops_per_gpu /= factor;
  t.hardware_tflops_per_gpu /= factor;
  t.mfu /= factor;
  t.hfu /= factor;
  return t;
}

std::string objective_unit(Objective o, double price) {
  switch (o) {
    case Objective::throughput: return "tokens/s";
    case Objective::time: return "days";
    case Objective::cost: return price > 0 ? "cost" : "GPU-hours";
  }
  return "";
}

}  // namespace ztune
