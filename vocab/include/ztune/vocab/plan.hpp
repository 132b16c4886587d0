#pragma once
// A training plan: how the model is split and trained on the cluster. The same
// plan JSON is the tuner's output, the executor's input and export's source.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/name_table.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

enum class OffloadTarget : std::uint8_t { none, cpu, nvme };
enum class Recompute : std::uint8_t { none, selective, full };
enum class Schedule : std::uint8_t { gpipe, one_f_one_b, interleaved };
enum class SparseLayout : std::uint8_t { none, fixed, bigbird, longformer, variable };
/// How the dense attention core runs. standard: Megatron-LM's unfused path
/// (QKᵀ batched GEMM, fused scale-mask-softmax, dropout, PV), which stores the
/// s×s probabilities, dropout mask and dropout output for backward (Korthikanti
/// et al. 2022's 5·a·s²·b/t bytes). flash: one fused kernel in the
/// FlashAttention manner (Dao et al. 2022; Dao 2023), which keeps only the fp32
/// log-sum-exp of each query row and recomputes the probabilities in backward.
/// flash is the FlashAttention-2 library (what PyTorch SDPA's flash backend,
/// Megatron's --use-flash-attn and Transformer Engine's flash-attn backend
/// run). cudnn: the same algorithm and memory as cuDNN's fused flash
/// attention (Transformer Engine FusedAttention, NVTE_FUSED_ATTN=1; JAX
/// cudnn_flash_te; ztune's CUDA backend), whose Hopper kernels use the
/// asynchronous tensor-core instructions FlashAttention-2 does not (Shah et
/// al. 2024, FlashAttention-3, §4: cuDNN and FA3 1.5-2× FA2 on H100): its
/// speed is the hardware profile's cudnn_attention_factor. eager: standard's
/// algorithm and memory with the softmax chain as separate PyTorch kernels,
/// each a pass over the s×s scores: the scaling, the causal mask, softmax,
/// dropout, and a backward kernel for the scaling and the mask each
/// (Megatron-LM of 2019 and DeepSpeedExamples/Megatron-LM, Megatron's
/// --no-masked-softmax-fusion, Hugging Face eager attention).
enum class AttentionKernel : std::uint8_t { standard, flash, cudnn, eager };

/// What selective recomputation (recompute "selective") recomputes in the
/// backward pass; each engine states its own policy:
/// - attention: the attention core only (Korthikanti et al. 2022, §4.2;
///   Megatron-LM --recompute-granularity selective, NeMo
///   activations_checkpoint_granularity selective). The default.
/// - alternate_mm: torchtitan's op-level selective checkpointing
///   (activation_checkpoint.selective_ac_option "op", torchtitan's
///   _apply_op_sac: "save every other mm"): of a block's matmuls in forward
///   order (wq, wk, wv, wo, then the MLP's w1, w3, w2; w1, w2 without a gated
///   MLP) the odd ones are saved and wk, wo and w3 (w2) recomputed, with every
///   elementwise op; the attention kernel's output is saved, not recomputed.
/// - mlp_in: MaxText's remat policy save_dot_except_mlpwi (its custom policy
///   with the q/k/v, out and MLP-out projections saved on the device): the
///   MLP's input projections (wi: gate and up), the attention core (its
///   "context" is not saved) and every elementwise op recomputed.
/// - alternate_layers: torchtitan's layer-level selective checkpointing
///   (_apply_layer_sac: every k-th block wrapped whole in a checkpoint, k its
///   selective_ac_option, "2" by default; fms-fsdp's selective_checkpointing
///   1/k): a k-th of the layers recomputed in full, the others keep every
///   activation. k is the plan's recompute_every.
/// - dots: JAX's jax.checkpoint_policies.dots_saveable, Praxis/PaxML's
///   AutodiffCheckpointType.SAVE_DOT_ONLY: every dot_general's output saved
///   (q, k, v, the out projection, both MLP matmuls), everything else
///   recomputed: the elementwise ops and the attention core, which a fused
///   attention kernel (Transformer Engine's custom call, not a dot) runs again.
enum class SelectivePolicy : std::uint8_t { attention, alternate_mm, mlp_in, alternate_layers, dots };
/// The names of the policies, in the enum's order.
inline constexpr const char* kSelectivePolicyNames[] = {"attention", "alternate_mm", "mlp_in", "alternate_layers",
                                                        "dots"};
/// The policy named n; nullopt for any other name.
[[nodiscard]] std::optional<SelectivePolicy> selective_policy_of(std::string_view n);

/// flash and cudnn: one fused kernel, only the log-sum-exp kept, masked
/// causal blocks skipped. standard and eager store the s×s probabilities.
[[nodiscard]] constexpr bool fused_attention(AttentionKernel k) {
  return k == AttentionKernel::flash || k == AttentionKernel::cudnn;
}
/// The kernel named n ("standard", "flash", "cudnn"); nullopt for any other.
[[nodiscard]] std::optional<AttentionKernel> attention_kernel_of(std::string_view n);
/// The names attention_kernel_of accepts, in the enum's order.
inline constexpr const char* kAttentionKernelNames[] = {"standard", "flash", "cudnn", "eager"};

/// FP8 linear layers (Micikevicius et al. 2022, "FP8 Formats for Deep
/// Learning"): the transformer's four linear GEMMs (QKV, attention
/// projection, FC1, FC2) run forward, dgrad and wgrad on 8-bit floating-point
/// inputs (E4M3 activations and weights, E5M2 gradients: Transformer Engine's
/// "hybrid" format), accumulate in fp32 and write the plan's 16-bit type.
/// Parameters, gradients, optimizer states, norms, the attention core and the
/// LM head stay in the plan's precision. Each input is cast with a per-tensor
/// scale, set
///   delayed:    from the amax history of earlier steps (Transformer Engine's
///               DelayedScaling, Megatron-LM --fp8-recipe delayed): the cast
///               records the tensor's amax as it writes, one pass;
///   tensorwise: from the tensor's own amax (current scaling: TE's
///               Float8CurrentScaling, --fp8-recipe tensorwise; torchao's
///               Float8Linear, torchtitan's float8 converter): an amax pass
///               before the cast.
enum class Fp8Recipe : std::uint8_t { none, delayed, tensorwise };
/// The names of the recipes, in the enum's order: plan files' "fp8" and --fp8.
inline constexpr const char* kFp8RecipeNames[] = {"none", "delayed", "tensorwise"};
[[nodiscard]] std::optional<Fp8Recipe> fp8_recipe_of(std::string_view n);
std::string to_string(Fp8Recipe r);

/// The names of the offload targets, recompute modes, pipeline schedules and
/// sparse layouts in their enums' order: what plan files, the CLI's flags and
/// the published runs spell (one table each; issue 22: the CLI and the
/// validation loaders rebuilt these parsers as ternary chains).
inline constexpr const char* kOffloadTargetNames[] = {"none", "cpu", "nvme"};
inline constexpr const char* kRecomputeNames[] = {"none", "selective", "full"};
inline constexpr const char* kScheduleNames[] = {"gpipe", "1f1b", "interleaved"};
inline constexpr const char* kSparseLayoutNames[] = {"none", "fixed", "bigbird", "longformer", "variable"};
/// The value named n; nullopt for any other name.
[[nodiscard]] std::optional<OffloadTarget> offload_target_of(std::string_view n);
[[nodiscard]] std::optional<Recompute> recompute_of(std::string_view n);
[[nodiscard]] std::optional<Schedule> schedule_of(std::string_view n);
[[nodiscard]] std::optional<SparseLayout> sparse_layout_of(std::string_view n);

std::string to_string(OffloadTarget o);
std::string to_string(Recompute r);
std::string to_string(Schedule s);
std::string to_string(SparseLayout l);
std::string to_string(AttentionKernel k);
std::string to_string(SelectivePolicy s);

/// The largest values a plan file holds (plan_from_json refuses larger ones);
/// the command line's plan flags take the same, so that every plan predict
/// prices can be written, exported and run (cli/plan_flags.cpp).
inline constexpr int kMaxPlanDegree = 1 << 20;   // dp, tp, pp, cp, ulysses, dp_shard, layer counts
inline constexpr int kMaxMicroBatch = 1 << 20;
inline constexpr int kMaxGradAccum = 1 << 24;
inline constexpr int kMaxVirtualStages = 1024;
inline constexpr int kMaxFreezeStep = 1 << 30;
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 40;

struct Plan {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  /// Context parallelism (Megatron-Core --context-parallel-size, torchtitan
  /// context_parallel_degree): each sequence split over cp ranks in 2·cp
  /// load-balanced causal chunks (rank i holds chunks i and 2cp−1−i), K/V
  /// exchanged in a ring beside the attention blocks. cp ranks hold the same
  /// weights: gradients are reduced (and ZeRO partitions) over dp × cp. It
  /// consumes no batch: global_batch = micro_batch × grad_accum × dp.
  int cp = 1;
  /// DeepSpeed-Ulysses sequence parallelism (Jacobs et al. 2023; Megatron-
  /// DeepSpeed --ds-sequence-parallel-size): each sequence split over ulysses
  /// ranks, s/u tokens each for every non-attention layer; an all-to-all
  /// before attention turns Q, K, V from [s/u, all heads] into [s, heads/u],
  /// another after it turns the output back. Ulysses ranks hold the same
  /// weights: gradients are reduced (and ZeRO partitions) over dp × ulysses.
  /// It consumes no batch. Not with cp or Megatron's sequence_parallel.
  int ulysses = 1;
  /// Hybrid sharding (PyTorch FSDP HYBRID_SHARD / FSDP2 HSDP, torchtitan
  /// data_parallel_shard_degree, DeepSpeed MiCS mics_shard_size, MaxText fsdp
  /// within dcn data parallelism): ZeRO-3 shards parameters, gradients and
  /// optimizer states over groups of dp_shard consecutive ranks of the weights'
  /// data-parallel group (dp_cp(): dp × cp × ulysses) and replicates them across the
  /// dp_cp()/dp_shard groups. 0 = one group of all dp × cp ranks (plain ZeRO-3,
  /// the default, not written to the plan file). Only with zero_stage 3; it
  /// must divide dp × cp and lie in [2, dp × cp). Distinct from ZeRO++'s hpZ
  /// (zeropp), which keeps a second, node-local copy of the weights beside a
  /// partition over all of dp.
  int dp_shard = 0;
  int virtual_stages = 1;        // model chunks per pipeline stage (interleaved 1F1B)
  bool sequence_parallel = false;
  /// ZeRO-R's partitioned activation checkpoints, Pa (Rajbhandari et al. 2020,
  /// §6.1; DeepSpeed activation_checkpointing.partition_activations, Megatron-LM
  /// --distribute-saved-activations): with full recomputation each layer's
  /// saved input is split over the tp ranks and all-gathered before the layer is
  /// recomputed. Needs tp >= 2 and recompute full; not with sequence_parallel
  /// (which already splits it).
  bool partition_activations = false;
  /// ZeRO-R's CPU checkpointing, Pa+cpu (Rajbhandari et al. 2020, §6.1: the
  /// activation checkpoints offloaded to host memory; DeepSpeed
  /// activation_checkpointing.cpu_checkpointing, Megatron-DeepSpeed
  /// --checkpoint-in-cpu): with full recomputation each layer's saved input is
  /// copied to the host after the layer's forward and back before it is
  /// recomputed, so a GPU keeps one checkpoint instead of one per layer.
  /// DeepSpeed's checkpointing makes both copies with a blocking .to(): they
  /// hold the compute stream. Needs recompute full.
  bool cpu_checkpointing = false;
  int zero_stage = 0;            // 0..3
  OffloadTarget offload_optimizer = OffloadTarget::none;
  OffloadTarget offload_params = OffloadTarget::none;
  int micro_batch = 1;           // sequences per micro-batch per data-parallel rank
  int grad_accum = 1;            // micro-batches per step (m)
  std::int64_t global_batch = 1; // = micro_batch × grad_accum × dp
  Recompute recompute = Recompute::none;
  /// What recompute "selective" recomputes (see SelectivePolicy). Plan file:
  /// recompute_policy, written only when not "attention"; any other policy
  /// needs recompute "selective".
  SelectivePolicy recompute_policy = SelectivePolicy::attention;
  /// With recompute_policy alternate_layers: every k-th layer recomputed
  /// whole (torchtitan selective_ac_option "k", fms-fsdp
  /// selective_checkpointing 1/k); k >= 2. Plan file: recompute_every,
  /// written only when not 2 (torchtitan's default).
  int recompute_every = 2;
  /// Megatron-LM's block recomputation (--recompute-granularity full
  /// --recompute-method block --recompute-num-layers N; NeMo
  /// activations_checkpoint_method "block" with activations_checkpoint_num_layers;
  /// Megatron-Core TransformerBlock._checkpointed_forward): with recompute
  /// "full", only the first N transformer layers of each model chunk (a
  /// pipeline stage, or each of its virtual stages) keep just their input and
  /// run forward again in backward; the chunk's other layers keep every
  /// activation, as with recompute "none". A chunk of N layers or fewer is
  /// recomputed whole. 0: every layer (Megatron's uniform method with one
  /// layer a group, what recompute "full" means). Plan file:
  /// recompute_num_layers, written only when not 0.
  int recompute_num_layers = 0;
  Precision precision = Precision::bf16;
  Schedule schedule = Schedule::one_f_one_b;
  bool overlap_comm = true;      // bucketed reduction overlapped with backward
  /// Tensor-parallel communication overlapped with the GEMMs it feeds or
  /// follows (Megatron-Core --tp-comm-overlap, NeMo ub_tp_comm_overlap:
  /// Transformer Engine's userbuffers split each sequence-parallel all-gather
  /// and reduce-scatter into chunks pipelined with the GEMM; Wang et al. 2023,
  /// "Overlap Communication with Dependent Computation via Decomposition in
  /// Large Deep Learning Models", ASPLOS). Needs tp >= 2 and sequence_parallel.
  /// Plan file: communication.tp_comm_overlap, written only when true.
  bool tp_comm_overlap = false;
  /// ZeRO-1/2 reduce each gradient bucket to its partition owners with a
  /// reduce-scatter (DeepSpeed zero_optimization.reduce_scatter, the default).
  /// false: an all-reduce of the whole bucket, twice the traffic: DeepSpeed's
  /// ZeRO stage 1 before the 2020-03-13 update ("ZeRO stage 1 with reduced
  /// communication": 1.5× data parallelism's volume, all-reduce at the end of
  /// backward, then the parameters' all-gather). Plan file:
  /// communication.reduce_scatter, written only when false.
  bool reduce_scatter = true;
  /// The dtype the data-parallel gradient reduction moves, where the plan
  /// states it: fp32 (Megatron-LM's default under --bf16, its fp32 main_grad
  /// buffer; --accumulate-allreduce-grads-in-fp32 under --fp16; torchtitan's
  /// only training.mixed_precision_reduce; FSDP MixedPrecision reduce_dtype
  /// float32; DeepSpeed communication_data_type "fp32") or the plan's own
  /// 16-bit precision (Megatron-LM --grad-reduce-in-bf16, FSDP reduce_dtype
  /// bfloat16). nullopt: the engine profile's (gradient_reduce_bytes). Plan
  /// file: communication.grad_reduce_dtype, written only when stated.
  std::optional<Precision> grad_reduce_dtype;
  /// The dtypes the optimizer keeps its states in: its copy of the parameters
  /// (the "master" weights of mixed precision) and Adam's two moments. fp32
  /// both (the default, ZeRO's K = 12 bytes a parameter) unless the plan says
  /// otherwise: Megatron-Core's precision-aware optimizer
  /// (--use-precision-aware-optimizer with --main-params-dtype fp32|fp16 and
  /// --exp-avg-dtype / --exp-avg-sq-dtype fp32|fp16|bf16; DeepSeek-V3, Liu et
  /// al. 2024 §3.3.3: bf16 moments beside fp32 masters) or NeMo's
  /// distributed_fused_adam optim.dtype (Apex DistributedFusedAdam's state
  /// dtype: its parameter shard and both moments, 3 × 2 bytes with bf16).
  /// An fp32 plan has no separate master (its parameters are fp32 already).
  /// Plan file: optimizer.master_dtype and optimizer.moments_dtype, written
  /// only when one is not fp32.
  Precision master_dtype = Precision::fp32;
  Precision moments_dtype = Precision::fp32;
  /// The fp32 master kept as the 16 bits its bf16 parameter lacks (Transformer
  /// Engine FusedAdam and Apex store_param_remainders; Megatron-Core's default
  /// under --use-precision-aware-optimizer, --no-store-param-remainders turns
  /// it off): the same fp32 arithmetic, 2 bytes a parameter instead of 4.
  /// Needs bf16 training and an fp32 master_dtype. Plan file:
  /// optimizer.param_remainders, written only when true.
  bool param_remainders = false;
  // DeepSpeed's bucket knobs, in elements (its defaults).
  double reduce_bucket_elems = 5e8;
  double allgather_bucket_elems = 5e8;
  double prefetch_bucket_elems = 5e7;        // stage3_prefetch_bucket_size
  double max_live_params = 1e9;              // stage3_max_live_parameters
  /// stage3_max_reuse_distance: a gathered parameter used again within this
  /// many parameters' worth of modules is kept, not released and gathered
  /// again (with recomputation, zero3_backward_regather_share). Plan file:
  /// communication.max_reuse_distance, written only when not DeepSpeed's 1e9.
  double max_reuse_distance = 1e9;
  double param_persistence_threshold = 1e5;  // stage3_param_persistence_threshold
  bool onebit_adam = false;
  int onebit_freeze_step = 0;    // warm-up steps of plain Adam before compression
  SparseLayout sparse_attention = SparseLayout::none;
  int sparse_block = 64;
  AttentionKernel attention = AttentionKernel::standard;  // dense attention core (not with sparse_attention)
  /// Megatron's fused bias kernels: bias-GeLU (bias-SwiGLU) and bias-dropout-
  /// add, each one pass over its tensor. false: Megatron-LM's
  /// --no-bias-gelu-fusion (--no-bias-swiglu-fusion) and
  /// --no-bias-dropout-fusion: the bias add, the activation, the dropout and
  /// the residual add run as kernels of their own, as the 2019 Megatron-LM and
  /// the DeepSpeedExamples forks of it always ran them. Plan file: bias_fusion,
  /// written only when false.
  bool bias_fusion = true;
  bool zeropp = false;           // ZeRO++: int8 weight gathers, hpZ, int4 gradients
  /// FP8 linear GEMMs and how their scales are set (Fp8Recipe); none: the
  /// plan's precision throughout. Plan file: fp8, written only when not none.
  Fp8Recipe fp8 = Fp8Recipe::none;
  /// The linear layers' compute weights kept in FP8 and gathered in FP8
  /// (Megatron-LM --fp8-param-gather: Transformer Engine's fp8_model_init,
  /// the distributed optimizer's fp32 main weights cast straight to FP8): no
  /// 16-bit copy of those weights and no separate FP8 cache (their FP8 data
  /// and cached transpose, 1 + 1 bytes, instead of 2 + 2), and the
  /// optimizer's parameter all-gather moves them in 1 byte. Needs fp8. Plan
  /// file: fp8_param_gather, written only when true.
  bool fp8_param_gather = false;
  /// Transformer layers on each pipeline stage, first to last: pp entries, each
  /// >= 1, summing to the model's layers. Empty = the balanced partition
  /// (`stage_layer_count`), which is what every plan had before uneven stages.
  std::vector<int> stage_layers;
  /// Transformer layers of each model chunk under the interleaved schedule, in
  /// the order the pipeline runs them (virtual stage c·pp + r is chunk c of
  /// stage r): pp × virtual_stages entries whose sums per stage are
  /// stage_layers, stated with it. Empty = every stage cut into equal chunks.
  /// Megatron-Core's --account-for-embedding/loss-in-pipeline-split with a
  /// virtual pipeline counts the embedding as a layer of the first chunk and
  /// the loss as one of the last, which so hold one transformer layer fewer,
  /// down to none (megatron/core/transformer/transformer_layer.py
  /// get_transformer_layer_offset; Llama 3.1 405B on pp16 × v8: chunks of one
  /// layer, the two ends empty). check_plan_shape holds it to that family: a
  /// stage's chunks differ by at most one layer, and only the first and the
  /// last chunk may be empty. Plan file: chunk_layers, written only when stated.
  std::vector<int> chunk_layers;

  /// dp × tp × cp × ulysses × pp in 64 bits, saturating at kPlanDevicesSaturated: never
  /// overflows, whatever the degrees (a plan file's are each up to 2^20).
  [[nodiscard]] std::int64_t devices() const;
  /// micro_batch × grad_accum × dp (what global_batch must equal), saturating likewise.
  [[nodiscard]] std::int64_t sequences_per_step() const;
  /// The same as an int, for plans whose devices() fit one: every plan that
  /// passed check_plan() or plan_from_json() (both refuse more than INT_MAX).
  [[nodiscard]] int gpus() const { return dp * tp * cp * ulysses * pp; }
  /// The pipeline stage of world rank `rank`: ranks are ordered tp, then cp
  /// (or ulysses), then dp, then pp (executor/process_groups.hpp world_rank_of,
  /// which a test holds to this), so each stage is tp × dp_cp() consecutive ranks.
  [[nodiscard]] int stage_of_rank(int rank) const { return rank / (tp * dp_cp()); }
  /// Ranks that hold the same weights: the data-parallel group of the
  /// gradient reduction and of ZeRO's partitions (dp × cp × ulysses; dp
  /// without sequence splitting).
  [[nodiscard]] int dp_cp() const { return dp * cp * ulysses; }
  /// Model chunks each pipeline stage's layers are cut into: virtual_stages
  /// under the interleaved schedule, else 1 (its whole stage).
  [[nodiscard]] int model_chunks() const { return schedule == Schedule::interleaved ? virtual_stages : 1; }
  /// Some optimizer state is kept in 16 bits (master_dtype, moments_dtype or
  /// param_remainders).
  [[nodiscard]] bool low_precision_optimizer() const {
    return master_dtype != Precision::fp32 || moments_dtype != Precision::fp32 || param_remainders;
  }
  /// Ranks one sequence is split over, for every non-attention layer: cp × ulysses.
  [[nodiscard]] int seq_split() const { return cp * ulysses; }
  /// Ranks over which ZeRO partitions the states: dp_shard with hybrid
  /// sharding, else the whole dp_cp() group.
  [[nodiscard]] int shard_group() const { return dp_shard > 0 ? dp_shard : dp_cp(); }
  /// Copies of each partition across the data-parallel group (1 without hybrid sharding).
  [[nodiscard]] int shard_replicas() const { return dp_cp() / shard_group(); }
  /// True when ZeRO-3 is sharded in groups smaller than dp_cp().
  [[nodiscard]] bool hybrid_sharded() const { return dp_shard > 0 && dp_shard < dp_cp(); }
  /// ZeRO-3 under a pipeline (pp > 1) as PyTorch runs FSDP2 there: a stage's
  /// parameters are gathered once per step, at their first forward, and kept
  /// until the step's last backward; its gradients accumulate unsharded, in
  /// the reduction dtype, and are reduce-scattered once. torchtitan's
  /// apply_fsdp sets reshard_after_forward = not pp_enabled ("to avoid
  /// per-microbatch all-gathers"), and torch.distributed.pipelining's stage
  /// turns requires_gradient_sync and reshard_after_backward on only for its
  /// last backward. (DeepSpeed's pipeline engine refuses ZeRO 2 and 3.)
  [[nodiscard]] bool zero3_held_through_step() const { return zero_stage == 3 && pp > 1; }
  /// Gradients are reduced to their partitions after every micro-batch's
  /// backward (ZeRO 2, and ZeRO 3 outside a pipeline); else once per step.
  [[nodiscard]] bool reduces_every_microbatch() const { return zero_stage >= 2 && !zero3_held_through_step(); }
  /// "dp4×tp8×pp2 z1 mb2×8 sel 1f1b" style one-line description.
  [[nodiscard]] std::string summary() const;
};

/// What Plan::devices() returns for a product beyond 2^62.
inline constexpr std::int64_t kPlanDevicesSaturated = std::int64_t{1} << 62;

/// Layers on pipeline stage `stage` (0-based) of plan `p` for a model of
/// `layers` layers. With p.stage_layers empty, the balanced partition of
/// DeepSpeed's PipelineModule partition_method "uniform"
/// (deepspeed/runtime/utils.py partition_uniform): every stage gets
/// ⌊layers/pp⌋ and the first layers mod pp stages one more; e.g. 70 layers on
/// 12 stages: 10 × 6 then 2 × 5. No allocation (the tuner's hot path).
int stage_layer_count(const Plan& p, int layers, int stage);
/// The same from a stated partition (`stated`, one entry per stage, or empty
/// for the balanced one) and pp: THE partition rule, for callers without a
/// Plan (the executor's group shape).
int partition_layer_count(const std::vector<int>& stated, int layers, int pp, int stage);
/// The first layer of each virtual stage in the order the pipeline runs them,
/// then `layers`: pp·chunks + 1 entries. Virtual stage c·pp + r is model chunk
/// c of stage r; each stage's layers are cut into `chunks` equal chunks
/// (check_plan_shape), so every round of pp virtual stages covers
/// layers/chunks layers, stage r contributing its layers/chunks: Narayanan et
/// al. 2021 §2.2's chunks of layers/(pp·v) with equal stages, Megatron-Core's
/// uneven first and last stages with a virtual pipeline
/// (--decoder-first/last-pipeline-num-layers with
/// --num-virtual-stages-per-pipeline-rank) otherwise. chunks = 1: the stages.
/// `stated_chunks` (Plan::chunk_layers), when not empty, gives every chunk's
/// layers itself.
std::vector<int> virtual_stage_bounds(const std::vector<int>& stated, int layers, int pp, int chunks,
                                      const std::vector<int>& stated_chunks = {});
/// The most layers any stage holds (⌈layers/pp⌉ when balanced).
int max_stage_layers(const Plan& p, int layers);
/// The most layers a stage other than the first and the last holds (0 with
/// fewer than three stages).
int max_middle_stage_layers(const Plan& p, int layers);
/// True when every stage holds layers/pp layers.
bool even_stages(const Plan& p, int layers);
/// Megatron-LM's way of stating uneven stages (--decoder-first-pipeline-num-layers,
/// --decoder-last-pipeline-num-layers): `first` and/or `last` (0 = not given)
/// layers on the end stages, the rest spread over the other stages balanced.
/// Throws InputError naming `flag_first`/`flag_last` when they cannot be met
/// (more layers than the model, or fewer than one per remaining stage).
std::vector<int> stage_layers_from_ends(int layers, int pp, int first, int last);
/// Megatron-LM's --account-for-embedding-in-pipeline-split and
/// --account-for-loss-in-pipeline-split: the embedding (on the first stage)
/// and the loss (on the last) each count as one layer, and the layers so
/// counted split equally, so those stages hold one transformer layer fewer.
/// Throws InputError when layers + (embedding) + (loss) is not a multiple of pp.
std::vector<int> stage_layers_accounting(int layers, int pp, bool embedding, bool loss);
/// The same with a virtual pipeline of `chunks` model chunks per stage, as
/// Megatron-Core lays it out: layers + (embedding) + (loss) split into pp ×
/// chunks equal chunks, the first chunk (embedding) and the last (loss) one
/// transformer layer short. Plan::chunk_layers' order. Throws InputError when
/// that sum is not a multiple of pp × chunks.
std::vector<int> chunk_layers_accounting(int layers, int pp, int chunks, bool embedding, bool loss);
/// Each stage's layers from a chunk partition (chunk_layers' order): pp sums.
std::vector<int> stage_sums_of_chunks(const std::vector<int>& chunk_layers, int pp);
/// The balanced partition Megatron-LM can state when pp does not divide the
/// layers: equal middle stages, the first and the last stage taking the rest
/// (--decoder-first/last-pipeline-num-layers; the first the larger of the two,
/// the last also holding the head), with the smallest largest stage. Empty
/// when pp divides the layers (equal stages need no partition), pp < 2 or no
/// such partition exists (pp > layers).
std::vector<int> megatron_stage_layers(int layers, int pp);

/// Parses a plan object (the "plan" document). Syntax and ranges only;
/// consistency with a model and cluster is `check_plan`.
Plan plan_from_json(const nlohmann::json& doc, const std::string& file);
nlohmann::json plan_to_json(const Plan& p);

/// A plan file: the plan plus, optionally, the model and cluster it was made for.
/// The engines a plan can be searched for (tuner's Engine, by name): whose
/// rules it passes and how its model states are counted.
inline constexpr const char* kPlanEngineNames[] = {"ztune", "deepspeed", "megatron", "fsdp"};

struct PlanFile {
  Plan plan;
  std::optional<Transformer> model;
  std::optional<Cluster> cluster;
  // The engine it was searched for ("engine", one of kPlanEngineNames; search
  // --out and the planner write it): predict prices the plan as that engine
  // runs it unless --engine says otherwise. Files without it: none stated.
  std::optional<std::string> engine;
  // Searched with the engine under a graph compiler (search --compile:
  // torch.compile / XLA fusion of its elementwise chains): predict prices it
  // so. "compile": true, absent otherwise.
  bool compile = false;
};
PlanFile plan_file_from_json(const nlohmann::json& doc, const std::string& file);
PlanFile load_plan_file(const std::string& path);
nlohmann::json plan_file_to_json(const PlanFile& pf);

/// The recomputation as tables print it: "none", "full", "selective", or
/// "selective:alternate_mm" for a policy other than the attention core.
[[nodiscard]] std::string recompute_text(const Plan& p);

/// The share of the layers the backward pass recomputes whole: 1 with full
/// recomputation, 1/k with torchtitan's every-k-th-layer policy (k =
/// recompute_every), else 0.
[[nodiscard]] inline double whole_layer_recompute_share(const Plan& p) {
  if (p.recompute == Recompute::full) return 1.0;
  return p.recompute == Recompute::selective && p.recompute_policy == SelectivePolicy::alternate_layers
             ? 1.0 / p.recompute_every
             : 0.0;
}
/// Of a pipeline stage's `stage_layers` layers, those whose recomputation the
/// plan runs as its recompute mode says: Megatron's block method
/// (recompute_num_layers N) the first min(N, chunk) of each of the stage's
/// model chunks, the rest kept whole; every layer otherwise (the mode then
/// says how much of each: all of it, nothing, or a selective share).
[[nodiscard]] int recomputed_layers(const Plan& p, int stage_layers);
/// The same summed over every stage of a model of `layers` layers.
[[nodiscard]] int recomputed_layers_total(const Plan& p, int layers);
/// recomputed_layers over stage_layers (1 outside the block method; 0 for a
/// stage without layers).
[[nodiscard]] double recomputed_layer_fraction(const Plan& p, int stage_layers);

/// The share of the layers whose attention core the backward pass runs
/// forward again: the whole-layer share, and every layer under the selective
/// policies that do not save the core's output (attention, mlp_in, dots).
[[nodiscard]] inline double attention_recompute_share(const Plan& p) {
  if (p.recompute != Recompute::selective) return whole_layer_recompute_share(p);
  switch (p.recompute_policy) {
    case SelectivePolicy::attention:
    case SelectivePolicy::mlp_in:
    case SelectivePolicy::dots: return 1.0;
    case SelectivePolicy::alternate_mm: return 0.0;
    case SelectivePolicy::alternate_layers: return whole_layer_recompute_share(p);
  }
  return 1.0;
}

/// The first rule the plan breaks for this model and cluster, as a message naming
/// the plan field ("$.tp: 12 does not divide heads 32"), or nullopt when valid.
/// Hot path for the tuner: no allocation unless a rule is broken.
std::optional<std::string> check_plan(const Plan& p, const Transformer& m, const Cluster& c);
/// The rules of check_plan that need only the model (layout, batch, schedule,
/// ZeRO/offload combinations): what a plan file without a cluster can be held to.
std::optional<std::string> check_plan_shape(const Plan& p, const Transformer& m);
/// Why the cluster's devices cannot run FP8 linear layers (no FP8 tensor
/// cores: a CPU cluster, a GPU before Ada and Hopper), or nullopt. Said before
/// any engine's library: the device is the cause to name.
std::optional<std::string> fp8_device_refusal(const Cluster& c);
/// The first rule of check_plan_shape: tensor parallelism splits whole heads,
/// KV heads and FFN columns ("$.tp: …"), or nullopt. Callers that derive other
/// degrees from tp (the CLI's default dp) check it first.
std::optional<std::string> check_tensor_split(const Transformer& m, int tp);
/// A check_plan message ("$.tp: …") re-rooted for a plan file, where the plan
/// is the "plan" member ("$.plan.tp: …").
std::string in_plan_file(std::string_view why);

}  // namespace ztune
