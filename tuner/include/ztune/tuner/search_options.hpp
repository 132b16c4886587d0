#pragma once
// What the user asks the search for: the space's constraints, the objective,
// and how the search runs (passes, threads, how many plans to keep).
#include <atomic>
#include <cstdint>
#include <optional>

#include "ztune/vocab/cluster.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/tuner/engine.hpp"

namespace ztune {

/// The default cap on the plans one search enumerates (SpaceOptions::max_plans):
/// at most about a minute of ranking on two cores (measured: about 1 M plans/s per
/// core ranked; plans of rejected layouts cost nothing), where the catalog's
/// clusters searched whole hold well under 1 M plans.
inline constexpr std::int64_t kDefaultMaxPlans = 100'000'000;

/// Constraints that shape the plan space (DESIGN.md "Tuner").
struct SpaceOptions {
  /// A space of more plans is refused (InputError naming --max-plans) before any
  /// is ranked, instead of running for hours (`--nodes 100000 --min-gpus 1` holds billions).
  std::int64_t max_plans = kDefaultMaxPlans;
  int gpus = 0;            // exact device count; 0 = all of the cluster's (or the min/max range)
  int min_gpus = 0;        // with max_gpus: every count in [min, max]; 0 = unset
  int max_gpus = 0;
  bool allow_tp_across_nodes = false;
  Engine engine = Engine::ztune;
  std::int64_t global_batch = 0;      // sequences per step; 0 = the model file's
  std::optional<Precision> precision; // pin one precision; default: every 16-bit one the GPU has
  /// The gradient reduction's dtype every plan states (Plan::grad_reduce_dtype:
  /// torchtitan's fp32, Megatron-LM --grad-reduce-in-bf16); unset: the engine's.
  /// A 16-bit one is the plans' precision too.
  std::optional<Precision> grad_reduce_dtype;
  /// The optimizer's state dtypes every plan states (Plan::master_dtype and
  /// moments_dtype; fp32 both by default). 16-bit states drop the space's
  /// optimizer-offload and 1-bit Adam plans (check_plan_shape).
  Precision master_dtype = Precision::fp32;
  Precision moments_dtype = Precision::fp32;
  bool param_remainders = false;
  /// FP8 linear layers in every plan (Plan::fp8; none by default): no FP8 run
  /// is among the published ones ztune is judged on, so the space tries them
  /// only when asked, as one pinned recipe.
  Fp8Recipe fp8 = Fp8Recipe::none;
  /// FP8 parameters in every plan (Plan::fp8_param_gather, Megatron-LM
  /// --fp8-param-gather): needs `fp8`; the megatron engine then searches its
  /// distributed-optimizer (ZeRO-1) plans only, the ones that can keep them.
  bool fp8_param_gather = false;
  int max_micro_batch = 0;            // 0 = no cap (memory decides)
  bool include_onebit_adam = false;   // also search 1-bit Adam (changes convergence: opt-in)
  bool include_zeropp = false;        // also search ZeRO++ (quantized communication: opt-in)
  /// 1-bit Adam's warm-up steps; < 0 = kOnebitWarmupFraction of the run's steps
  /// (train_tokens / (global_batch · s)), so ranking sees the run-averaged volume.
  int onebit_freeze_step = -1;
  /// Also search this block-sparse layout (changes the model: opt-in); none = dense only.
  SparseLayout sparse_attention = SparseLayout::none;
  int sparse_block = 64;              // its block size (must divide the sequence)
  /// Pin the dense attention kernel; default: standard, plus flash where the
  /// GPUs run FlashAttention-2 (supports_flash_attention) and the engine's
  /// kernel is the one priced (Megatron-LM, DeepSpeed; ztune's CPU executor).
  std::optional<AttentionKernel> attention;
  /// The fused kernel offered beside standard when `attention` is unset:
  /// run_search sets preferred_fused_kernel(engine, profile) (cuDNN's where
  /// the profile prices it faster, else FlashAttention-2).
  AttentionKernel fused_kernel = AttentionKernel::flash;
  /// Pin the tensor-parallel degree, the pipeline depth or the ZeRO stage (the
  /// configuration a published run or a cluster policy fixes); unset: all.
  std::optional<int> tp;
  std::optional<int> pp;
  std::optional<int> zero_stage;
  /// Pin the recomputation (--recompute none, selective or full: what a
  /// recipe or an engine version fixes, e.g. 2019-2021 Megatron-LM's full
  /// recomputation of every layer). Pinned full keeps every layer recomputed:
  /// the search does not turn it into Megatron's block method.
  std::optional<Recompute> recompute;
  /// Whether the space may use Megatron-style sequence parallelism
  /// (--no-sequence-parallel: an engine before it, 2019-2021 Megatron-LM) and,
  /// where the megatron engine runs on Transformer Engine, TP communication
  /// overlapped with its GEMMs (--no-tp-comm-overlap: a recipe or GPU that
  /// runs without it). Both allowed by default.
  bool sequence_parallel = true;
  bool tp_comm_overlap = true;
  /// Pin the context-parallel degree (--cp), or bound it (--max-cp; 0: the
  /// default, context parallelism only for sequences of 8k tokens or more,
  /// search_space.hpp kContextParallelMinSeq; 1: none).
  std::optional<int> cp;
  int max_cp = 0;
  /// Pin the DeepSpeed-Ulysses degree (--ulysses), or bound it (--max-ulysses;
  /// 0: the default, as cp's: only from kContextParallelMinSeq tokens, up to
  /// kContextParallelMaxDefault; 1: none). Only the deepspeed and ztune
  /// engines run it (Megatron-LM/NeMo and FSDP split sequences with cp).
  std::optional<int> ulysses;
  int max_ulysses = 0;
  /// Pin hybrid sharding (--dp-shard): only ZeRO-3 plans sharded in groups of
  /// this many data-parallel ranks.
  std::optional<int> dp_shard;
};

/// Default 1-bit Adam warm-up as a fraction of the run: the 1-bit Adam paper
/// (Tang et al. 2021, §6) and DeepSpeed's 1-bit Adam tutorial warm up BERT
/// pre-training with plain Adam for about 15–25% of the steps (the tutorial's
/// freeze_step 23,000); the low end, 15%, is taken.
inline constexpr double kOnebitWarmupFraction = 0.15;

enum class Objective : std::uint8_t {
  throughput,  // tokens per second, higher is better
  time,        // days to train `tokens`, lower is better
  cost,        // price of training `tokens` (GPU-hours × gpu_hour_price), lower is better
};

/// Plans a search re-times with the simulator unless told otherwise: `ztune
/// search --simulate-top`'s default and the planner's, so both name the same
/// best plan.
inline constexpr int kSimulateTopDefault = 3;

struct SearchOptions {
  SpaceOptions space;
  Objective objective = Objective::throughput;
  double tokens = 0;           // token budget for days/cost; 0 = the model file's train_tokens
  double gpu_hour_price = 0;   // currency per GPU-hour; 0 prints cost in GPU-hours
  int top = 10;                // plans kept, best first
  int simulate_top = 0;        // plans re-timed by the simulator (after the analytical rank)
  int closest = 5;             // infeasible plans kept, closest to fitting first (for --explain)
  int threads = 0;             // 0 = all cores
  bool prune_enabled = true;   // memory prune pass
  bool rank_enabled = true;    // analytical rank pass
  bool simulate_enabled = true;
  /// How fit is judged: state accounting, and the GPU memory kept free
  /// (gpu_headroom) by the prune, the rank's feasible count and --explain.
  MemoryOptions memory;
  /// Whether memory.accounting was stated (--accounting other than "engine"):
  /// the fit hints then keep it for the other engines they try, where they
  /// otherwise count each engine's states as it keeps them.
  bool accounting_stated = false;
  /// Set (e.g. by a SIGINT handler) to stop early; the search returns the best so far.
  const std::atomic<bool>* stop = nullptr;
};

}  // namespace ztune
