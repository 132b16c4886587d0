#pragma once
// The planner's input form as a value: which cluster and model (catalog name or
// file, a Hugging Face config.json too), the hardware profile, and the search
// constraints. resolve_inputs() loads them with the same library calls the
// command line uses, so every problem carries the command line's message
// (file, JSON path or flag, and what was expected), attached to the field it
// concerns so the form can mark it inline.
//
// Example: auto r = resolve_inputs({}); r.ok() → dgx2x16 and 100b loaded, default options.
#include <cstdint>
#include <optional>
#include <vector>

#include <QMetaType>
#include <QString>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/tuner/search_options.hpp"

namespace ztune::gui {

enum class InputField : std::uint8_t {
  cluster, model, profile, gpus, global_batch, seq, tokens, engine, attention, precision, optimizer, fp8, memory_headroom,
  cp, max_cp, ulysses, max_ulysses, dp_shard, objective, gpu_hour_price, other
};

struct InputIssue {
  InputField field = InputField::other;
  QString message;  // the library's InputError text, as `ztune` prints it after "ztune: error: "
};

/// The optimizer-state recipes the form offers, each a setting of the plans'
/// master_dtype, moments_dtype and param_remainders (`ztune search
/// --master-dtype/--moments-dtype/--param-remainders` takes any other).
struct OptimizerChoice {
  const char* key;    // SearchInputs::optimizer, the saved setting
  const char* label;  // what the form shows
  Precision master, moments;
  bool remainders;
};
inline constexpr OptimizerChoice kOptimizerChoices[] = {
    {"fp32", "fp32", Precision::fp32, Precision::fp32, false},                                   // ZeRO's 12 B
    {"bf16-moments", "bf16 moments", Precision::fp32, Precision::bf16, false},                   // 8 B
    {"remainders", "bf16 moments, remainders", Precision::fp32, Precision::bf16, true},          // 6 B
    {"bf16", "all bf16", Precision::bf16, Precision::bf16, false},                               // 6 B (NeMo)
};

/// The FP8 settings the form offers: a recipe, and FP8 parameters with it
/// (`ztune search --fp8 RECIPE [--fp8-param-gather]`).
struct Fp8Choice {
  const char* key;  // SearchInputs::fp8, the saved setting and what the form shows
  Fp8Recipe recipe;
  bool param_gather;
};
inline constexpr Fp8Choice kFp8Choices[] = {
    {"none", Fp8Recipe::none, false},
    {"delayed", Fp8Recipe::delayed, false},
    {"tensorwise", Fp8Recipe::tensorwise, false},
    {"delayed+params", Fp8Recipe::delayed, true},  // Megatron-LM --fp8-param-gather
    {"tensorwise+params", Fp8Recipe::tensorwise, true},
};

struct SearchInputs {
  QString cluster = QStringLiteral("dgx2x16");  // catalog name or file
  QString model = QStringLiteral("100b");       // catalog name, ztune model file or HF config.json
  QString profile;                              // "" = the default profile for the cluster's GPU
  int gpus = 0;                                 // 0 = every device of the cluster
  std::int64_t global_batch = 0;                // 0 = the model file's
  int seq = 0;                                  // 0 = the model file's
  double tokens = 0;                            // 0 = the model file's token budget
  QString engine = QStringLiteral("ztune");     // ztune | deepspeed | megatron
  QString attention = QStringLiteral("any");    // any | standard | flash (--attention)
  QString precision = QStringLiteral("any");    // any | bf16 | fp16 | fp32 (--precision)
  QString optimizer = QStringLiteral("fp32");   // a key of kOptimizerChoices (--master-dtype, --moments-dtype,
                                                // --param-remainders)
  QString fp8 = QStringLiteral("none");         // a key of kFp8Choices: every plan's FP8 linear layers (--fp8)
                                                // and FP8 parameters (+params: --fp8-param-gather)
  double memory_headroom_pct = 0;               // % of each GPU's memory kept free (--memory-headroom)
  int cp = 0;                                   // only plans of this context-parallel degree (--cp); 0 = any
  int max_cp = 0;                               // largest context-parallel degree (--max-cp); 0 = the search's
                                                // default (up to 8 from 8k tokens), 1 = none
  int ulysses = 0;                              // only plans of this DeepSpeed-Ulysses degree (--ulysses); 0 = any
  int max_ulysses = 0;                          // largest Ulysses degree (--max-ulysses); 0 = the search's default
                                                // (as max_cp's), 1 = none
  int dp_shard = 0;                             // only hybrid-sharded ZeRO-3 plans with shard groups of this many
                                                // data-parallel ranks (--dp-shard); 0 = any sharding
  QString objective = QStringLiteral("throughput");  // throughput | time | cost
  double gpu_hour_price = 0;                    // --gpu-hour-price; 0 = none (cost in GPU-hours)
  int top = 50;                                 // plans stored with the search in the results database
                                                // (the best; the table keeps every plan that fits)

  bool operator==(const SearchInputs&) const = default;
};

/// Plans a planner search keeps for its table: every plan that fits, up to
/// this many (the best by the objective). 100,000 candidates are ~70 MB.
inline constexpr int kPlannerPlansKept = 100000;

/// How the planner runs a search, whatever was asked of it: every pass, all
/// cores, the default plan cap, every plan that fits kept (kPlannerPlansKept),
/// the best kSimulateTopDefault re-timed. resolve_inputs gives a new search
/// these; a search reopened from the database takes them in place of the
/// settings its row was stored with (ztune search's --no-prune, --threads).
void set_planner_run_settings(SearchOptions& o);

/// The search the form's fields ask, mapped as `ztune search` maps its flags
/// (cli/cmd_search.cpp to_options), with the planner's run settings; nullopt
/// where a choice (engine, attention, precision, optimizer states, FP8,
/// objective) is not one the form offers. The one owner of that mapping:
/// resolve_inputs searches it, and a search reopened from History is filled
/// back into the form only where this gives its stored options again.
/// Numbers are mapped as given (resolve_inputs refuses those out of range).
std::optional<SearchOptions> options_of(const SearchInputs& in);

/// Everything a search needs, loaded and checked. `options.stop` is left null.
struct ResolvedInputs {
  Cluster cluster;
  Transformer model;
  HardwareProfile profile;
  SearchOptions options;
};

struct InputResolution {
  std::optional<ResolvedInputs> inputs;  // set when there is no issue
  std::vector<InputIssue> issues;        // every problem found (cluster and model are checked independently)
  [[nodiscard]] bool ok() const { return inputs.has_value(); }
};

/// Loads and checks the inputs. Never throws for bad input. A number is
/// refused as `ztune search` refuses its flag (vocab/flag_ranges.hpp): the
/// form passes what was typed, never a value it clamped to a range.
InputResolution resolve_inputs(const SearchInputs& in);

/// The field a library message concerns, from its leading flag ("--gpus: ..." → gpus).
InputField field_of_message(const QString& message);

}  // namespace ztune::gui

Q_DECLARE_METATYPE(ztune::gui::InputIssue)
