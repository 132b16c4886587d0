#pragma once
// The cluster, model and plan flags shared by predict, run and export
// (DESIGN.md "The command line"). `resolve()` turns them into validated values.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "ztune/model/memory_model.hpp"
#include "ztune/tuner/engine.hpp"
#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune::cli {

/// --cluster/--nodes/--model/--seq.
struct InputFlags {
  std::string cluster;
  int nodes = 0;
  std::string model;
  int seq = 0;

  void add_to(CLI::App& app, bool required);
  [[nodiscard]] Cluster load_cluster_or_throw() const;
  /// {flag, path} of the files these flags read (for refuse_output_over_input).
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> files() const {
    return {{"--cluster", cluster}, {"--model", model}};
  }
  [[nodiscard]] Transformer load_model_or_throw() const;
};

/// --engine NAME and --compile (predict and search): whose engine profile prices
/// the plan, and whether it runs under a graph compiler. `engine_help` says
/// what else the engine decides in that command.
void add_engine_flags(CLI::App& app, std::string& engine, bool& compile, const std::string& engine_help);

/// The hardware profile a prediction uses: --profile's file, or the cluster's
/// default, with --engine's profile attached (compiled with --compile).
[[nodiscard]] HardwareProfile priced_profile(const Cluster& c, const std::string& profile_file,
                                             const std::string& engine, bool compile);

/// --memory-headroom PCT (search and predict): the share of each GPU's memory
/// kept free, 0–50; anything else is refused naming the flag and the range.
void add_memory_headroom(CLI::App& app, double& pct);

/// A flag's choices: `first` (its "not pinned" word: engine, any), then a
/// name table's names (kStateAccountingNames, kRecomputeNames).
[[nodiscard]] CLI::IsMember choices_after(const char* first, std::vector<std::string> names);

/// --accounting engine|paper|deepspeed|megatron (search and predict): how the
/// model states are counted; "engine" (the default) as --engine keeps them.
void add_accounting(CLI::App& app, std::string& accounting);

/// --grad-reduce-dtype fp32|bf16|fp16 (predict's plan flags and search's pin):
/// the dtype of the data-parallel gradient reduction (Plan::grad_reduce_dtype).
void add_grad_reduce_dtype(CLI::App& app, std::string& dtype);

/// --master-dtype and --moments-dtype fp32|bf16|fp16 and --param-remainders
/// (predict's plan flags and search's pin): the optimizer's state dtypes
/// (Plan::master_dtype, moments_dtype, param_remainders).
void add_optimizer_dtypes(CLI::App& app, std::string& master, std::string& moments, bool& remainders);
/// --fp8 none|delayed|tensorwise (predict's plan flags and search's pin):
/// Plan::fp8, the FP8 linear layers' scaling recipe.
/// With `param_gather`, --fp8-param-gather too (Plan::fp8_param_gather).
void add_fp8(CLI::App& app, std::string& recipe, bool* param_gather = nullptr);
/// "master weights in fp32 (as remainders), moments in bf16": the states those
/// flags (or a plan's optimizer block) set, as predict, search and memory print
/// them ("(the parameters themselves: no copy)" with OptimizerDtypes::in_params).
[[nodiscard]] std::string adam_states_text(const OptimizerDtypes& d);

struct PlanFlags {
  std::string plan_file;
  int tp = 1, pp = 1, dp = 0, zero = 0, micro_batch = 1, virtual_stages = 1;
  int cp = 1;  // context parallelism (Megatron-Core --context-parallel-size)
  int ulysses = 1;  // DeepSpeed-Ulysses (Megatron-DeepSpeed --ds-sequence-parallel-size)
  int dp_shard = 0;  // hybrid sharding: ZeRO-3 inside groups of dp_shard ranks (0: all of dp × cp)
  long long global_batch = 0;
  std::string recompute = "none", schedule, offload_optimizer = "none", offload_params = "none", precision;
  bool sequence_parallel = false, tp_comm_overlap = false, partition_activations = false, cpu_checkpointing = false, grad_allreduce = false, onebit_adam = false,
       zeropp = false, no_overlap = false, no_bias_fusion = false;
  int freeze_step = 0;
  std::string sparse_attention = "none";
  int sparse_block = 64;
  std::string attention = "standard";
  std::string recompute_policy = "attention";
  int recompute_num_layers = 0;  // Megatron's block method (0: every layer)
  int recompute_every = 2;  // torchtitan's layer checkpointing: every k-th layer (alternate_layers)
  std::string grad_reduce_dtype;  // empty: the engine's
  std::string master_dtype = "fp32", moments_dtype = "fp32";
  bool param_remainders = false;
  std::string fp8 = "none";  // FP8 linear layers' recipe (Fp8Recipe)
  bool fp8_param_gather = false;
  // Uneven pipeline stages (issue 19): a stated partition, or Megatron-LM's
  // first/last stage sizes with the rest balanced (0 = not given).
  std::vector<int> stage_layers;
  std::vector<int> chunk_layers;  // --chunk-layers: each model chunk's layers (Plan::chunk_layers)
  int first_stage_layers = 0, last_stage_layers = 0;
  bool embedding_in_split = false, loss_in_split = false;  // Megatron-LM's --account-for-*-in-pipeline-split

 private:
  std::vector<const CLI::Option*> options_;  // the plan flags add_to registered (not --plan)

 public:

  void add_to(CLI::App& app);
  /// The first plan flag given on the command line (its name), or "".
  [[nodiscard]] std::string given_flag() const;
  /// Whether the plan flag `name` ("--freeze-step") was given.
  [[nodiscard]] bool given(std::string_view name) const;
  /// Throws InputError naming the flag when one is given beside a plan file
  /// (--plan, or `ztune run`'s positional plan), which would silently win.
  void refuse_beside(const std::string& plan_path) const;
  /// Builds the plan from flags (or the --plan file) for this model and cluster,
  /// filling defaults: dp = all remaining devices, global batch from the model,
  /// precision bf16 where supported else fp16. Throws InputError naming the flag.
  [[nodiscard]] Plan resolve(const Transformer& m, const Cluster& c) const;
};

/// A check_plan message ("$.zero_stage: …") with the flag named instead of the
/// JSON field ("--zero: …").
[[nodiscard]] InputError flag_error(const std::string& msg);

}  // namespace ztune::cli
