#include "ztune/gui/stored_search.hpp"

#include <algorithm>
#include <iterator>

#include <nlohmann/json.hpp>

#include "ztune/vocab/engine_profile.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/tuner/engine.hpp"
#include "ztune/tuner/objective.hpp"
#include "ztune/tuner/search.hpp"
#include "ztune/tuner/simulate_pass.hpp"
#include "ztune/tuner/stored_search_options.hpp"
#include "ztune/validation/accuracy.hpp"

namespace ztune::gui {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

/// The form's inputs that ask exactly the stored search, or nullopt where it
/// asked what the form cannot say (ztune search's --tp, --nodes, --accounting,
/// ...). The oracle is the stored document itself: the options the form's
/// fields give, with everything else at its default, must store as the
/// search's own did (the run settings, which the planner sets, aside).
std::optional<SearchInputs> form_of(const StoredSearchOptions& asked) {
  const SearchRequest& r = asked.request;
  const SearchOptions& o = asked.options;
  const SpaceOptions& s = o.space;
  if (r.nodes != 0 || r.compile) return std::nullopt;
  SearchInputs in;
  in.cluster = q(r.cluster);
  in.model = q(r.model);
  in.profile = q(r.profile);
  in.seq = r.seq;
  in.gpus = s.gpus;
  in.global_batch = s.global_batch;
  in.tokens = o.tokens;
  in.engine = q(to_string(s.engine));
  in.attention = s.attention ? q(to_string(*s.attention)) : QStringLiteral("any");
  in.precision = s.precision ? q(to_string(*s.precision)) : QStringLiteral("any");
  const auto* states = std::find_if(std::begin(kOptimizerChoices), std::end(kOptimizerChoices), [&](const auto& c) {
    return c.master == s.master_dtype && c.moments == s.moments_dtype && c.remainders == s.param_remainders;
  });
  const auto* fp8 = std::find_if(std::begin(kFp8Choices), std::end(kFp8Choices), [&](const auto& c) {
    return c.recipe == s.fp8 && c.param_gather == s.fp8_param_gather;
  });
  if (states == std::end(kOptimizerChoices) || fp8 == std::end(kFp8Choices)) return std::nullopt;
  in.optimizer = QLatin1String(states->key);
  in.fp8 = QLatin1String(fp8->key);
  in.memory_headroom_pct = 100.0 * o.memory.gpu_headroom;
  in.cp = s.cp.value_or(0);
  in.max_cp = s.max_cp;
  in.ulysses = s.ulysses.value_or(0);
  in.max_ulysses = s.max_ulysses;
  in.dp_shard = s.dp_shard.value_or(0);
  in.objective = q(to_string(o.objective));
  in.gpu_hour_price = o.gpu_hour_price;
  in.top = std::max(o.top, 1);
  // The same fields on defaults, as the form maps them (options_of).
  const std::optional<SearchOptions> form = options_of(in);
  SearchOptions stored = o;
  set_planner_run_settings(stored);
  if (!form || search_options_to_json(r, *form) != search_options_to_json(r, stored)) return std::nullopt;
  return in;
}

}  // namespace

SearchOutcome outcome_from_stored_search(const nlohmann::json& stored) {
  const std::string where = "results database, search " + std::to_string(stored.value("id", std::int64_t{0}));
  SearchOutcome out;
  ResolvedInputs& in = out.inputs;
  in.cluster = cluster_from_json(stored.at("cluster"), where + " cluster");
  in.model = transformer_from_json(stored.at("model"), where + " model");
  const auto& profile = stored.at("profile");
  in.profile = profile.is_null() ? default_profile_for(in.cluster) : profile_from_json(profile, where + " profile");
  in.cluster = with_measured_figures(in.cluster, in.profile);

  // The options as tuner's one reader gives them back. The engine searched
  // for prices the plans as it runs them (its profile, the accounting of its
  // model states, a graph compiler where the search had one), as `ztune
  // search --engine` and the planner's own search did: reopened under ztune's
  // executor, a DeepSpeed plan that fits had read as over capacity.
  const StoredSearchOptions asked = search_options_from_json(stored.at("options"), where);
  SearchOptions& o = in.options;
  o = asked.options;
  // What was asked comes from the row; how the planner searches does not:
  // passes turned off, a thread count or a plan cap would carry into its
  // scaling chart (under --no-prune it had plotted plans 100x over memory
  // as feasible).
  set_planner_run_settings(o);
  out.reopened = true;
  out.asked = form_of(asked);
  in.profile = with_engine(std::move(in.profile), to_string(o.space.engine), asked.request.compile);
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
    cand.prediction.memory = predict_memory(in.model, cand.plan, in.cluster, in.profile, o.memory);
    cand.id = static_cast<std::uint64_t>(c.value("rank", std::int64_t{0}));
    time_candidate(cand, in.model, in.cluster, in.profile, o.objective, tokens, o.gpu_hour_price);
    // The plans its search re-timed with the simulator were ranked by that
    // time: simulated again (the same figures), so the table shows what
    // ranked them, as `ztune history show` does.
    if (c.contains("simulated_iteration_s") && !c.at("simulated_iteration_s").is_null())
      simulate_candidate(cand, in.model, in.cluster, in.profile, o, tokens);
    r.plans.push_back(std::move(cand));
  }
  out.db_id = stored.value("id", std::int64_t{0});
  // The cost model's error on published runs of this GPU and engine, as the
  // search's own report gives it (the report had said none was measured).
  out.accuracy = accuracy_for(in.cluster, to_string(o.space.engine));
  return out;
}

}  // namespace ztune::gui
