#include "ztune/tuner/stored_search_options.hpp"

#include <limits>

#include "ztune/vocab/json_reader.hpp"
#include "ztune/tuner/objective.hpp"

namespace ztune {

nlohmann::json search_options_to_json(const SearchRequest& request, const SearchOptions& o) {
  const SpaceOptions& s = o.space;
  nlohmann::json off = nlohmann::json::array();
  if (!o.prune_enabled) off.push_back("prune");
  if (!o.rank_enabled) off.push_back("rank");
  if (!o.simulate_enabled) off.push_back("simulate");
  nlohmann::json j = {{"source", request.source},
                      {"cluster", request.cluster},
                      {"model", request.model},
                      {"nodes", request.nodes},
                      {"seq", request.seq},
                      {"gpus", s.gpus},
                      {"min_gpus", s.min_gpus},
                      {"max_gpus", s.max_gpus},
                      {"allow_tp_across_nodes", s.allow_tp_across_nodes},
                      {"engine", to_string(s.engine)},
                      {"compile", request.compile},
                      {"accounting", to_string(o.memory.accounting)},
                      {"global_batch", s.global_batch},
                      {"precision", s.precision ? to_string(*s.precision) : std::string("any")},
                      {"master_dtype", to_string(s.master_dtype)},
                      {"moments_dtype", to_string(s.moments_dtype)},
                      {"param_remainders", s.param_remainders},
                      {"fp8", to_string(s.fp8)},
                      {"fp8_param_gather", s.fp8_param_gather},
                      {"max_micro_batch", s.max_micro_batch},
                      {"tp", s.tp.value_or(0)},
                      {"pp", s.pp.value_or(0)},
                      {"zero", s.zero_stage.value_or(-1)},
                      {"recompute", s.recompute ? std::string(to_string(*s.recompute)) : std::string("any")},
                      {"sequence_parallel", s.sequence_parallel},
                      {"tp_comm_overlap", s.tp_comm_overlap},
                      {"cp", s.cp.value_or(0)},
                      {"max_cp", s.max_cp},
                      {"ulysses", s.ulysses.value_or(0)},
                      {"max_ulysses", s.max_ulysses},
                      {"dp_shard", s.dp_shard.value_or(0)},
                      {"onebit_adam", s.include_onebit_adam},
                      {"zeropp", s.include_zeropp},
                      {"freeze_step", s.onebit_freeze_step},
                      {"sparse_attention", to_string(s.sparse_attention)},
                      {"sparse_block", s.sparse_block},
                      {"attention", s.attention ? to_string(*s.attention) : std::string("any")},
                      {"objective", to_string(o.objective)},
                      {"tokens", o.tokens},
                      {"gpu_hour_price", o.gpu_hour_price},
                      {"top", o.top},
                      {"simulate_top", o.simulate_top},
                      {"memory_headroom_pct", 100.0 * o.memory.gpu_headroom},
                      {"threads", o.threads},
                      {"max_plans", s.max_plans},
                      {"passes_off", off},
                      {"profile", request.profile}};
  if (s.grad_reduce_dtype) j["grad_reduce_dtype"] = to_string(*s.grad_reduce_dtype);
  return j;
}

namespace {

constexpr std::int64_t kLargeCount = std::numeric_limits<int>::max();

int count_or(ObjectReader& r, std::string_view key, std::int64_t lo, int fallback) {
  return static_cast<int>(r.optional_integer(key, lo, kLargeCount).value_or(fallback));
}

// A pin stored as 0 (or `unset`) when the search had none.
std::optional<int> pin(ObjectReader& r, std::string_view key, int unset = 0) {
  const auto v = r.optional_integer(key, unset, kLargeCount);
  if (!v || *v == unset) return std::nullopt;
  return static_cast<int>(*v);
}

// "any" (and "", as `ztune search` stored an unpinned precision before it
// wrote "any") is no pin.
std::optional<std::string> named_pin(ObjectReader& r, std::string_view key) {
  if (!r.has(key)) return std::nullopt;
  const auto& v = r.raw(key);
  if (v.is_string() && (v.get<std::string>().empty() || v.get<std::string>() == "any")) return std::nullopt;
  return r.string(key);
}

}  // namespace

StoredSearchOptions search_options_from_json(const nlohmann::json& j, const std::string& where) {
  StoredSearchOptions out;
  if (j.is_null()) return out;  // a row stored without options: the defaults
  if (!j.is_object()) throw InputError(where + ": options: expected an object, got " + describe_json(j));
  ObjectReader r(j, where, "options");
  SearchRequest& q = out.request;
  q.source = r.optional_string("source").value_or("ztune search");
  q.cluster = r.optional_string("cluster").value_or("");
  q.model = r.optional_string("model").value_or("");
  q.nodes = count_or(r, "nodes", 0, 0);
  q.seq = count_or(r, "seq", 0, 0);
  q.compile = r.optional_boolean("compile").value_or(false);
  q.profile = r.optional_string("profile").value_or("");

  SearchOptions& o = out.options;
  SpaceOptions& s = o.space;
  // Searches stored before the engine was recorded were ztune's.
  s.engine = *engine_from_string(r.optional_choice("engine", {"ztune", "deepspeed", "megatron", "fsdp"}, "ztune"));
  o.memory.accounting = accounting_named(r.optional_choice("accounting", kStateAccountingNames, "engine"), s.engine);
  s.gpus = count_or(r, "gpus", 0, 0);
  s.min_gpus = count_or(r, "min_gpus", 0, 0);
  s.max_gpus = count_or(r, "max_gpus", 0, 0);
  s.allow_tp_across_nodes = r.optional_boolean("allow_tp_across_nodes").value_or(false);
  s.global_batch = r.optional_integer("global_batch", 0, std::numeric_limits<std::int64_t>::max()).value_or(0);
  if (named_pin(r, "precision")) s.precision = precision_of(r.choice("precision", kPrecisionNames));
  if (r.has("grad_reduce_dtype")) s.grad_reduce_dtype = precision_of(r.choice("grad_reduce_dtype", kPrecisionNames));
  s.master_dtype = *precision_of(r.optional_choice("master_dtype", kPrecisionNames, "fp32"));
  s.moments_dtype = *precision_of(r.optional_choice("moments_dtype", kPrecisionNames, "fp32"));
  s.param_remainders = r.optional_boolean("param_remainders").value_or(false);
  s.fp8 = *fp8_recipe_of(r.optional_choice("fp8", kFp8RecipeNames, "none"));
  s.fp8_param_gather = r.optional_boolean("fp8_param_gather").value_or(false);
  s.max_micro_batch = count_or(r, "max_micro_batch", 0, 0);
  s.tp = pin(r, "tp");
  s.pp = pin(r, "pp");
  if (const auto z = r.optional_integer("zero", -1, 3); z && *z >= 0) s.zero_stage = static_cast<int>(*z);
  if (named_pin(r, "recompute")) s.recompute = recompute_of(r.choice("recompute", kRecomputeNames));
  s.sequence_parallel = r.optional_boolean("sequence_parallel").value_or(true);
  s.tp_comm_overlap = r.optional_boolean("tp_comm_overlap").value_or(true);
  s.cp = pin(r, "cp");
  s.max_cp = count_or(r, "max_cp", 0, 0);
  s.ulysses = pin(r, "ulysses");
  s.max_ulysses = count_or(r, "max_ulysses", 0, 0);
  s.dp_shard = pin(r, "dp_shard");
  s.include_onebit_adam = r.optional_boolean("onebit_adam").value_or(false);
  s.include_zeropp = r.optional_boolean("zeropp").value_or(false);
  s.onebit_freeze_step = count_or(r, "freeze_step", -1, -1);
  s.sparse_attention = *sparse_layout_of(r.optional_choice("sparse_attention", kSparseLayoutNames, "none"));
  s.sparse_block = count_or(r, "sparse_block", 1, 64);
  if (named_pin(r, "attention")) s.attention = attention_kernel_of(r.choice("attention", kAttentionKernelNames));
  s.max_plans = r.optional_integer("max_plans", 1, std::numeric_limits<std::int64_t>::max()).value_or(kDefaultMaxPlans);

  o.objective = *objective_from_string(r.optional_choice("objective", {"throughput", "time", "cost"}, "throughput"));
  o.tokens = r.optional_positive("tokens", true).value_or(0);
  o.gpu_hour_price = r.optional_positive("gpu_hour_price", true).value_or(0);
  o.top = count_or(r, "top", 1, o.top);
  o.simulate_top = count_or(r, "simulate_top", 0, o.simulate_top);
  o.threads = count_or(r, "threads", 0, 0);
  o.memory.gpu_headroom = r.optional_positive("memory_headroom_pct", true, 50.0).value_or(0) / 100.0;
  (void)r.has("accuracy");  // the best plan's band, stored beside the options by ztune search (history show reads it)
  if (r.has("passes_off")) {
    const auto& off = r.raw("passes_off");
    if (!off.is_array()) throw r.error("passes_off", "expected a list of pass names, got " + describe_json(off));
    for (const auto& p : off) {
      const std::string name = p.is_string() ? p.get<std::string>() : "";
      if (name == "prune") o.prune_enabled = false;
      else if (name == "rank") o.rank_enabled = false;
      else if (name == "simulate") o.simulate_enabled = false;
      else throw r.error("passes_off", "expected prune, rank or simulate, got " + describe_json(p));
    }
  }
  // Every key either program has ever stored is read above (their writers'
  // histories, checked): another one is a misspelt or foreign key, which
  // would otherwise read as its default.
  r.finish();
  return out;
}

}  // namespace ztune
