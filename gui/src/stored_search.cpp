#include "ztune/gui/stored_search.hpp"

#include <nlohmann/json.hpp>

#include "ztune/vocab/input_error.hpp"
#include "ztune/tuner/objective.hpp"

namespace ztune::gui {

SearchOutcome outcome_from_stored_search(const nlohmann::json& stored) {
  const std::string where = "results database, search " + std::to_string(stored.value("id", std::int64_t{0}));
  SearchOutcome out;
  ResolvedInputs& in = out.inputs;
  in.cluster = cluster_from_json(stored.at("cluster"), where + " cluster");
  in.model = transformer_from_json(stored.at("model"), where + " model");
  const auto& profile = stored.at("profile");
  in.profile = profile.is_null() ? default_profile_for(in.cluster) : profile_from_json(profile, where + " profile");
  in.cluster = with_measured_figures(in.cluster, in.profile);

  const auto& options = stored.at("options");
  SearchOptions& o = in.options;
  if (options.is_object()) {
    if (auto obj = objective_from_string(options.value("objective", std::string("throughput")))) o.objective = *obj;
    o.tokens = options.value("tokens", 0.0);
    o.gpu_hour_price = options.value("gpu_hour_price", 0.0);
    o.space.gpus = options.value("gpus", 0);
    o.space.global_batch = options.value("global_batch", std::int64_t{0});
  }
  const double tokens = o.tokens > 0 ? o.tokens : in.model.train_tokens;

  SearchResult& r = out.result;
  r.space = stored.value("space", std::int64_t{0});
  r.evaluated = stored.value("evaluated", std::int64_t{0});
  r.feasible = stored.value("feasible", std::int64_t{0});
  r.elapsed_s = stored.value("elapsed_s", 0.0);
  r.interrupted = stored.value("interrupted", false);
  r.objective = o.objective;
  r.tokens = tokens;
  r.gpu_hour_price = o.gpu_hour_price;
  for (const auto& c : stored.at("candidates")) {
    Candidate cand;
    cand.plan = plan_from_json(c.at("plan"), where + " plan");
    if (auto why = check_plan(cand.plan, in.model, in.cluster)) throw InputError(where + ": " + *why);
    cand.prediction = predict(in.model, cand.plan, in.cluster, in.profile);
    cand.timed = true;
    cand.id = static_cast<std::uint64_t>(c.value("rank", std::int64_t{0}));
    cand.objective = objective_value(o.objective, cand.prediction.time, cand.plan.gpus(), tokens, o.gpu_hour_price);
    r.plans.push_back(std::move(cand));
  }
  out.db_id = stored.value("id", std::int64_t{0});
  return out;
}

}  // namespace ztune::gui
