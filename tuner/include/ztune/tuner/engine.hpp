#pragma once
// The training engines a plan can be exported to, and what each cannot run.
// `--engine` limits the search to one engine's space; `ztune export` refuses a
// plan the engine cannot run, with the same rule text.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ztune/model/memory_model.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

// fsdp: PyTorch FSDP/FSDP2 and torchtitan (sharded data parallelism with
// DTensor tensor parallelism and torch.distributed.pipelining).
enum class Engine : std::uint8_t { ztune, deepspeed, megatron, fsdp };

std::string to_string(Engine e);
/// "ztune" | "deepspeed" | "megatron" | "fsdp"; nullopt otherwise.
std::optional<Engine> engine_from_string(std::string_view s);

/// How the engine keeps model states (memory_model.hpp
/// state_accounting_of_engine, by the engine's name).
[[nodiscard]] StateAccounting state_accounting_of(Engine e);
/// The accounting named "paper", "deepspeed" or "megatron" (search's and
/// predict's --accounting, a stored search's options), else as `engine`
/// keeps its states ("engine", "" or another name).
[[nodiscard]] StateAccounting accounting_named(const std::string& accounting, Engine engine);

/// One rule an engine imposes on top of check_plan(). Fixed enum so the search
/// counts rejections without allocating.
enum class EngineRule : std::uint8_t {
  // DeepSpeed (docs: pipeline engine, ZeRO, 1-bit Adam; DESIGN.md "DeepSpeed's own rules")
  ds_pipeline_zero,        // pipeline engine supports ZeRO stage 0 or 1 only
  ds_pipeline_offload,     // pipeline engine does not support offload
  ds_pipeline_schedule,    // pipeline engine runs 1F1B only (no GPipe, no interleaving)
  ds_onebit_zero,          // 1-bit Adam needs ZeRO off
  ds_zeropp_stage,         // ZeRO++ needs stage 3
  ds_sparse_causal,        // ds_config cannot make bigbird / longformer causal
  ds_context_parallel,     // no context parallelism (ring attention over a split sequence)
  // Megatron-LM
  mg_zero_stage,           // ZeRO-2/3 is Megatron-FSDP: priced without a pipeline only
  mg_offload,              // no optimizer or parameter offload
  mg_gpipe,                // schedules: no pipelining, 1F1B, interleaved 1F1B (no GPipe)
  mg_onebit,               // no 1-bit Adam
  mg_zeropp,               // no ZeRO++
  mg_sparse,               // no block-sparse attention
  mg_cp_attention,         // context parallelism runs in Transformer Engine's fused attention only
  mg_ulysses,              // no DeepSpeed-Ulysses (Megatron-LM/NeMo split sequences with cp)
  // PyTorch FSDP / torchtitan
  fs_zero1,                // sharding strategies: NO_SHARD (0), SHARD_GRAD_OP (2), FULL_SHARD (3); no ZeRO-1
  fs_nvme,                 // CPUOffload only: no NVMe, and it moves parameters with the optimizer (ZeRO-3)
  fs_onebit,               // no 1-bit Adam
  fs_zeropp,               // no ZeRO++
  fs_sparse,               // no block-sparse attention
  fs_cp_attention,         // torchtitan's context parallelism runs in SDPA's flash/efficient kernels only
  fs_ulysses,              // no DeepSpeed-Ulysses (torchtitan splits sequences with context_parallel_degree)
  fs_partition_activations,  // no ZeRO-R Pa (torchtitan's TP splits activations with sequence parallelism)
  // ztune's own executor
  zt_partition_activations,  // no ZeRO-R Pa yet
  mg_hybrid_sharding,      // no ZeRO-3 sharded in groups (plan.dp_shard): its optimizer shards over all of dp
  ds_cudnn_attention,      // Megatron-DeepSpeed runs FlashAttention-2, not cuDNN's fused attention
  ds_tp_comm_overlap,      // no userbuffer overlap of TP communication with GEMMs
  fs_tp_comm_overlap,      // torchtitan's async TP is not modelled
  zt_tp_comm_overlap,      // ztune's executor runs its TP collectives between its GEMMs
  fs_eager_attention,      // torchtitan's attention is SDPA's: no eager softmax chain
  zt_eager_attention,      // ztune's executor runs its own attention kernels
  mg_cpu_checkpointing,    // no ZeRO-R CPU checkpointing (checkpoints stay on the GPU)
  fs_cpu_checkpointing,    // torchtitan keeps its checkpoints on the GPU
  zt_cpu_checkpointing,    // ztune's executor keeps its checkpoints in device memory
  mg_grad_allreduce,       // the distributed optimizer reduce-scatters its gradients
  fs_grad_allreduce,       // FSDP reduce-scatters its gradients
  zt_grad_allreduce,       // ztune's executor reduce-scatters its ZeRO-1/2 gradients
  mg_recompute_policy,     // selective recomputation is the attention core (--recompute-granularity selective)
  ds_recompute_policy,     // Megatron-DeepSpeed's selective recomputation is Megatron's attention core
  zt_recompute_policy,     // ztune's executor recomputes the attention core only
  fs_bias_fusion,          // torchtitan's modules have no fused bias kernels to switch off
  zt_bias_fusion,          // ztune's executor runs its own elementwise kernels
  zt_optimizer_dtype,      // ztune's executor keeps whole fp32 masters (no remainders)
  ds_optimizer_dtype,      // DeepSpeed keeps fp32 optimizer states (no state dtype option)
  fs_optimizer_dtype,      // torchtitan's AdamW keeps its states in the fp32 parameters' dtype
  ds_block_recompute,      // DeepSpeed's activation checkpointing recomputes every layer (no block method)
  fs_block_recompute,      // torchtitan's and FSDP's layer checkpointing has no first-N-of-each-chunk method
  fs_ddp_one_dimensional,  // torchtitan's DDP (ZeRO 0, dp > 1) is data parallelism alone: no TP, PP or CP beside it
  ds_fp8,                  // Megatron-DeepSpeed has no FP8 training flag
  fs_fp8_delayed,          // torchao's float8 scales from each tensor's own amax (no delayed scaling)
  zt_fp8,                  // ztune's executor has no FP8 kernels
  mg_fp8_fsdp,             // FP8 under Megatron-FSDP is not modelled
  mg_fp8_param_gather,     // --fp8-param-gather needs the distributed optimizer (ZeRO-1)
  fs_fp8_param_gather,     // torchtitan's float8 all-gather is not modelled
  ds_mics,                 // MiCS needs MiCS_Init, which Megatron-DeepSpeed does not build under
  ds_zeropp_model_parallel,  // ZeRO++'s hpZ/qgZ groups are consecutive world ranks: no tp or pp beside them
  // ztune's executor on GPUs (its CUDA backend; executor_support.cpp unsupported_reason, the runner's check)
  zt_cuda_context_parallel,  // no ring attention kernels: cp runs on the CPU backend only
  zt_cuda_ulysses,           // no all-to-all in the NCCL communicator: Ulysses runs on the CPU backend only
  zt_cuda_hybrid_sharding,   // ZeRO-3 in shard and replica groups is trained on the CPU backend only
  zt_hybrid_offload,         // the executor's hybrid sharding keeps the states on the device
  count
};

/// Human text of a rule, e.g. "DeepSpeed's pipeline engine supports ZeRO stage 0 or 1 only".
std::string_view engine_rule_text(EngineRule r);
/// Short key for counts ("deepspeed: pipeline needs ZeRO <= 1").
std::string_view engine_rule_key(EngineRule r);

/// The first rule of `e` that `p` breaks, or nullopt. ztune runs everything
/// check_plan() accepts except partitioned checkpoints. Allocation-free (the search calls it per plan).
std::optional<EngineRule> engine_violation(const Plan& p, Engine e);
/// The same on cluster `c`: ztune's executor runs some modes on its CPU
/// backend only (context parallelism, Ulysses, hybrid sharding), so on GPUs
/// the ztune engine refuses them, as `ztune run` would (issue 19's audit: the
/// default engine ranked plans its CUDA backend refuses). Allocation-free.
std::optional<EngineRule> engine_violation(const Plan& p, Engine e, const Cluster& c);
/// Whether `e` would run `p` with Megatron's block method (its rules asked of
/// `p` with one layer of each model chunk recomputed): the search and the fit
/// hints offer the block method only there.
bool runs_block_recompute(const Plan& p, Engine e);

/// Why engine `e` cannot train model `m` at all ("$.model.field: ..."), or nullopt:
/// Megatron's pretrain_gpt.py (both exported launches use it) has no ALiBi and no
/// parallel attention + MLP blocks.
std::optional<std::string> engine_model_violation(const Transformer& m, Engine e);

/// Why the engine profile `e` cannot price plan `p` ("$.fp8: ..."), or
/// nullopt: an FP8 plan needs a profile that names the library its engine
/// runs FP8 with (EngineProfile::fp8). The catalog's megatron and fsdp
/// profiles name theirs; an edited or older profile may not.
[[nodiscard]] std::optional<std::string> engine_profile_violation(const Plan& p, const EngineProfile& e);
/// The same reason for FP8 recipe `r` without the plan file's "$.fp8: "
/// (the command line and the planner prefix their flag, --fp8).
[[nodiscard]] std::optional<std::string> fp8_library_refusal(Fp8Recipe r, const EngineProfile& e);

/// Whether engine `e` has a flash attention kernel for `m` on `c`'s devices:
/// FlashAttention-2 needs Ampere or newer (supports_flash_attention), and
/// ztune's own executor a kernel for the model's heads (executor_runs_flash);
/// the other engines' libraries a head size the fused kernels take
/// (fused_kernels_take_head).
[[nodiscard]] bool engine_runs_flash(Engine e, const Transformer& m, const Cluster& c);
/// Whether engine `e` runs context parallelism on `c`'s devices (not
/// DeepSpeed; ztune's executor on its CPU backend only): engine_violation of a
/// cp plan in flash attention, the kernel every engine's cp runs in.
[[nodiscard]] bool engine_runs_context_parallel(Engine e, const Cluster& c);
/// FlashAttention-2 and cuDNN's fused attention take head sizes that are
/// multiples of 8 up to 256 (flash_attn's "FlashAttention forward only supports
/// head dimension at most 256"; PyTorch's SDPA then falls back to its math
/// kernel, which stores the s×s scores).
[[nodiscard]] bool fused_kernels_take_head(const Transformer& m);

/// Whether engine `e` runs cuDNN's fused attention (AttentionKernel::cudnn):
/// Megatron-Core (Transformer Engine), FSDP (SDPA's cuDNN backend) and ztune's
/// executor do; Megatron-DeepSpeed has FlashAttention-2 only.
[[nodiscard]] constexpr bool engine_runs_cudnn(Engine e) { return e != Engine::deepspeed; }

/// The fused attention kernel a search offers beside standard for engine `e`
/// priced by `hw`: cuDNN's where the engine runs it (every engine but
/// deepspeed) and the profile prices it faster than FlashAttention-2 (H100's
/// fit), else FlashAttention-2. One of the two, never both: where they cost the
/// same (A100), two copies of every plan would fill the table.
[[nodiscard]] AttentionKernel preferred_fused_kernel(Engine e, const HardwareProfile& hw);

}  // namespace ztune
