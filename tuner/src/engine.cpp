#include "ztune/tuner/engine.hpp"

#include <array>
#include <iterator>

#include "ztune/vocab/executor_support.hpp"

namespace ztune {

// The names are the plan file's (vocab kPlanEngineNames), in Engine's order.
static_assert(std::size(kPlanEngineNames) == static_cast<std::size_t>(Engine::fsdp) + 1);

std::string to_string(Engine e) {
  const auto i = static_cast<std::size_t>(e);
  return i < std::size(kPlanEngineNames) ? kPlanEngineNames[i] : "?";
}

std::optional<Engine> engine_from_string(std::string_view s) {
  for (std::size_t i = 0; i < std::size(kPlanEngineNames); ++i)
    if (s == kPlanEngineNames[i]) return static_cast<Engine>(i);
  return std::nullopt;
}

StateAccounting accounting_named(const std::string& accounting, Engine engine) {
  return value_in<StateAccounting>(kStateAccountingNames, accounting).value_or(state_accounting_of(engine));
}

StateAccounting state_accounting_of(Engine e) { return state_accounting_of_engine(to_string(e)); }

namespace {

struct RuleText {
  std::string_view key;
  std::string_view text;
};

constexpr std::array<RuleText, static_cast<std::size_t>(EngineRule::count)> kRules{{
    {"deepspeed: pipeline needs ZeRO <= 1",
     "DeepSpeed's pipeline engine supports ZeRO stage 0 or 1 only (pp > 1 with stage 2/3)"},
    {"deepspeed: no offload with pipeline", "DeepSpeed's pipeline engine does not support ZeRO-Offload (pp > 1 with offload)"},
    {"deepspeed: pipeline is 1F1B only",
     "DeepSpeed's pipeline engine runs the 1F1B schedule only (no GPipe, no interleaved virtual stages)"},
    {"deepspeed: 1-bit Adam needs ZeRO 0", "DeepSpeed's 1-bit Adam runs without ZeRO (zero_stage 0) only"},
    {"deepspeed: ZeRO++ needs stage 3", "DeepSpeed's ZeRO++ needs ZeRO stage 3"},
    {"deepspeed: sparse layout not causal",
     "DeepSpeed's ds_config.json cannot make the bigbird or longformer sparse attention layout causal (its "
     "parser reads no \"attention\" key for bigbird and bslongformer, which then default to bidirectional); "
     "use the fixed or variable layout"},
    {"deepspeed: no context parallelism",
     "DeepSpeed has no context parallelism (ring attention over cp shards of each sequence); its sequence "
     "parallelism is DeepSpeed-Ulysses (all-to-all over heads), another plan: use cp 1, or export to megatron"},
    {"megatron: ZeRO-2/3 without a pipeline",
     "Megatron-LM's ZeRO-2/3 is Megatron-FSDP (--use-megatron-fsdp --data-parallel-sharding-strategy "
     "optim_grads[_params]), which its user guide pairs with tensor, context and expert parallelism and ztune prices "
     "without pipeline parallelism: use pp 1, ZeRO-1 (the distributed optimizer), or --engine fsdp (ZeRO-3 under a "
     "pipeline)"},
    {"megatron: no offload", "Megatron-LM does not offload optimizer states or parameters"},
    {"megatron: no GPipe", "Megatron-LM's pipeline schedules are 1F1B and interleaved 1F1B (no GPipe)"},
    {"megatron: no 1-bit Adam", "Megatron-LM has no 1-bit Adam"},
    {"megatron: no ZeRO++", "Megatron-LM has no ZeRO++"},
    {"megatron: no sparse attention", "Megatron-LM has no block-sparse attention"},
    {"megatron: context parallelism needs flash",
     "Megatron-Core's context parallelism runs in Transformer Engine's fused attention only (its unfused "
     "DotProductAttention asserts context_parallel_size 1): use attention \"cudnn\" or \"flash\" with cp > 1"},
    {"megatron: no DeepSpeed-Ulysses",
     "Megatron-LM and NeMo have no DeepSpeed-Ulysses (all-to-all over heads; it is Megatron-DeepSpeed's "
     "--ds-sequence-parallel-size); they split a sequence with context parallelism: use cp instead of ulysses, "
     "or export to deepspeed"},
    {"fsdp: no ZeRO-1",
     "PyTorch FSDP shards as NO_SHARD (ZeRO 0), SHARD_GRAD_OP (ZeRO-2) or FULL_SHARD (ZeRO-3); it has no ZeRO-1"},
    {"fsdp: offload is CPU and ZeRO-3",
     "PyTorch FSDP's CPUOffload moves parameters, gradients and optimizer states to host memory together, with "
     "FULL_SHARD (ZeRO-3 with optimizer and parameter offload to cpu); no NVMe"},
    {"fsdp: no 1-bit Adam", "PyTorch FSDP has no 1-bit Adam"},
    {"fsdp: no ZeRO++", "PyTorch FSDP has no ZeRO++"},
    {"fsdp: no sparse attention", "PyTorch FSDP has no block-sparse attention"},
    {"fsdp: context parallelism needs flash",
     "torchtitan's context parallelism (context_parallel_degree) rings SDPA's flash or memory-efficient kernels "
     "only: use attention \"flash\" with cp > 1 (not \"cudnn\")"},
    {"fsdp: no DeepSpeed-Ulysses",
     "PyTorch FSDP and torchtitan have no DeepSpeed-Ulysses (all-to-all over heads); torchtitan splits a "
     "sequence with context parallelism (context_parallel_degree): use cp instead of ulysses, or export to deepspeed"},
    {"fsdp: no partitioned checkpoints",
     "PyTorch FSDP and torchtitan do not partition activation checkpoints over the tensor-parallel ranks (no "
     "ZeRO-R Pa; torchtitan's tensor parallelism splits activations with sequence parallelism)"},
    {"ztune: no partitioned checkpoints",
     "ztune's executor keeps every activation checkpoint whole on each tensor-parallel rank (no ZeRO-R Pa yet; "
     "sequence parallelism splits them)"},
    {"megatron: no hybrid sharding",
     "Megatron-LM's distributed optimizer shards the optimizer states (ZeRO-1) over the whole data-parallel "
     "group; it has no ZeRO-3 sharded inside groups and replicated across them (plan.dp_shard): run it with "
     "PyTorch FSDP (HYBRID_SHARD, torchtitan HSDP: --engine fsdp), or omit dp_shard"},
    {"deepspeed: no cuDNN attention",
     "Megatron-DeepSpeed's fused attention is FlashAttention-2 (--use-flash-attn-v2); it has no cuDNN fused "
     "attention (Transformer Engine's FusedAttention): use attention \"flash\""},
    {"deepspeed: no TP communication overlap",
     "Megatron-DeepSpeed has no overlap of the tensor-parallel all-gathers and reduce-scatters with their GEMMs "
     "(Megatron-Core's --tp-comm-overlap, Transformer Engine's userbuffers): use tp_comm_overlap false, or export "
     "to megatron"},
    {"fsdp: TP communication overlap not modelled",
     "ztune does not model torchtitan's asynchronous tensor parallelism (enable_async_tensor_parallel under "
     "torch.compile), the one TP communication overlap torchtitan has: use tp_comm_overlap false"},
    {"ztune: no TP communication overlap",
     "ztune's executor runs its tensor-parallel collectives between its GEMMs (no userbuffer overlap): use "
     "tp_comm_overlap false"},
    {"fsdp: no eager attention",
     "torchtitan runs attention through PyTorch's scaled_dot_product_attention (its flash, memory-efficient or "
     "cuDNN kernels), not as separate mask, softmax and dropout kernels: use attention \"flash\" or \"cudnn\""},
    {"ztune: no eager attention",
     "ztune's executor runs its own attention kernels (a fused softmax, or flash), not PyTorch's separate mask, "
     "softmax and dropout kernels: use attention \"standard\""},
    {"megatron: no CPU checkpointing",
     "Megatron-LM keeps the activation checkpoints of full recomputation on the GPU (CPU checkpointing is "
     "DeepSpeed's activation_checkpointing.cpu_checkpointing, Megatron-DeepSpeed's --checkpoint-in-cpu; "
     "Megatron-Core's --cpu-offloading moves whole layers asynchronously, which ztune does not model): export "
     "to deepspeed, or drop cpu_checkpointing"},
    {"fsdp: no CPU checkpointing",
     "torchtitan and PyTorch FSDP keep the activation checkpoints on the GPU (no option offloads them): drop "
     "cpu_checkpointing"},
    {"ztune: no CPU checkpointing",
     "ztune's executor keeps its activation checkpoints in device memory; CPU checkpointing is DeepSpeed's "
     "(activation_checkpointing.cpu_checkpointing): use --engine deepspeed, or drop cpu_checkpointing"},
    {"megatron: gradients reduce-scattered",
     "Megatron-LM's distributed optimizer (ZeRO-1) reduce-scatters its gradients; all-reducing them is DeepSpeed's "
     "zero_optimization.reduce_scatter false: expected reduce_scatter true"},
    {"fsdp: gradients reduce-scattered",
     "PyTorch FSDP reduce-scatters its sharded gradients; all-reducing them is DeepSpeed's "
     "zero_optimization.reduce_scatter false: expected reduce_scatter true"},
    {"ztune: gradients reduce-scattered",
     "ztune's executor reduce-scatters its ZeRO-1/2 gradients; all-reducing them is DeepSpeed's "
     "zero_optimization.reduce_scatter false: use --engine deepspeed, or expected reduce_scatter true"},
    {"megatron: selective recomputes the attention core",
     "Megatron-LM's --recompute-granularity selective recomputes the core attention (Korthikanti et al. 2022); "
     "torchtitan's op-level policy (alternate_mm), MaxText's save_dot_except_mlpwi (mlp_in) and JAX's "
     "dots_saveable (dots) are not its own: expected recompute_policy \"attention\""},
    {"deepspeed: selective recomputes the attention core",
     "Megatron-DeepSpeed's selective recomputation is Megatron's core attention; torchtitan's op-level policy "
     "(alternate_mm), MaxText's save_dot_except_mlpwi (mlp_in) and JAX's dots_saveable (dots) are not its own: "
     "expected recompute_policy \"attention\""},
    {"ztune: selective recomputes the attention core",
     "ztune's executor recomputes the attention core only (Korthikanti et al. 2022): expected recompute_policy "
     "\"attention\", or --engine fsdp for torchtitan's, MaxText's and PaxML's policies"},
    {"fsdp: no bias-fusion switch",
     "torchtitan and PyTorch FSDP run their modules' own elementwise kernels (the fsdp profile's elementwise "
     "traffic prices them); bias_fusion false is Megatron-LM's --no-bias-gelu-fusion and --no-bias-dropout-fusion: "
     "expected bias_fusion true"},
    {"ztune: no bias-fusion switch",
     "ztune's executor runs its own elementwise kernels; bias_fusion false is Megatron-LM's --no-bias-gelu-fusion "
     "and --no-bias-dropout-fusion: use --engine megatron or deepspeed, or expected bias_fusion true"},
    {"ztune: no master remainders",
     "ztune's executor keeps its fp32 master weights whole (16-bit masters and moments it keeps, but no remainder "
     "store beside bf16 parameters, Megatron-Core's store_param_remainders): use --engine megatron, or expected "
     "param_remainders false"},
    {"deepspeed: fp32 optimizer states",
     "DeepSpeed keeps its optimizer states in fp32 (FP16_Optimizer, BF16_Optimizer and ZeRO's fp32 partitions have "
     "no state dtype option): use --engine megatron, or expected master_dtype and moments_dtype fp32"},
    {"fsdp: fp32 optimizer states",
     "torchtitan's AdamW keeps its states in the dtype of the sharded parameters, fp32 under FSDP's "
     "MixedPrecisionPolicy (param_dtype casts only the gathered copies): use --engine megatron, or expected "
     "master_dtype and moments_dtype fp32"},
    {"deepspeed: every layer recomputed",
     "Megatron-DeepSpeed's DeepSpeed activation checkpointing runs Megatron's legacy --checkpoint-activations "
     "(every layer; its pipeline engine's activation_checkpoint_interval likewise), not Megatron's block method "
     "(recompute_num_layers): use --engine megatron, or drop recompute_num_layers"},
    {"fsdp: no block recomputation",
     "torchtitan and PyTorch FSDP checkpoint every block (full), every k-th block (torchtitan's layer SAC, "
     "recompute_policy alternate_layers) or ops; Megatron's block method (the first recompute_num_layers of each "
     "model chunk) is not theirs: use --engine megatron, or drop recompute_num_layers"},
    {"fsdp: DDP is data parallelism alone",
     "torchtitan runs ZeRO stage 0 as DDP (data_parallel_replicate_degree without sharding), which it applies "
     "only when data parallelism is the whole mesh (parallelize.py: \"DDP has not supported > 1D parallelism\"): "
     "with dp > 1 beside tp, pp or cp > 1 use ZeRO stage 3 (FSDP; under a pipeline gathered once per step), "
     "ZeRO stage 2 without a pipeline, or dp 1"},
    {"deepspeed: no FP8",
     "Megatron-DeepSpeed has no FP8 training (its arguments.py has no --fp8 flag; later versions carry Transformer "
     "Engine's --fp8-e4m3 and --fp8-hybrid commented out): use fp8 \"none\", or export to megatron (Transformer "
     "Engine) or fsdp (torchtitan's float8)"},
    {"fsdp: FP8 scales are tensorwise",
     "torchtitan's float8 converter (torchao's Float8Linear, recipe_name tensorwise) scales each tensor from its own "
     "amax; it has no delayed scaling: use fp8 \"tensorwise\""},
    {"ztune: no FP8",
     "ztune's executor has no FP8 kernels (its GEMMs run on the stored 16-bit or fp32 values): use fp8 \"none\", or "
     "--engine megatron or fsdp"},
    {"megatron: FP8 with Megatron-FSDP not modelled",
     "ztune does not model FP8 under Megatron-FSDP (ZeRO-2/3 on the megatron engine: its FP8 parameters are "
     "sharded and gathered per use, where Transformer Engine's cache would keep every layer's unsharded FP8 copy): "
     "use ZeRO-1 (the distributed optimizer, with fp8_param_gather if wanted), fp8 \"none\", or --engine fsdp "
     "(torchtitan's float8 with FSDP2)"},
    {"megatron: FP8 parameters need the distributed optimizer",
     "Megatron-LM's --fp8-param-gather keeps the weights in FP8 beside the distributed optimizer's fp32 main "
     "weights, which it casts from: needs ZeRO stage 1 (--use-distributed-optimizer)"},
    {"fsdp: FP8 all-gathers not modelled",
     "ztune does not model torchtitan's enable_fsdp_float8_all_gather (FSDP2 gathering float8 weights): drop "
     "fp8_param_gather (torchtitan's float8 then gathers bf16 weights and casts them at each use)"},
    // An export audit against the engines' source (DeepSpeed 0.18.9 and 0.19.8,
    // Megatron-DeepSpeed): plans the deepspeed export wrote that cannot start.
    {"deepspeed: no MiCS",
     "DeepSpeed's MiCS (ZeRO-3 sharded in groups, plan.dp_shard) shards only parameters built under "
     "deepspeed.zero.MiCS_Init (runtime/zero/mics.py asserts it), and Megatron-DeepSpeed's pretrain_gpt.py builds "
     "them under deepspeed.zero.Init; DeepSpeed 0.19 removed MiCS: use --engine fsdp (HSDP), or ZeRO-3 over the "
     "whole data-parallel group (omit dp_shard)"},
    {"deepspeed: ZeRO++ with tensor or pipeline parallelism",
     "ZeRO++'s secondary partition (hpZ) and quantized gradient reduction (qgZ) form their groups from consecutive "
     "world ranks (utils/groups.py _create_zero_param_parallel_group, runtime/comm/coalesced_collectives.py "
     "all_to_all_quant_reduce), and Megatron-DeepSpeed passes no zero_param_parallel_group: beside tensor or "
     "pipeline parallelism they mix ranks holding different shards; use tp 1 and pp 1 with ZeRO++, or zeropp false"},
    // ztune's executor on GPUs: what its runner refuses (vocab executor_support.cpp unsupported_reason).
    {"ztune: no context parallelism on GPUs",
     "ztune's executor runs context parallelism (ring attention) on its CPU backend only; its CUDA backend has no "
     "ring attention kernels yet: use --engine megatron or fsdp, or cp 1"},
    {"ztune: no Ulysses on GPUs",
     "ztune's executor runs DeepSpeed-Ulysses on its CPU backend only; its CUDA backend's communicator has no "
     "all-to-all yet: use --engine deepspeed, or ulysses 1"},
    {"ztune: no hybrid sharding on GPUs",
     "ztune's executor trains hybrid sharding on its CPU backend only; its CUDA backend's ZeRO-3 path is not tested "
     "with shard and replica groups: use --engine fsdp (HSDP), or omit dp_shard"},
    {"ztune: no offload with hybrid sharding",
     "ztune's executor keeps a hybrid-sharded plan's states on the device (offload with dp_shard is not "
     "implemented): use --engine fsdp (HSDP with CPU offload), or no offload"},
}};

}  // namespace

std::string_view engine_rule_text(EngineRule r) { return kRules[static_cast<std::size_t>(r)].text; }
std::string_view engine_rule_key(EngineRule r) { return kRules[static_cast<std::size_t>(r)].key; }

bool runs_block_recompute(const Plan& p, Engine e) {
  Plan block = p;
  block.recompute_num_layers = 1;
  return !engine_violation(block, e);
}

std::optional<EngineRule> engine_violation(const Plan& p, Engine e) {
  const bool offload = p.offload_optimizer != OffloadTarget::none || p.offload_params != OffloadTarget::none;
  switch (e) {
    case Engine::ztune:
      if (p.partition_activations) return EngineRule::zt_partition_activations;
      if (p.tp_comm_overlap) return EngineRule::zt_tp_comm_overlap;
      if (p.attention == AttentionKernel::eager) return EngineRule::zt_eager_attention;
      if (p.cpu_checkpointing) return EngineRule::zt_cpu_checkpointing;
      if (!p.reduce_scatter) return EngineRule::zt_grad_allreduce;
      if (p.recompute_policy != SelectivePolicy::attention) return EngineRule::zt_recompute_policy;
      if (!p.bias_fusion) return EngineRule::zt_bias_fusion;
      if (p.param_remainders) return EngineRule::zt_optimizer_dtype;
      if (p.fp8 != Fp8Recipe::none) return EngineRule::zt_fp8;
      if (p.dp_shard > 0 && offload) return EngineRule::zt_hybrid_offload;
      return std::nullopt;
    case Engine::deepspeed:
      if (p.pp > 1 && p.zero_stage > 1) return EngineRule::ds_pipeline_zero;
      if (p.pp > 1 && offload) return EngineRule::ds_pipeline_offload;
      if (p.pp > 1 && (p.schedule != Schedule::one_f_one_b || p.virtual_stages > 1))
        return EngineRule::ds_pipeline_schedule;
      if (p.onebit_adam && p.zero_stage != 0) return EngineRule::ds_onebit_zero;
      if (p.zeropp && p.zero_stage != 3) return EngineRule::ds_zeropp_stage;
      if (p.zeropp && (p.tp > 1 || p.pp > 1)) return EngineRule::ds_zeropp_model_parallel;
      if (p.dp_shard > 0) return EngineRule::ds_mics;
      // deepspeed/runtime/config.py (0.18.9, the last DeepSpeed with sparse
      // attention): get_sparse_bigbird_config / get_sparse_bslongformer_config
      // read no "attention" key, and their SparsityConfig classes default to
      // 'bidirectional': a causal model would attend to later tokens.
      if (p.sparse_attention == SparseLayout::bigbird || p.sparse_attention == SparseLayout::longformer)
        return EngineRule::ds_sparse_causal;
      if (p.cp > 1) return EngineRule::ds_context_parallel;
      if (p.attention == AttentionKernel::cudnn && !engine_runs_cudnn(e)) return EngineRule::ds_cudnn_attention;
      if (p.tp_comm_overlap) return EngineRule::ds_tp_comm_overlap;
      if (p.recompute_policy != SelectivePolicy::attention) return EngineRule::ds_recompute_policy;
      if (p.low_precision_optimizer()) return EngineRule::ds_optimizer_dtype;
      if (p.recompute_num_layers > 0) return EngineRule::ds_block_recompute;
      if (p.fp8 != Fp8Recipe::none) return EngineRule::ds_fp8;
      return std::nullopt;
    case Engine::megatron:
      if (p.dp_shard > 0) return EngineRule::mg_hybrid_sharding;
      if (p.zero_stage > 1 && p.pp > 1) return EngineRule::mg_zero_stage;
      if (offload) return EngineRule::mg_offload;
      if (p.pp > 1 && p.schedule == Schedule::gpipe) return EngineRule::mg_gpipe;
      if (p.onebit_adam) return EngineRule::mg_onebit;
      if (p.zeropp) return EngineRule::mg_zeropp;
      if (p.sparse_attention != SparseLayout::none) return EngineRule::mg_sparse;
      if (p.cp > 1 && !fused_attention(p.attention)) return EngineRule::mg_cp_attention;
      if (p.ulysses > 1) return EngineRule::mg_ulysses;
      if (p.cpu_checkpointing) return EngineRule::mg_cpu_checkpointing;
      if (!p.reduce_scatter) return EngineRule::mg_grad_allreduce;
      if (p.recompute_policy != SelectivePolicy::attention) return EngineRule::mg_recompute_policy;
      if (p.fp8 != Fp8Recipe::none && p.zero_stage >= 2) return EngineRule::mg_fp8_fsdp;
      if (p.fp8_param_gather && p.zero_stage != 1) return EngineRule::mg_fp8_param_gather;
      return std::nullopt;
    case Engine::fsdp:
      if (p.zero_stage == 1) return EngineRule::fs_zero1;
      if (offload && (p.zero_stage != 3 || p.offload_optimizer != OffloadTarget::cpu ||
                      p.offload_params != OffloadTarget::cpu))
        return EngineRule::fs_nvme;
      if (p.onebit_adam) return EngineRule::fs_onebit;
      if (p.zeropp) return EngineRule::fs_zeropp;
      if (p.sparse_attention != SparseLayout::none) return EngineRule::fs_sparse;
      if (p.partition_activations) return EngineRule::fs_partition_activations;
      if (p.cp > 1 && p.attention != AttentionKernel::flash) return EngineRule::fs_cp_attention;
      if (p.ulysses > 1) return EngineRule::fs_ulysses;
      if (p.tp_comm_overlap) return EngineRule::fs_tp_comm_overlap;
      if (p.attention == AttentionKernel::eager) return EngineRule::fs_eager_attention;
      if (p.cpu_checkpointing) return EngineRule::fs_cpu_checkpointing;
      if (!p.reduce_scatter) return EngineRule::fs_grad_allreduce;
      if (!p.bias_fusion) return EngineRule::fs_bias_fusion;
      if (p.low_precision_optimizer()) return EngineRule::fs_optimizer_dtype;
      if (p.recompute_num_layers > 0) return EngineRule::fs_block_recompute;
      if (p.zero_stage == 0 && p.dp > 1 && (p.tp > 1 || p.pp > 1 || p.cp > 1))
        return EngineRule::fs_ddp_one_dimensional;
      if (p.fp8 == Fp8Recipe::delayed) return EngineRule::fs_fp8_delayed;
      if (p.fp8_param_gather) return EngineRule::fs_fp8_param_gather;
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<EngineRule> engine_violation(const Plan& p, Engine e, const Cluster& c) {
  if (auto rule = engine_violation(p, e)) return rule;
  if (e != Engine::ztune || c.device_kind != DeviceKind::gpu) return std::nullopt;
  if (p.cp > 1) return EngineRule::zt_cuda_context_parallel;
  if (p.ulysses > 1) return EngineRule::zt_cuda_ulysses;
  if (p.dp_shard > 0) return EngineRule::zt_cuda_hybrid_sharding;
  return std::nullopt;
}

bool fused_kernels_take_head(const Transformer& m) {
  const int d = m.head_dim();
  return d > 0 && d <= 256 && d % 8 == 0;
}

bool engine_runs_flash(Engine e, const Transformer& m, const Cluster& c) {
  return supports_flash_attention(c) &&
         (e == Engine::ztune ? executor_runs_flash(m, executor_backend_for(c)) : fused_kernels_take_head(m));
}

bool engine_runs_context_parallel(Engine e, const Cluster& c) {
  Plan cp2;
  cp2.dp = 4;
  cp2.zero_stage = 3;
  cp2.cp = 2;
  cp2.attention = AttentionKernel::flash;
  return !engine_violation(cp2, e, c);
}

AttentionKernel preferred_fused_kernel(Engine e, const HardwareProfile& hw) {
  return engine_runs_cudnn(e) && hw.cudnn_attention_factor > hw.attention_gemm_factor ? AttentionKernel::cudnn
                                                                                     : AttentionKernel::flash;
}

std::optional<std::string> engine_profile_violation(const Plan& p, const EngineProfile& e) {
  if (auto why = fp8_library_refusal(p.fp8, e)) return "$.fp8: " + *why;
  return std::nullopt;
}

std::optional<std::string> fp8_library_refusal(Fp8Recipe r, const EngineProfile& e) {
  if (r != Fp8Recipe::none && e.fp8 == Fp8Library::none)
    return "the " + e.name + " engine profile names no FP8 library (its \"fp8\" is absent or \"none\"; the "
           "catalog's megatron profile states \"transformer_engine\", fsdp's \"torchao\"), so it cannot price FP8 "
           "linear layers; expected fp8 \"none\", or --engine megatron or fsdp (whose profiles state theirs)";
  return std::nullopt;
}

std::optional<std::string> engine_model_violation(const Transformer& m, Engine e) {
  // FSDP wraps whatever PyTorch model it is given.
  if (e == Engine::ztune || e == Engine::fsdp) return std::nullopt;
  if (m.position == PositionEmbedding::alibi)
    return "$.model.position_embedding: Megatron-LM's --position-embedding-type has no ALiBi (learned_absolute, "
           "rope, none)";
  if (m.parallel_residual)
    return "$.model.parallel_residual: Megatron-LM's GPT blocks are sequential, not GPT-J/NeoX's parallel "
           "attention and MLP";
  if (m.windowed())
    return "$.model.attention_window: ztune does not export a sliding window to Megatron-LM or Megatron-DeepSpeed "
           "(their GPT models attend the whole causal prefix); use --seq " + std::to_string(m.attention_window) +
           " or the ztune engine";
  return std::nullopt;
}

}  // namespace ztune
