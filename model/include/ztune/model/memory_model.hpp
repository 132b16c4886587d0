#pragma once
// The memory model: bytes per GPU as named lines (prediction.hpp's MemLine),
// host and NVMe bytes per node, and whether the plan fits. predict_memory() is
// declared in prediction.hpp; this header holds the published formulas it is
// built from, so tests can check each against its paper.
//
// Model-state accounting (ZeRO paper, Rajbhandari et al. 2020, §5 and Table 1):
// mixed-precision Adam keeps 2Ψ (16-bit params) + 2Ψ (16-bit grads) + KΨ (fp32
// master, momentum, variance; K = 12). Stage 1 partitions KΨ over Nd ranks,
// stage 2 also the gradients, stage 3 also the parameters.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ztune/model/prediction.hpp"
#include "ztune/vocab/engine_profile.hpp"
#include "ztune/vocab/name_table.hpp"

namespace ztune {

/// Which bytes-per-parameter bookkeeping to use for model states.
enum class StateAccounting : std::uint8_t {
  /// The ZeRO paper's (and ztune's executor's): 16-bit gradients, K = 12.
  /// Stages 0..3 per GPU: 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N. The default.
  paper,
  /// DeepSpeed's estimate_zero2/3_model_states_mem_needs (2024+): it keeps fp32
  /// gradient partitions, so stages 1–2 need 2Ψ + 18Ψ/N and stage 3 18Ψ/N plus
  /// 4 bytes × the largest layer; stage 0 16Ψ, except where DeepSpeed runs its
  /// BF16_Optimizer (deepspeed_runs_bf16_optimizer: bf16 pipelines without
  /// ZeRO): 8Ψ + 12Ψ/N (an fp32 gradient buffer beside the 16-bit one; the fp32
  /// states partitioned). Use when the plan targets DeepSpeed.
  deepspeed,
  /// Megatron-LM / Megatron-Core (its docs, "Distributed Optimizer", bytes per
  /// parameter): the contiguous main-gradient buffer is kept whole, in fp32
  /// for bf16 (Megatron accumulates and reduces bf16 gradients in fp32) and in
  /// 16 bits for fp16, whose optimizer then keeps an fp32 copy of its gradient
  /// shard beside master, momentum and variance. bf16: 18 → 6 + 12/d with the
  /// distributed optimizer (ztune's ZeRO-1); fp16: 20 → 4 + 16/d. 18Ψ is the
  /// accounting behind Korthikanti et al.'s Figure 1.
  megatron,
};

/// Names in StateAccounting's order (vocab/name_table.hpp: name_in, value_in, names_of).
inline constexpr const char* kStateAccountingNames[] = {"paper", "deepspeed", "megatron"};
[[nodiscard]] inline const char* to_string(StateAccounting a) { return name_in(kStateAccountingNames, a); }

/// How the engine named `engine` (an engine profile's name: "megatron",
/// "deepspeed", "fsdp", "ztune") keeps its model states, so that a plan said
/// to fit fits in the engine that runs it: Megatron-LM's whole fp32
/// main-gradient buffer (megatron), DeepSpeed's own estimators' fp32 gradient
/// partitions (deepspeed); ztune's executor the ZeRO paper's 16-bit
/// gradients, and FSDP too (its sharded fp32 parameters, gradients and two
/// Adam moments are the paper's 16Ψ/N), as any other name. The shells'
/// default (--accounting overrides it) and validate's memory check.
[[nodiscard]] StateAccounting state_accounting_of_engine(std::string_view engine);

struct MemoryOptions {
  StateAccounting accounting = StateAccounting::paper;
  /// Fraction of each GPU's memory kept free, in [0, 0.5]: a plan fits only in
  /// capacity × (1 − headroom). 0: the prediction's own lines (runtime,
  /// fragmentation) are the only reserve.
  double gpu_headroom = 0;
};

/// Model-state bytes per GPU for Ψ parameters held by the GPU before ZeRO
/// partitioning, split into the params / grads / optimizer lines.
struct ModelStateBytes {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  [[nodiscard]] double total() const { return params + grads + optimizer; }
};
/// The dtypes of the optimizer's states (Plan::master_dtype, Plan::moments_dtype).
struct OptimizerDtypes {
  Precision master = Precision::fp32;
  Precision moments = Precision::fp32;
  bool remainders = false;  // Plan::param_remainders: the fp32 master as 2 bytes beside its bf16 parameter
  // The master is the bf16 parameters themselves: NeMo's Apex
  // DistributedFusedAdam with optim.dtype equal to the model's sets
  // store_params false and updates the model's parameters
  // (megatron_base_model.py setup_optimization). fp16 masters are Megatron-
  // Core's, which Transformer Engine's FusedAdam keeps as a copy. (ztune's
  // executor keeps no copy of a master of its parameters' dtype, either:
  // optimizer_dtypes_kept.)
  bool in_params = false;
  [[nodiscard]] bool fp32() const {
    return master == Precision::fp32 && moments == Precision::fp32 && !remainders;
  }
};
/// The plan's states; in_params for bf16 masters beside bf16 parameters.
[[nodiscard]] OptimizerDtypes optimizer_dtypes(const Plan& p);
/// The plan's states as the engine that runs it keeps them: optimizer_dtypes,
/// and on ztune's executor's layout (executor_layout) in_params for any 16-bit
/// master of its parameters' own dtype, fp16 too, which its step updates in
/// place (executor_state_bytes). What predict prints and the step's traffic reads.
[[nodiscard]] OptimizerDtypes optimizer_dtypes_kept(const Plan& p, const Cluster& c, const HardwareProfile& hw);
/// Adam's state bytes per parameter of a 16-bit plan, the master copy and the
/// two moments: ZeRO's K (Rajbhandari et al. 2020, §3.1: K = 12 with fp32
/// states), 4 with bf16 masters and moments beside bf16 parameters (NeMo's
/// optim.dtype bf16: the master is the parameters), 6 with fp16 masters and
/// moments (Megatron-Core's copy) or bf16 ones beside fp16 parameters, 8 with
/// fp32 masters and bf16 moments, 6 with those masters kept as remainders. The
/// one owner of K: the memory lines and the optimizer step's traffic both read it.
[[nodiscard]] double adam_state_bytes(OptimizerDtypes d);
/// `precision` matters to the megatron accounting (its gradient buffer's type,
/// which a plan's stated `grad_reduce` dtype sets: Megatron-LM reduces its
/// main_grad buffer itself) and, with `pp`, to the deepspeed one (its BF16_Optimizer).
/// `states` replaces every accounting's fp32 K (adam_state_bytes).
[[nodiscard]] ModelStateBytes model_state_bytes(double psi, int dp, int zero_stage, StateAccounting a,
                                                Precision precision, int pp = 1,
                                                std::optional<Precision> grad_reduce = std::nullopt,
                                                OptimizerDtypes states = {});

/// Whether DeepSpeed wraps the optimizer in its BF16_Optimizer with its default
/// data types (runtime/engine.py _do_optimizer_sanity_check and get_data_types,
/// DeepSpeed 0.18–0.19): bf16 with pipeline parallelism and no ZeRO. bf16 at
/// ZeRO 1 takes it only with data_types.grad_accum_dtype fp32, which ztune's
/// export does not set; bf16 without a pipeline gets the FP16_Optimizer-like
/// DDP_BFLOAT16 wrapper (16-bit gradients, fp32 states whole). THE one rule:
/// the deepspeed state accounting and the time model's fp32 gradient fold
/// (op_costs.hpp bf16_optimizer_runs) both use it. BLOOM-176B ran so (bf16,
/// ZeRO stage 0, 12 pipeline stages).
[[nodiscard]] bool deepspeed_runs_bf16_optimizer(Precision precision, int pp, int zero_stage);

/// FP8 linear layers (plan.fp8) under the engine's library `lib`: the bytes
/// one layer's stored activations shrink by for one micro-batch, and the
/// bytes of FP8 weight copies a GPU of a stage of `stage_layers` holds. Under
/// Transformer Engine each linear keeps its input for wgrad in FP8, so the
/// four linear inputs of Korthikanti's count (QKV's and FC1's 2·s·b·h each,
/// outside the tensor-parallel region; the projection's 2·s·b·h/t and FC2's
/// 2·s·b·f/t inside it) take 1 byte an element, but for the projection's
/// under a fused attention kernel, which keeps its 16-bit output itself (the
/// FP8 copy is then a byte more); and every weight's FP8 copy and transpose
/// stay cached across the step: 2 bytes a weight. torchao (0.9 and later,
/// matmul_with_hp_or_float8_args) keeps its 16-bit inputs (no saving) and
/// casts weights at each use (one layer's copies live). 0 without plan.fp8.
[[nodiscard]] double fp8_activation_saving(const Transformer& m, const Plan& p, Fp8Library lib);
[[nodiscard]] double fp8_weight_copy_bytes(const Transformer& m, const Plan& p, Fp8Library lib, double stage_layers);

/// Activation bytes of ONE transformer layer for one micro-batch on one GPU
/// (Korthikanti et al. 2022, §4, Table 2), 16-bit:
///   no parallelism            s·b·h·(34 + 5·a·s/h)
///   tensor parallel t         s·b·h·(10 + 24/t + 5·a·s/(h·t))
///   + sequence parallel       s·b·h·(34 + 5·a·s/h)/t
///   selective recomputation   drops the 5·a·s/h term
///   full recomputation        2·s·b·h (÷t with sequence parallelism)
/// Generalised for grouped-query attention and FFN width/SwiGLU: the 24 is
/// 2h (Q) + 4·kv_dim (K,V) + 2h (projection input) + 4f (GeLU: its input and
/// FC2's input; SwiGLU 6f), divided by h. Reduces to the paper's for GPT.
/// Block-sparse attention stores only the layout's blocks of the score
/// tensors: the 5·a·s/h term scales with `attention_density`
/// (sparse_attention.hpp; 1 = dense). A FlashAttention kernel stores none of
/// them, only the fp32 log-sum-exp of each query row: 4·a·s·b/t bytes in place
/// of 5·a·s²·b/t (Dao et al. 2022, §3.1: memory linear in s), whatever the
/// recomputation, so selective recomputation has nothing left to drop.
/// Context parallelism cp (Megatron-Core's; the sequence in cp shards) divides
/// every term by cp: each rank stores s/cp tokens of every tensor, and of the
/// scores its s/cp query rows against all s keys (the ring's blocks, cp of
/// (s/cp)² each: 5·a·s²·b/(t·cp)), or its rows' log-sum-exp with flash.
/// A model without dropout (Transformer::dropout 0: Llama, Nemotron, OLMo)
/// keeps no masks: 2·s·b·h fewer outside the tensor-parallel region and 2
/// bytes per score instead of 5 (attention_score_bytes).
[[nodiscard]] double layer_activation_bytes(const Transformer& m, int micro_batch, int tp, bool sequence_parallel,
                                            Recompute r, double attention_density = 1.0,
                                            AttentionKernel kernel = AttentionKernel::standard, int cp = 1);
/// The same for a plan's micro-batch, tp, sequence parallelism, sparse layout,
/// attention kernel and context parallelism, under recomputation `r`.
[[nodiscard]] double layer_activation_bytes(const Transformer& m, const Plan& p, Recompute r);
/// Bytes a stored attention score takes (standard attention, scores kept):
/// Korthikanti's 5 with dropout (softmax output, mask, dropout output), 2 without.
[[nodiscard]] double attention_score_bytes(const Transformer& m);

/// Whether stage memory is ztune's executor's own allocations (its tensors,
/// stored in the plan's precision, its Adam states in the plan's state
/// dtypes, its kernels' fp32 staging where it has any): on CPU ranks, and on
/// GPUs for the engine that is the executor (EngineProfile::executor).
[[nodiscard]] bool executor_layout(const Cluster& c, const HardwareProfile& hw);
/// For a SwiGLU model priced with dropout under an engine that runs it (a
/// model file without "dropout" reads as GPT-2's 0.1; Llama, Mistral and Qwen
/// train without: their masks and kernels would be priced though never run),
/// a sentence saying so and what prices it the Llama way; "" otherwise
/// (ztune's executor has no dropout). predict, search and the planner say it.
[[nodiscard]] std::string dropout_note(const Transformer& m, const Cluster& c, const HardwareProfile& hw);
/// How predict_memory counts the model states of a plan stored in `storage`
/// under accounting `a`: "executor" (executor_layout: the executor's own
/// tensors, whatever `a` says), "fp32" (an fp32 plan: 4 + 4 + 8 bytes a
/// parameter under every accounting), else `a`'s name. What predict and
/// search print beside the fits, so they name what was counted.
[[nodiscard]] const char* states_counted_as(StateAccounting a, Precision storage, const Cluster& c,
                                            const HardwareProfile& hw);
/// What one layer keeps for backward under recomputation `r`, as the plan's
/// engine stores it: layer_activation_bytes, or the executor's tensors under
/// executor_layout (no dropout masks, the plan's precision each). The memory model's
/// per-layer term and the simulator's activation timeline both read it.
[[nodiscard]] double stored_activation_bytes(const Transformer& m, const Plan& p, const Cluster& c,
                                             const HardwareProfile& hw, Recompute r);
/// What a model chunk keeps per micro-batch beside its layers' activations:
/// the executor's output of the chunk (GptStage::Acts residual.back: the
/// last layer's, or what the next stage was sent) from its forward until its
/// backward begins; 0 for an engine's layout (Megatron-LM deallocates a sent
/// output, deallocate_output_tensor). The memory model and the simulator's
/// activation timeline both read it.
[[nodiscard]] double stage_output_bytes(const Transformer& m, const Plan& p, const Cluster& c,
                                        const HardwareProfile& hw);

/// Micro-batches whose activations the most loaded stage holds at once:
/// 1F1B: min(p, m) (first stage); interleaved: p·(1 + (p−1)/(p·v)) (Korthikanti
/// §4.2.3), GPipe: m; no pipeline: 1. Returned as "layers' worth of
/// micro-batches" per stage layer, i.e. multiply by per-layer bytes × L/p.
[[nodiscard]] double microbatches_in_flight(const Plan& p);

/// Full memory prediction with an explicit accounting.
[[nodiscard]] MemoryPrediction predict_memory(const Transformer& m, const Plan& p, const Cluster& c,
                                              const HardwareProfile& hw, const MemoryOptions& opt);
/// predict_memory for a search's memory prune: the same prediction, or
/// nullopt once one stage's GPU total alone shows the plan does not fit and
/// its memory pressure (its GPU total / usable bytes at least) is above
/// `pressure_above`; the other stages are then left uncomputed. A search that
/// keeps the plans closest to fitting passes the pressure a plan must beat to
/// enter that list (+inf while it has room, -inf when it keeps none).
[[nodiscard]] std::optional<MemoryPrediction> predict_memory_unless_above(const Transformer& m, const Plan& p,
                                                                         const Cluster& c, const HardwareProfile& hw,
                                                                         const MemoryOptions& opt,
                                                                         double pressure_above);
/// GPU bytes of pipeline stage `stage` (0-based) alone; predict_memory's
/// gpu_total_bytes is the largest of them. For comparing each rank of a run
/// with its own stage (Plan::stage_of_rank).
[[nodiscard]] double stage_gpu_bytes(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                                     int stage, const MemoryOptions& opt);

/// The largest gradient bucket of ztune's executor for a stage of `stage_params`
/// parameters per rank (ParamStore groups whole units, a layer or an end of
/// the model, greedily up to reduce_bucket_elems): as many whole layers as
/// the size holds (one at least), or the word embedding's unit when larger,
/// at most the stage's parameters.
[[nodiscard]] double executor_bucket_elems(const Transformer& m, const Plan& p, double stage_params);

/// Megatron's block method at its fastest for `p`, a plan that recomputes
/// every layer (recompute full, recompute_num_layers 0): the fewest layers of
/// each model chunk recomputed (recompute_num_layers) with which it still
/// fits, found by bisection (a stage's memory grows as fewer layers are
/// recomputed, the rest kept whole); `fitted` receives that plan's memory.
/// 0 when none fits with fewer than every layer of the largest chunk (or
/// its chunks hold one layer).
[[nodiscard]] int fewest_recomputed_layers(const Transformer& m, const Plan& p, const Cluster& c,
                                           const HardwareProfile& hw, const MemoryOptions& opt,
                                           MemoryPrediction* fitted = nullptr);

/// The largest micro-batch (≤ limit) whose GPU memory fits, everything else in
/// the plan unchanged (grad_accum and global batch are not re-derived). 0 when
/// even 1 does not fit.
[[nodiscard]] int largest_fitting_micro_batch(const Transformer& m, const Plan& p, const Cluster& c,
                                              const HardwareProfile& hw, int limit = 1024,
                                              const MemoryOptions& opt = {});

/// The names of the GPU lines that overflow: the lines that, taken largest
/// first, exceed the capacity (for "does not fit" messages). Writes up to
/// `max` lines into `out` and returns how many.
int overflowing_lines(const MemoryPrediction& mp, MemLine* out, int max);

}  // namespace ztune
