#include "ztune/gui/search_inputs.hpp"

#include <QStringList>

#include <algorithm>
#include <exception>

#include "ztune/vocab/input_error.hpp"
#include "ztune/tuner/engine.hpp"
#include "ztune/tuner/objective.hpp"
#include "ztune/tuner/search_space.hpp"

namespace ztune::gui {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

// The entry of a choice table (kOptimizerChoices, kFp8Choices) whose key is
// `key`, or null; `expected` gets "one of A, B or C" for the refusal.
template <class Choice, std::size_t N>
const Choice* keyed(const Choice (&table)[N], const QString& key, QString& expected) {
  QStringList keys;
  const Choice* found = nullptr;
  for (const Choice& c : table) {
    keys << QLatin1String(c.key);
    if (key == QLatin1String(c.key)) found = &c;
  }
  expected = QStringLiteral("one of %1 or %2").arg(keys.mid(0, keys.size() - 1).join(QStringLiteral(", ")), keys.last());
  return found;
}

}  // namespace

InputField field_of_message(const QString& message) {
  struct Flag {
    const char* prefix;
    InputField field;
  };
  // Longest prefixes first ("--min-gpus" before "--gpus" is not needed: they differ at "--").
  static constexpr Flag kFlags[] = {
      {"--cluster", InputField::cluster},   {"--nodes", InputField::cluster},
      {"--model", InputField::model},       {"--seq", InputField::seq},
      {"--profile", InputField::profile},   {"--gpus", InputField::gpus},
      {"--min-gpus", InputField::gpus},     {"--max-gpus", InputField::gpus},
      {"--global-batch", InputField::global_batch}, {"--tokens", InputField::tokens},
      {"--engine", InputField::engine},     {"--objective", InputField::objective},
      {"--attention", InputField::attention}, {"--memory-headroom", InputField::memory_headroom},
      {"--max-cp", InputField::max_cp}, {"--cp", InputField::max_cp},
      {"--precision", InputField::precision}, {"--master-dtype", InputField::optimizer},
      {"--moments-dtype", InputField::optimizer}, {"--param-remainders", InputField::optimizer},
      {"--fp8", InputField::fp8},
  };
  for (const auto& f : kFlags)
    if (message.startsWith(QLatin1String(f.prefix))) return f.field;
  return InputField::other;
}

InputResolution resolve_inputs(const SearchInputs& in) {
  InputResolution res;
  auto issue = [&res](InputField f, const QString& m) { res.issues.push_back({f, m}); };

  ResolvedInputs r;
  bool have_cluster = false;
  bool have_model = false;
  try {
    if (in.cluster.trimmed().isEmpty()) throw InputError("--cluster: required (a catalog name or a file)");
    r.cluster = load_cluster(in.cluster.trimmed().toStdString());
    have_cluster = true;
  } catch (const InputError& e) {
    issue(InputField::cluster, q(e.what()));
  }
  try {
    if (in.model.trimmed().isEmpty()) throw InputError("--model: required (a catalog name or a file)");
    if (in.seq < 0) throw InputError("--seq: expected > 0, got " + std::to_string(in.seq));
    r.model = load_transformer(in.model.trimmed().toStdString(), in.seq);
    have_model = true;
  } catch (const InputError& e) {
    issue(InputField::model, q(e.what()));
  }
  if (have_cluster) {
    try {
      r.profile = in.profile.trimmed().isEmpty() ? default_profile_for(r.cluster)
                                                 : load_profile(in.profile.trimmed().toStdString());
      r.cluster = with_measured_figures(r.cluster, r.profile);
    } catch (const InputError& e) {
      issue(InputField::profile, q(e.what()));
    }
  }

  auto engine = engine_from_string(in.engine.toStdString());
  if (!engine)
    issue(InputField::engine, QStringLiteral("--engine: expected ztune, deepspeed, megatron or fsdp, got \"%1\"").arg(in.engine));
  // A pin the form offers as a choice or "any" (nothing pinned).
  auto pinned = [&issue](const QString& value, auto parse, InputField field, const char* expected) {
    decltype(parse(std::string())) v;
    if (value == QLatin1String("any")) return v;
    v = parse(value.toStdString());
    if (!v) issue(field, QStringLiteral("%1, got \"%2\"").arg(QLatin1String(expected), value));
    return v;
  };
  const std::optional<AttentionKernel> attention =
      pinned(in.attention, attention_kernel_of, InputField::attention,
             "--attention: expected any, standard, flash, cudnn or eager");
  const std::optional<Precision> precision =
      pinned(in.precision, precision_of, InputField::precision, "--precision: expected any, bf16, fp16 or fp32");
  QString expected;
  const OptimizerChoice* states = keyed(kOptimizerChoices, in.optimizer, expected);
  if (states == nullptr)
    issue(InputField::optimizer, QStringLiteral("--master-dtype/--moments-dtype: expected %1, got \"%2\"")
                                     .arg(expected, in.optimizer));
  const Fp8Choice* fp8 = keyed(kFp8Choices, in.fp8, expected);
  if (fp8 == nullptr)
    issue(InputField::fp8, QStringLiteral("--fp8: expected %1, got \"%2\"").arg(expected, in.fp8));
  auto objective = objective_from_string(in.objective.toStdString());
  if (!objective)
    issue(InputField::objective,
          QStringLiteral("--objective: expected throughput, time or cost, got \"%1\"").arg(in.objective));
  if (in.memory_headroom_pct < 0 || in.memory_headroom_pct > 50)
    issue(InputField::memory_headroom,
          QStringLiteral("--memory-headroom: expected a percentage in [0, 50], got %1").arg(in.memory_headroom_pct));
  if (in.max_cp < 0)
    issue(InputField::max_cp, QStringLiteral("--max-cp: expected >= 1 (or 0 for the default), got %1").arg(in.max_cp));
  if (in.tokens < 0) issue(InputField::tokens, QStringLiteral("--tokens: expected >= 0, got %1").arg(in.tokens));
  if (in.global_batch < 0)
    issue(InputField::global_batch, QStringLiteral("--global-batch: expected > 0, got %1").arg(in.global_batch));

  SearchOptions& o = r.options;
  o.space.gpus = in.gpus;
  o.space.global_batch = in.global_batch;
  if (engine) {
    o.space.engine = *engine;
    o.memory.accounting = state_accounting_of(*engine);  // fit as the engine keeps its states
    // The engine's profile prices the plans (data/engines/), not only its space.
    try {
      r.profile = with_engine(std::move(r.profile), to_string(*engine));
    } catch (const InputError& e) {
      issue(InputField::engine, q(e.what()));
    }
  }
  o.space.attention = attention;
  o.space.precision = precision;
  if (states != nullptr) {
    o.space.master_dtype = states->master;
    o.space.moments_dtype = states->moments;
    o.space.param_remainders = states->remainders;
  }
  if (fp8 != nullptr) {
    o.space.fp8 = fp8->recipe;
    o.space.fp8_param_gather = fp8->param_gather;
  }
  o.memory.gpu_headroom = in.memory_headroom_pct / 100.0;
  o.space.max_cp = std::max(0, in.max_cp);
  if (objective) o.objective = *objective;
  o.tokens = in.tokens;
  o.gpu_hour_price = in.gpu_hour_price;
  set_planner_run_settings(o);

  // The space's own checks (GPU count, batch, precision, the optimizer states
  // against the precision and the engine), as the search would make them.
  if (have_cluster && have_model && res.issues.empty()) {
    try {
      const SearchSpace space(r.model, r.cluster, o.space);
      (void)space;
      if (auto why = fp8_library_refusal(o.space.fp8, r.profile.engine)) throw InputError("--fp8: " + *why);
    } catch (const InputError& e) {
      issue(field_of_message(q(e.what())), q(e.what()));
    }
  }
  if (res.issues.empty()) res.inputs = std::move(r);
  return res;
}

void set_planner_run_settings(SearchOptions& o) {
  const SearchOptions defaults;
  o.prune_enabled = defaults.prune_enabled;
  o.rank_enabled = defaults.rank_enabled;
  o.simulate_enabled = defaults.simulate_enabled;
  o.threads = defaults.threads;
  o.space.max_plans = defaults.space.max_plans;
  o.top = kPlannerPlansKept;             // every plan that fits, for the table to sort and filter
  o.simulate_top = kSimulateTopDefault;  // the best re-timed as `ztune search` re-times them
}

}  // namespace ztune::gui
