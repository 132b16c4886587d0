#include "ztune/gui/search_inputs.hpp"

#include <QStringList>

#include <algorithm>
#include <exception>

#include "ztune/vocab/flag_ranges.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/tuner/engine.hpp"
#include "ztune/tuner/objective.hpp"
#include "ztune/tuner/pinned_degrees.hpp"
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
  // A flag matches where its name ends ("--cp: ", "--cp 2: ", "--master-dtype/--moments-dtype: "), so
  // that "--cp" is not "--cpu-checkpointing" nor "--seq" "--sequence-parallel".
  static constexpr Flag kFlags[] = {
      {"--cluster", InputField::cluster},   {"--nodes", InputField::cluster},
      {"--model", InputField::model},       {"--seq", InputField::seq},
      {"--profile", InputField::profile},   {"--gpus", InputField::gpus},
      {"--min-gpus", InputField::gpus},     {"--max-gpus", InputField::gpus},
      {"--global-batch", InputField::global_batch}, {"--tokens", InputField::tokens},
      {"--engine", InputField::engine},     {"--objective", InputField::objective},
      {"--attention", InputField::attention}, {"--memory-headroom", InputField::memory_headroom},
      {"--max-cp", InputField::max_cp}, {"--cp", InputField::cp},
      {"--ulysses", InputField::ulysses}, {"--max-ulysses", InputField::max_ulysses},
      {"--dp-shard", InputField::dp_shard}, {"--gpu-hour-price", InputField::gpu_hour_price},
      {"--precision", InputField::precision}, {"--master-dtype", InputField::optimizer},
      {"--moments-dtype", InputField::optimizer}, {"--param-remainders", InputField::optimizer},
      {"--fp8", InputField::fp8}, {"--fp8-param-gather", InputField::fp8},
  };
  for (const auto& f : kFlags) {
    const QLatin1String flag(f.prefix);
    if (!message.startsWith(flag)) continue;
    const QChar next = message.size() > flag.size() ? message.at(flag.size()) : QChar(u' ');
    if (!next.isLetterOrNumber() && next != u'-') return f.field;
  }
  return InputField::other;
}

InputResolution resolve_inputs(const SearchInputs& in) {
  InputResolution res;
  auto issue = [&res](InputField f, const QString& m) { res.issues.push_back({f, m}); };

  // Each number as `ztune search` takes its flag; 0 where the form means the
  // flag not given ("all of the cluster", "the model's", "any").
  auto whole = [&issue](InputField field, const char* flag, long long v, const IntegerRange& range, bool zero_unset) {
    if (zero_unset && v == 0) return;
    const std::string why = integer_complaint(std::to_string(v), range);
    if (!why.empty()) issue(field, QStringLiteral("%1: %2").arg(QLatin1String(flag), q(why)));
  };
  auto number = [&issue](InputField field, const char* flag, double v, const NumberRange& range, bool zero_unset) {
    if (zero_unset && v == 0) return;
    // As typed: "60", "-5", "2e+18" (15 digits: a form's numbers, without a double's last-digit noise).
    const std::string why = number_complaint(QString::number(v, 'g', 15).toStdString(), range);
    if (!why.empty()) issue(field, QStringLiteral("%1: %2").arg(QLatin1String(flag), q(why)));
  };
  whole(InputField::seq, "--seq", in.seq, kSeqFlag, true);
  const bool seq_ok = res.issues.empty();

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
    r.model = load_transformer(in.model.trimmed().toStdString(), seq_ok ? in.seq : 0);  // a bad seq is said on its field
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
  // Each choice checked here for its message; options_of maps them.
  (void)pinned(in.attention, attention_kernel_of, InputField::attention,
               "--attention: expected any, standard, flash, cudnn or eager");
  (void)pinned(in.precision, precision_of, InputField::precision, "--precision: expected any, bf16, fp16 or fp32");
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
  whole(InputField::gpus, "--gpus", in.gpus, kWholeNumberFlag, true);
  whole(InputField::global_batch, "--global-batch", in.global_batch, kGlobalBatchFlag, true);
  number(InputField::tokens, "--tokens", in.tokens, kTokensFlag, true);
  number(InputField::memory_headroom, "--memory-headroom", in.memory_headroom_pct, kMemoryHeadroomFlag, false);
  number(InputField::gpu_hour_price, "--gpu-hour-price", in.gpu_hour_price, kGpuHourPriceFlag, true);
  whole(InputField::cp, "--cp", in.cp, kCpFlag, true);
  whole(InputField::max_cp, "--max-cp", in.max_cp, kCpFlag, true);
  whole(InputField::ulysses, "--ulysses", in.ulysses, kUlyssesFlag, true);
  whole(InputField::max_ulysses, "--max-ulysses", in.max_ulysses, kUlyssesFlag, true);
  whole(InputField::dp_shard, "--dp-shard", in.dp_shard, kDpShardFlag, true);
  whole(InputField::other, "--top", in.top, kWholeNumberFlag, false);

  if (auto options = options_of(in)) r.options = std::move(*options);
  // The engine's profile prices the plans (data/engines/), not only its space.
  if (engine) try {
      r.profile = with_engine(std::move(r.profile), to_string(*engine));
    } catch (const InputError& e) {
      issue(InputField::engine, q(e.what()));
    }
  const SearchOptions& o = r.options;

  // The space's own checks (GPU count, batch, precision, the optimizer states
  // against the precision and the engine, the pinned modes), as `ztune search`
  // makes them: its pins against the model first.
  if (have_cluster && have_model && res.issues.empty()) {
    try {
      if (auto why = pinned_degree_refusal(o.space, r.model)) throw InputError(*why);
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

std::optional<SearchOptions> options_of(const SearchInputs& in) {
  auto choice = [](const QString& value, auto parse) {
    using Value = typename decltype(parse(std::string()))::value_type;
    std::optional<std::optional<Value>> v;  // outer: parsed; inner: "any" (no pin)
    if (value == QLatin1String("any")) v.emplace();
    else if (auto parsed = parse(value.toStdString())) v.emplace(*parsed);
    return v;
  };
  const auto engine = engine_from_string(in.engine.toStdString());
  const auto objective = objective_from_string(in.objective.toStdString());
  const auto attention = choice(in.attention, attention_kernel_of);
  const auto precision = choice(in.precision, precision_of);
  QString expected;
  const OptimizerChoice* states = keyed(kOptimizerChoices, in.optimizer, expected);
  const Fp8Choice* fp8 = keyed(kFp8Choices, in.fp8, expected);
  if (!engine || !objective || !attention || !precision || states == nullptr || fp8 == nullptr) return std::nullopt;
  SearchOptions o;
  o.space.gpus = in.gpus;
  o.space.global_batch = in.global_batch;
  o.space.engine = *engine;
  o.memory.accounting = state_accounting_of(*engine);  // fit as the engine keeps its states
  o.space.attention = *attention;
  o.space.precision = *precision;
  o.space.master_dtype = states->master;
  o.space.moments_dtype = states->moments;
  o.space.param_remainders = states->remainders;
  o.space.fp8 = fp8->recipe;
  o.space.fp8_param_gather = fp8->param_gather;
  o.memory.gpu_headroom = in.memory_headroom_pct / 100.0;
  if (in.cp > 0) o.space.cp = in.cp;
  o.space.max_cp = in.max_cp;
  if (in.ulysses > 0) o.space.ulysses = in.ulysses;
  o.space.max_ulysses = in.max_ulysses;
  if (in.dp_shard > 0) o.space.dp_shard = in.dp_shard;
  o.objective = *objective;
  o.tokens = in.tokens;
  o.gpu_hour_price = in.gpu_hour_price;
  set_planner_run_settings(o);
  return o;
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
