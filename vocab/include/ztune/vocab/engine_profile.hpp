#pragma once
// What a training framework does with the hardware (DESIGN.md "Two profiles"):
// its host dispatch per operation and its fixed per-micro-batch and per-step
// costs, which of its elementwise kernels are fused, how its gradient
// reduction, ZeRO-3/FSDP gathers, offload copies and tensor-parallel
// collectives overlap compute, and at what granularity it gathers sharded
// parameters. ONE profile per engine family lives in data/engines/<name>.json
// (schema "ztune.engine/1"): megatron (Megatron-LM, Megatron-Core, NeMo),
// deepspeed (DeepSpeed, Megatron-DeepSpeed), fsdp (PyTorch FSDP/FSDP2,
// torchtitan, and sharded data parallelism in general) and ztune (ztune's own
// executor). The hardware profile (hardware_profile.hpp) holds only the
// hardware; a prediction uses both, the engine attached to the hardware
// profile by with_engine().
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "ztune/vocab/name_table.hpp"

namespace ztune {

/// How ZeRO-3 / FSDP gathers the sharded parameters.
enum class GatherUnit : unsigned char {
  bucket,  // DeepSpeed: coalesced gathers of stage3_prefetch_bucket_size elements
  module,  // FSDP: one all-gather (and one reduce-scatter) per wrapped module, a transformer block
};

/// How the engine computes the loss: softmax cross-entropy over the
/// vocabulary, whose memory-bound passes over every logit are what a small
/// model's head costs beside its GEMM (model/op_costs.cpp
/// cross_entropy_cost prices each, time and memory).
enum class CrossEntropyKernels : unsigned char {
  /// One pass of row statistics over the 16-bit logits and one gradient
  /// pass (ztune's executor's kernels; any engine under a graph compiler).
  fused,
  /// Megatron-LM / Megatron-Core / Megatron-DeepSpeed:
  /// vocab_parallel_cross_entropy on output.float(), six fp32 passes forward
  /// and two backward (--fp16-lm-cross-entropy not given).
  megatron_fp32,
  /// Megatron-Core's fused_vocab_parallel_cross_entropy (cross_entropy_loss_fusion,
  /// NeMo 2's default): torch.compile'd graphs that still save an fp32 softmax.
  megatron_fused,
  /// PyTorch's F.cross_entropy on logits.float() (torchtitan, FSDP recipes):
  /// log_softmax (three reads of each row) and nll_loss, whose backward
  /// zero-fills a whole fp32 gradient first.
  torch_fp32,
};
/// The profile key fusion.cross_entropy's values, in the enum's order.
inline constexpr const char* kCrossEntropyNames[] = {"fused", "megatron_fp32", "megatron_fused", "torch_fp32"};

/// The library an engine runs FP8 linear layers with (plan.fp8). What it
/// keeps differs, not what it computes: every library runs the same FP8
/// GEMMs (fp8_costs.cpp fp8_cast_traffic says what each casts).
enum class Fp8Library : unsigned char {
  none,                // no FP8 path (Megatron-DeepSpeed, ztune's executor)
  /// NVIDIA Transformer Engine (Megatron-Core's TE modules): each linear
  /// saves its FP8 input for wgrad (1 byte an element; LayerNormLinear and
  /// LayerNormMLP keep the 16-bit norm input and FC1's pre-activation beside
  /// it), and an FP8 copy of each weight and of its transpose stay cached
  /// across a step's micro-batches (is_first_microbatch): 2 bytes a weight.
  transformer_engine,
  /// torchao's Float8Linear (torchtitan's float8 converter; torchao 0.9 and
  /// later, matmul_with_hp_or_float8_args): saves its 16-bit input and casts
  /// it again in backward; weights cast at each use, nothing cached
  /// (torchao's float8 README: the same peak memory as bf16).
  torchao,
};
/// The names of the libraries, in the enum's order: the profile's "fp8" key
/// and predict --json's features.fp8.library.
inline constexpr const char* kFp8LibraryNames[] = {"none", "transformer_engine", "torchao"};

/// Ceilings of the host costs an engine profile, or a calibrated profile's
/// measurement of ztune's executor, may state: a second to dispatch one op,
/// 100 s of fixed cost a micro-batch, an hour a step. The fitted engines sit
/// at 1-100 µs, 10 µs-20 ms and 0.1-300 ms; past these a profile is damaged,
/// and a calibration started from one (1e300 ms a step) wrote a profile
/// predicting 1e297 s a step.
inline constexpr double kMaxHostOpUs = 1e6;
inline constexpr double kMaxMicrobatchOverheadUs = 1e8;
inline constexpr double kMaxStepOverheadMs = 3.6e6;

struct EngineProfile {
  std::string name;    // "megatron", "deepspeed", "fsdp", "ztune"
  std::string source;  // where the numbers come from

  // Host costs. A layer's pass takes max(GPU time, host ops × host_op_s):
  // when the GPU work is small the host's dispatch of each op bounds it.
  double host_op_s = 0;              // host time to dispatch one op of a layer's forward
  double microbatch_overhead_s = 0;  // fixed host cost per micro-batch (schedule, data, loss)
  double step_overhead_s = 0;        // fixed host cost per step (loss-scale check, grad norm, optimizer launch)

  // Fusion: HBM traffic of the layer's elementwise work (norms, bias, dropout,
  // residual, activation, rotary) relative to Megatron's fused kernels
  // (bias-GeLU, bias-dropout-add, fused softmax: 1). Eager PyTorch runs each
  // as its own kernel reading and writing the whole tensor (> 1).
  double elementwise_traffic = 1;
  // The same traffic when the engine runs under a graph compiler
  // (torch.compile/Inductor, XLA), which fuses chains of elementwise ops into
  // one kernel each; in [1, elementwise_traffic]. compiled() selects it.
  double compiled_elementwise_traffic = 1;

  // Overlap factors: fraction of a communication that hides behind compute
  // when the plan allows overlap (0 = fully exposed, 1 = fully hidden).
  double dp_overlap = 0.9;              // bucketed gradient reduction behind backward
  double zero3_prefetch_overlap = 0.8;  // ZeRO-3 / FSDP gathers behind compute with prefetch
  double offload_overlap = 0.8;         // PCIe/NVMe transfers behind compute
  double tp_overlap = 0;                // TP collectives behind GEMMs (Megatron 2022: none)
  // With plan.tp_comm_overlap (Transformer Engine's userbuffers): the fraction
  // of each sequence-parallel all-gather / reduce-scatter that hides behind the
  // GEMM it is pipelined with (the rest, the first chunk and the SMs the
  // communication takes from the GEMM, stays exposed). 0 where the engine has
  // no such overlap; optional in the profile (absent = 0).
  double tp_comm_overlap = 0;

  // Whether the engine's "standard" attention always runs a fused
  // scale-mask-softmax (false: ztune's executor, whose kernel takes any shape)
  // or Megatron-LM's FusedScaleMaskSoftmax, which only some shapes may use and
  // which otherwise falls back to PyTorch's softmax chain in fp32
  // (megatron_fused_softmax_available; Megatron-LM, Megatron-DeepSpeed). Profile
  // key fusion.masked_softmax: "megatron" or "always" (optional, absent = always).
  bool megatron_softmax_rule = false;
  // The loss's kernels (profile key fusion.cross_entropy, optional, absent =
  // fused); compiled() fuses them too.
  CrossEntropyKernels cross_entropy = CrossEntropyKernels::fused;

  // Gradients of bf16 training (profile section "gradients", optional; absent
  // = neither). bf16_reduce_fp32 ("bf16_reduce": "fp32"): the data-parallel
  // reduction moves 4-byte gradients. Megatron-LM accumulates bf16 gradients
  // in an fp32 main_grad buffer and reduces that buffer (its arguments.py sets
  // accumulate_allreduce_grads_in_fp32 under --bf16; Megatron-Core's
  // DistributedDataParallelConfig grad_reduce_in_fp32; NeMo's grad_sync_dtype
  // defaults to fp32 too). The shipped megatron engine states it; the NeMo
  // performance configurations that reduce in bf16 (optim.grad_sync_dtype
  // bf16, NeMo 2's grad_reduce_in_fp32 False) say so in the plan
  // (Plan::grad_reduce_dtype, which overrides these keys).
  // bf16_pipeline_fp32_accumulation ("bf16_pipeline_accumulation":
  // "fp32_per_microbatch"): DeepSpeed runs bf16 pipelines without ZeRO in its
  // BF16_Optimizer (runtime/engine.py, the BFLOAT16 optimizer wrapper), which after every micro-batch's backward casts each parameter's
  // bf16 gradient to fp32 and adds it to an fp32 buffer (bf16_optimizer.py
  // _update_hp_grad, called from the pipeline engine's backward pass) and
  // reduces those fp32 buffers at the step (get_grads_for_reduction).
  bool bf16_reduce_fp32 = false;
  // fp16_reduce_fp32 ("fp16_reduce": "fp32"): fp16 gradients reduced as fp32
  // too. ztune's executor: its communicators move float buffers only
  // (executor/include/ztune/executor/communicator.hpp), whatever the plan's
  // precision. Megatron-LM and DeepSpeed reduce fp16 gradients in fp16 unless
  // told otherwise (a plan's grad_reduce_dtype).
  bool fp16_reduce_fp32 = false;
  bool bf16_pipeline_fp32_accumulation = false;
  // dp_buffers_in_place ("buffers": "in_place"): the data-parallel gradient
  // reduction (all-reduce, or reduce-scatter into this rank's shard) and the
  // distributed optimizer's parameter all-gather run inside the contiguous
  // gradient and parameter buffers themselves, with no communication bucket
  // beside them: Megatron-Core's ParamAndGradBuffer (start_grad_sync
  // reduce-scatters bucket.grad_data into its own shard view,
  // start_param_sync all-gathers bucket.param_data from its shard), and
  // Apex's DistributedFusedAdam with NeMo's contiguous_grad_buffer and
  // contiguous_param_buffer. "buckets" (absent): the engine copies gradients
  // into reduce buckets and gathers parameters into all-gather buckets
  // (DeepSpeed's reduce_bucket_size, doubled with overlap_comm, and
  // allgather_bucket_size; FSDP's flat reduce-scatter inputs). ZeRO-2/3 plans
  // keep their buckets under every engine (Megatron-FSDP's are its own).
  bool dp_buffers_in_place = false;

  // Whether the engine is ztune's own executor (profile key "executor": true;
  // false when absent). It stores parameters, gradients and activations in
  // the plan's precision with the plan's optimizer-state dtypes (issue 24),
  // runs every GEMM and kernel on the stored values (CudaBackend's native
  // hooks), and is priced by what it allocates and moves rather than by an
  // engine's accounting: its own memory lines (model/memory_model
  // executor_layout), an fp32 plan's optimizer step writing no 16-bit copy,
  // ZeRO++ quantizing in place and gathering the stored values
  // (model/zeropp), and context-parallel and Ulysses attention on fp32
  // copies (its host-side ring and all-to-all; attention_precision).
  bool executor = false;

  GatherUnit zero3_gather = GatherUnit::bucket;
  // Whether ZeRO-3 gathers a fully recomputed block again for its
  // recomputation. DeepSpeed: yes: its module hooks fire in the recomputed
  // forward like in any forward (fetch, then release unless the parameter is
  // used again within stage3_max_reuse_distance), so the backward window
  // gathers the block for the recomputation and again what that released
  // (partitioned_param_coordinator __params_to_release). FSDP and ztune's
  // executor: no: the recomputation runs inside the block's backward, after
  // its one gather. Profile key "zero3_recompute": "regather" or "held"
  // (optional, absent = held).
  bool zero3_recompute_regathers = false;
  // FP8 linear layers (profile key "fp8": "transformer_engine" or "torchao";
  // optional, absent = none): see Fp8Library.
  Fp8Library fp8 = Fp8Library::none;
};

class ObjectReader;
/// Reads the three host costs into `e` within the kMax* ceilings: an engine
/// profile's `host` section (op key "op_us") and a calibrated hardware
/// profile's `framework` section ("host_op_us") alike.
void read_host_costs(ObjectReader& r, const char* op_key, EngineProfile& e);

/// `e` under a graph compiler (torch.compile, XLA): its elementwise traffic is
/// compiled_elementwise_traffic and its cross-entropy fused (XLA fuses the
/// loss with the rest; torchtitan compiles its loss function with the model);
/// everything else (host costs, overlap, gather unit) is the engine's own.
[[nodiscard]] EngineProfile compiled(EngineProfile e);

/// Parses an engine document (schema "ztune.engine/1"); strict, names file and path.
EngineProfile engine_profile_from_json(const nlohmann::json& doc, const std::string& file);
nlohmann::json engine_profile_to_json(const EngineProfile& e);

/// The catalog's engine profile data/engines/<name>.json. InputError names
/// the engines available when there is none of that name.
EngineProfile load_engine_profile(const std::string& name);

/// The engine names of the catalog (data/engines/*.json), sorted.
[[nodiscard]] std::string engine_names();

}  // namespace ztune
