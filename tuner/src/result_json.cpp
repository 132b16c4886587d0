#include "ztune/tuner/result_json.hpp"

#include <cmath>

#include "ztune/tuner/objective.hpp"

namespace ztune {

namespace {

/// JSON has no infinity: an unreachable figure (0 tokens/s) is null.
nlohmann::json finite(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

nlohmann::json memory_to_json(const MemoryPrediction& m) {
  nlohmann::json lines = nlohmann::json::object();
  for (std::size_t i = 0; i < m.gpu.size(); ++i) lines[kMemLineNames[i]] = m.gpu[i];
  return {{"gpu", lines},
          {"gpu_total_bytes", m.gpu_total_bytes},
          {"gpu_capacity_bytes", m.gpu_capacity_bytes},
          {"host_bytes_per_node", m.host_bytes_per_node},
          {"host_capacity_bytes", m.host_capacity_bytes},
          {"nvme_bytes_per_node", m.nvme_bytes_per_node},
          {"nvme_capacity_bytes", m.nvme_capacity_bytes},
          {"fits_gpu", m.fits_gpu},
          {"fits_host", m.fits_host},
          {"fits_nvme", m.fits_nvme},
          {"fits", m.fits()}};
}

nlohmann::json time_to_json(const TimePrediction& t) {
  nlohmann::json parts = nlohmann::json::object();
  for (std::size_t i = 0; i < t.parts.size(); ++i) parts[kTimePartNames[i]] = t.parts[i];
  return {{"parts", parts},
          {"iteration_s", t.iteration_s},
          {"tokens_per_s", t.tokens_per_s},
          {"model_flops", t.model_flops},
          {"hardware_flops", t.hardware_flops},
          {"model_tflops_per_gpu", t.model_tflops_per_gpu},
          {"hardware_tflops_per_gpu", t.hardware_tflops_per_gpu},
          {"mfu", t.mfu},
          {"hfu", t.hfu}};
}

nlohmann::json candidate_to_json(const Candidate& c, const SearchResult& r) {
  nlohmann::json pred{{"memory", memory_to_json(c.prediction.memory)},
                      {"time", c.timed ? time_to_json(c.prediction.time) : nlohmann::json(nullptr)},
                      {"simulated", c.simulated ? time_to_json(*c.simulated) : nlohmann::json(nullptr)}};
  if (c.timed) {
    pred["days"] = finite(days_to_train(r.tokens, c.time().tokens_per_s));
    pred["objective"] = {{"name", to_string(r.objective)},
                         {"unit", objective_unit(r.objective, r.gpu_hour_price)},
                         {"value", finite(c.objective)}};
  } else {
    pred["days"] = nullptr;
    pred["objective"] = nullptr;
  }
  return {{"plan", plan_to_json(c.plan)}, {"prediction", pred}};
}

nlohmann::json search_result_to_json(const SearchResult& r) {
  nlohmann::json plans = nlohmann::json::array();
  for (const auto& c : r.plans) plans.push_back(candidate_to_json(c, r));
  nlohmann::json pruned = nlohmann::json::object();
  for (const auto& [name, n] : r.pruned.named()) pruned[name] = n;
  return {{"plans", plans}, {"space", r.space}, {"feasible", r.feasible}, {"block_recompute", r.block_recompute}, {"pruned_by", pruned},
          {"elapsed_s", r.elapsed_s}};
}

nlohmann::json passes_to_json(const SearchResult& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : r.passes)
    out.push_back({{"name", p.name}, {"enabled", p.enabled}, {"in", p.in}, {"out", p.out}, {"seconds", p.seconds},
                   {"note", p.note}});
  return out;
}

}  // namespace ztune
