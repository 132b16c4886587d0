#pragma once
// Per-operation costs: ONE source of truth for a kernel's or a collective's time,
// used by both the analytical model (time_model.cpp) and the discrete-event
// simulator. Everything here is a pure function of (model, plan, cluster,
// profile); nothing allocates, so the tuner can call it millions of times.
//
// Conventions: times in seconds, sizes in bytes (decimal GB/s in the cluster
// files), one micro-batch on one GPU unless a name says otherwise.
#include <cstdint>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/collective.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

/// Bytes of one element in `p` (fp16/bf16 2, fp32 4).
[[nodiscard]] double bytes_of(Precision p);

/// The dtype the engine stores parameters and activations in, and moves them
/// between ranks in: the plan's precision, on every engine and in ztune's
/// executor (16-bit storage with fp32 masters, issue 24). Gradient reductions
/// have their own rule (gradient_reduce_bytes).
[[nodiscard]] Precision storage_precision(const Plan& p);
/// The attention core's dtype: the stored one, on every engine and in ztune's
/// executor (its GEMMs, cuDNN's fused attention and its kernels' 16-bit
/// instances run on the stored values), but for the executor's
/// context-parallel ring and Ulysses all-to-all, which attend on fp32 copies
/// (executor/gpt_stage.cpp GptStage::attend).
[[nodiscard]] Precision attention_precision(const Plan& p, const EngineProfile& e);

// ---------------------------------------------------------------- kernels

/// A (batched) GEMM C[m×n] = A[m×k]·B[k×n], `batch` independent instances.
struct GemmShape {
  double m = 0;
  double n = 0;
  double k = 0;
  double batch = 1;
  [[nodiscard]] double flops() const { return 2.0 * m * n * k * batch; }
  /// Minimum HBM traffic in elements: read A and B, write C.
  [[nodiscard]] double elements() const { return (m * k + k * n + m * n) * batch; }
};

/// One rank's linear GEMMs of a layer (Megatron-LM's split: QKV and FC1
/// column-parallel, the projection and FC2 row-parallel), on its rows.
struct LinearGemms {
  GemmShape qkv, proj, fc1, fc2;
};
/// Their shapes for the plan (layer_cost prices them; the memory model sizes
/// the executor's cast scratch from them).
[[nodiscard]] LinearGemms layer_linear_gemms(const Transformer& m, const Plan& p);
/// Elements of one layer's four linear weights on one rank (QKV, projection,
/// FC1, FC2: k × n of each GEMM): what FP8 casts and caches.
[[nodiscard]] double linear_weight_elements(const LinearGemms& g);
/// Bytes per parameter the data-parallel parameter all-gathers (and ZeRO-3
/// gathers) move: the stored type's, but for the linear weights of a plan
/// with fp8_param_gather, 1 byte (the most loaded stage's mix).
[[nodiscard]] double param_gather_bytes_per_param(const Transformer& m, const Plan& p);
/// HBM bytes of the once-a-step FP8 weight casts of one GPU of the most
/// loaded stage (plan.fp8 under Transformer Engine, which caches the FP8
/// weights across the step's micro-batches; 0 otherwise): the optimizer
/// step's time carries them.
[[nodiscard]] double fp8_weight_cast_bytes(const Transformer& m, const Plan& p, Fp8Library lib);
/// The head's vocab-parallel logits GEMM, on the positions that predict.
[[nodiscard]] GemmShape logits_gemm(const Transformer& m, const Plan& p);

/// Time of one GEMM: roofline max(FLOPs / (peak · gemm_efficiency_of(shape)), bytes / achieved
/// HBM bandwidth) plus one kernel launch. `attention` applies the profile's
/// attention_gemm_factor (head_dim-thin batched GEMMs of the attention core).
[[nodiscard]] double gemm_time(const GemmShape& g, Precision p, const GpuSpec& gpu, const HardwareProfile& hw,
                               bool attention = false);
/// Time of a fused attention kernel (`kernel` flash or cudnn): `flops` at the
/// GEMM table's efficiency times the kernel's factor (attention_gemm_factor for
/// FlashAttention-2, cudnn_attention_factor for cuDNN's), or its `bytes` of HBM
/// traffic if slower, plus one launch. Unlike gemm_time no s×s product is written.
[[nodiscard]] double fused_attention_time(double flops, double bytes, Precision p, const GpuSpec& gpu,
                                          const HardwareProfile& hw, AttentionKernel kernel);
/// Whether Megatron-LM's fused scale-mask-softmax kernel may run on a causal
/// attention core of `attn_batches` = micro-batch × heads per rank score
/// matrices of sq × sk (megatron/model/fused_softmax.py, is_kernel_available,
/// upper-triangular mask): 16-bit input, 16 < sk ≤ 4096, sq and sk multiples
/// of 4, and attn_batches a multiple of 4 and of the kernel's batches per
/// block (get_batch_per_block: 128 threads, warps of min(2^⌈log2 sk⌉, 32)
/// lanes, two rows per warp up to 128 keys: 4 rows for sk = 1024, 8 for 64).
/// Otherwise Megatron runs PyTorch's softmax chain in fp32 instead
/// (forward_torch_softmax). E.g. 16 heads at tp 8, micro-batch 1: 2 score
/// matrices, no fused kernel.
[[nodiscard]] bool megatron_fused_softmax_available(double attn_batches, double sq, double sk, Precision p);
/// Whether plan `p` runs Megatron's unfused softmax chain in fp32
/// (forward_torch_softmax) instead of the fused kernel: the standard dense
/// kernel without context parallelism, an engine with Megatron's rule
/// (engine fusion.masked_softmax "megatron"), and a shape the rule refuses.
/// THE condition: the time model prices the chain, the memory model stores
/// its fp32 probabilities.
[[nodiscard]] bool megatron_softmax_fallback(const Transformer& m, const Plan& p, const HardwareProfile& hw);
/// Attention score elements of one layer and micro-batch on one rank:
/// b·a/(t·u) heads of s/cp query rows against s keys (dense).
[[nodiscard]] double attention_score_elements(const Transformer& m, const Plan& p);

/// Time of a memory-bound kernel moving `bytes` through HBM (read + write),
/// at the profile's achieved bandwidth, plus `kernels` launches.
[[nodiscard]] double memory_bound_time(double bytes, const GpuSpec& gpu, const HardwareProfile& hw, int kernels = 1);

// ---------------------------------------------------------------- collectives

// The kinds, bus factors, latency steps and group placement: vocab/collective.hpp.

/// Achieved bus bandwidth (bytes/s) of a group: the slowest level it spans
/// bounds it (DESIGN.md). Intra-node: link × busbw efficiency. Inter-node: the
/// node's NIC bandwidth shared by the gpus/per_node groups that use it at once
/// (every GPU of a node is in one such group), × efficiency.
[[nodiscard]] double group_bus_bandwidth(const GroupPlacement& g, const Cluster& c, const HardwareProfile& hw);
/// The link figure (bytes/s, before any efficiency) of group `g`'s level: the
/// intra-node link, or across nodes the NICs' share per GPU times the group's
/// GPUs on one node. What group_bus_bandwidth scales by the level's busbw
/// efficiency, and what the calibration fit divides measured bytes by.
[[nodiscard]] double group_link_figure(const GroupPlacement& g, const Cluster& c);
/// Per-step latency α (seconds) of one level: a hop inside a node or one
/// across nodes (the cluster's latency_us plus the profile's).
[[nodiscard]] double level_latency(bool inter_node, const Cluster& c, const HardwareProfile& hw);

/// α_intra·steps.intra + α_inter·steps.inter for `algo`; `best` takes the
/// faster of ring and tree for an all-reduce (the bandwidth term is the same).
[[nodiscard]] double latency_time(Collective k, const GroupPlacement& g, const Cluster& c, const HardwareProfile& hw,
                                  CollectiveAlgo algo = CollectiveAlgo::best);

/// Time of one collective of `bytes` (nccl-tests S) over group `g`: the
/// crossed level's base latency + latency_time + S·bus_factor/busbw.
/// Hierarchical groups are bounded by their slowest level via
/// group_bus_bandwidth. 0 when size is 1.
[[nodiscard]] double collective_time(Collective k, double bytes, const GroupPlacement& g, const Cluster& c,
                                     const HardwareProfile& hw, CollectiveAlgo algo = CollectiveAlgo::best);

/// Point-to-point send of `bytes` between two GPUs, inside a node or across nodes.
[[nodiscard]] double p2p_time(double bytes, bool crosses_nodes, const Cluster& c, const HardwareProfile& hw);

// ---------------------------------------------------------------- transformer layer

/// One transformer layer, one micro-batch, on one GPU of the plan (tensor
/// parallel share). Compute times exclude communication; TP collective times
/// are the link time of the collectives the layer issues (bytes and counts
/// given so a simulator can place each one).
struct LayerCost {
  // forward compute, split so a simulator can place the parts
  double fwd_gemm_s = 0;         // QKV, attention projection, FC1, FC2
  double fwd_attention_s = 0;    // attention core: QKᵀ, softmax+mask+dropout, PV
  double fwd_elementwise_s = 0;  // norms, bias+dropout+residual, activation
  double fwd_s = 0;              // sum of the three
  // backward compute
  double bwd_input_s = 0;        // activation gradients (dgrad GEMMs, attention and elementwise backward)
  double bwd_weight_s = 0;       // weight gradients (wgrad GEMMs)
  double bwd_s = 0;              // bwd_input_s + bwd_weight_s
  double bwd_gemm_s = 0;         // the same backward by kind: dgrad + wgrad GEMMs,
  double bwd_attention_s = 0;    //   attention-core backward,
  double bwd_elementwise_s = 0;  //   elementwise backward (sum: bwd_s)
  // recomputation before the backward (none: 0; selective: the attention core;
  // full: the whole forward compute)
  double recompute_s = 0;
  // tensor-parallel collectives (0 when tp = 1); with sequence parallelism the
  // all-reduces become an all-gather + reduce-scatter pair each.
  Collective tp_kind_fwd = Collective::all_reduce;  // all_reduce, or all_gather+reduce_scatter with SP
  int tp_collectives_fwd = 0;    // collectives issued in forward (all blocking)
  int tp_collectives_bwd = 0;    // in backward (SP: includes the re-all-gather of the input for wgrad)
  int tp_collectives_recompute = 0;
  double tp_bytes = 0;           // nccl-tests S of each collective (s·b·h elements, 16-bit; the all-gathers
                                 //   of delayed FP8 under Transformer Engine move s·b·h bytes)
  double tp_fwd_s = 0;           // link time of the forward collectives (on the critical path; with
                                 //   plan.tp_comm_overlap what its GEMMs leave exposed)
  double tp_bwd_s = 0;           // backward collectives on the critical path (SP: gradient all-gathers)
  double tp_bwd_async_s = 0;     // backward collectives Megatron issues async beside GEMMs
  double tp_bwd_window_s = 0;    // compute they can hide behind: wgrad (+ dgrad with SP) of QKV and FC1
  double tp_recompute_s = 0;     // forward collectives repeated by full recomputation
  // Context-parallel ring attention (cp > 1; Megatron-Core's p2p ring, Liu et
  // al. 2023 "Ring Attention"): cp block steps per pass, each the local
  // queries against one rank's K/V chunk while the next chunk moves.
  int cp_steps = 0;              // block steps per pass (cp)
  double cp_bytes = 0;           // one K/V chunk exchanged per step (K and V, 16-bit), each way
  double cp_step_fwd_s = 0;      // attention compute of one forward block step
  double cp_step_bwd_s = 0;      // of one backward block step
  double cp_fwd_link_s = 0;      // link time of the forward exchanges: (cp−1) K/V chunks
  double cp_bwd_link_s = 0;      // backward: (cp−1) K/V + dK/dV, and dK/dV's last hop home
  double cp_fwd_s = 0;           // exposed: Σ max(0, exchange − block step)
  double cp_bwd_s = 0;           // exposed, plus the last dK/dV hop (nothing left to hide it)
  double cp_recompute_s = 0;     // the forward ring again when recomputation re-runs attention
  // DeepSpeed-Ulysses (ulysses > 1; Jacobs et al. 2023 §3.1): before the
  // attention core an all-to-all each for Q, K and V turns [s/u, heads] into
  // [s, heads/u]; after it one turns the output back. Backward runs their
  // transposes (the same four all-to-alls). nccl-tests S of each is the whole
  // per-rank send buffer, b·(s/u)·width/t 16-bit elements, of which a rank
  // sends (u−1)/u (bus_factor). Blocking: nothing computes while they move.
  int ulysses_a2a_fwd = 0;       // all-to-alls per forward pass (4: Q, K, V, output)
  int ulysses_a2a_bwd = 0;       // per backward pass (4: dO, dQ, dK, dV)
  double ulysses_q_bytes = 0;    // S of the Q (and output) all-to-all: b·(s/u)·h/t elements
  double ulysses_kv_bytes = 0;   // S of the K (and V) all-to-all: b·(s/u)·kv_dim/t elements
  double ulysses_fwd_s = 0;      // link time of the forward all-to-alls (exposed: on the critical path)
  double ulysses_bwd_s = 0;      // of the backward ones
  double ulysses_recompute_s = 0;  // full recomputation repeats the forward's (selective re-runs only the core)
  // Host dispatch time of each pass (ops × profile host_op_s); a pass takes
  // max(GPU time incl. its blocking collectives, host time).
  double host_fwd_s = 0;
  double host_bwd_s = 0;
  double host_recompute_s = 0;
  // FLOPs on this GPU (for MFU/HFU accounting)
  double fwd_flops = 0;
  double recompute_flops = 0;
};
[[nodiscard]] LayerCost layer_cost(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw);

/// The loss over the logits as each engine's code runs it
/// (EngineProfile::cross_entropy), per logit element with the logits stored in
/// `eb` bytes: the memory-bound passes and their kernels each way, and the
/// bytes live at once at the loss's peak (the logits included).
struct CrossEntropyCost {
  double fwd_bytes = 0, bwd_bytes = 0;
  int fwd_kernels = 0, bwd_kernels = 0;
  double peak_bytes = 0;
};
[[nodiscard]] CrossEntropyCost cross_entropy_cost(CrossEntropyKernels k, double eb);

/// First-stage embedding and last-stage LM head + loss, one micro-batch, one GPU.
struct EdgeCost {
  double embedding_fwd_s = 0;  // lookup (+ positions), memory-bound
  double embedding_bwd_s = 0;  // scatter-add of the gradient
  double head_fwd_s = 0;       // final norm, logits GEMM, softmax cross entropy
  double head_bwd_s = 0;       // dgrad and wgrad of the logits GEMM, loss backward
  double head_gemm_s = 0;      // the logits GEMM's share of head_fwd_s + head_bwd_s (fwd, dgrad, wgrad)
  double embedding_tp_s = 0;   // vocab-parallel embedding all-reduce (or reduce-scatter with SP), forward
  double head_tp_s = 0;        // all-gather of the head input with SP (fwd + bwd), loss all-reduces
  double fwd_flops = 0;        // logits GEMM FLOPs on this GPU
};
[[nodiscard]] EdgeCost edge_cost(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw);

/// What layer_cost and edge_cost read of a plan on a GPU cluster (besides the
/// model, the cluster and the profile): two plans with equal keys have equal
/// layer and edge costs there. The tensor-, context- and Ulysses-parallel
/// groups' placements follow from tp, cp, ulysses and the node's size
/// (place_groups). THE list: a field layer_cost or edge_cost starts to read
/// belongs here, and test_layer_cost_memo checks the two agree over whole
/// search spaces. CPU ranks price their layer by the executor's kernels
/// (cpu_executor_costs.hpp), which read more of the plan: no key there.
struct LayerCostKey {
  int tp = 1;
  int cp = 1;
  int ulysses = 1;
  int micro_batch = 1;
  int sparse_block = 0;
  Precision precision = Precision::bf16;
  AttentionKernel attention = AttentionKernel::standard;
  Recompute recompute = Recompute::none;
  SelectivePolicy recompute_policy = SelectivePolicy::attention;
  int recompute_every = 2;  // with alternate_layers
  SparseLayout sparse_attention = SparseLayout::none;
  bool sequence_parallel = false;
  bool tp_comm_overlap = false;
  bool partition_activations = false;
  Fp8Recipe fp8 = Fp8Recipe::none;
  bool operator==(const LayerCostKey&) const = default;
};
[[nodiscard]] LayerCostKey layer_cost_key(const Plan& p);

/// Pipeline point-to-point per micro-batch and per stage boundary, one direction
/// (the activation forward and its gradient backward are the same size):
/// s·b·h 16-bit elements (/tp with sequence parallelism).
struct PipelineP2P {
  double bytes = 0;
  double time_s = 0;
};
[[nodiscard]] PipelineP2P pipeline_p2p(const Transformer& m, const Plan& p, const Cluster& c,
                                       const HardwareProfile& hw);

// ---------------------------------------------------------------- data parallel and ZeRO

/// Parameters held by one GPU of the most loaded pipeline stage, before ZeRO
/// partitioning (tensor parallel share of its layers, plus the embedding on the
/// first stage and the head on the last; the larger of the two).
[[nodiscard]] double stage_params(const Transformer& m, const Plan& p);
/// Parameters per GPU the pipeline's end stages hold beside their layers:
/// the embedding (the word embedding split over tp, learned positions
/// replicated) and the head (the final norm plus the untied, or with pp > 1
/// the tied copy of the, word embedding). stage_params and the simulator's
/// stages count them so.
struct StageEdgeParams {
  double embedding = 0;
  double head = 0;
};
[[nodiscard]] StageEdgeParams stage_edge_params(const Transformer& m, const Plan& p);

/// Data-parallel gradient synchronisation (plus the tied-embedding sync across the pipeline) of one GPU's stage, link times
/// (before overlap) as the ZeRO stage does it (DESIGN.md, ZeRO paper §7):
///  stage 0: all-reduce of the 16-bit gradients once per step;
///  stage 1: reduce-scatter once per step + all-gather of updated parameters;
///  stage 2: reduce-scatter on every micro-batch + all-gather of parameters;
///  stage 3: reduce-scatter on every micro-batch (gathers are zero3_gather_cost);
///           with hybrid sharding the reduce-scatter runs in the shard group and the
///           partitions are all-reduced across the replicas (replica_allreduce_s);
///           with ZeRO++ the int4 hierarchical all-to-all of qgZ (zeropp.hpp).
/// Parameters move in the storage precision (storage_precision), gradients in
/// gradient_reduce_bytes' dtype.
/// 1-bit Adam's compressed exchange is not here: see onebit_adam.hpp.
struct DpSyncCost {
  double per_microbatch_s = 0;   // reductions issued every micro-batch (stage 2/3)
  double per_step_s = 0;         // reductions issued once per step (stage 0/1), excluding param all-gather
  double param_allgather_s = 0;  // all-gather of updated 16-bit parameters after the step (stage 1/2)
  double bytes_per_microbatch = 0;
  double bytes_per_step = 0;     // total bytes (nccl-tests S) issued per step, all kinds
  double embedding_sync_s = 0;   // tied word embeddings: all-reduce of its gradient between first and last stage
  int buckets = 1;               // reduce buckets per reduction (DeepSpeed reduce_bucket_size)
  // Hybrid sharding (plan.dp_shard): the all-reduce of the reduce-scattered
  // gradient partitions (bytes/dp_shard) across the replicas, link time. It is
  // included in per_microbatch_s when the engine reduces per module (PyTorch
  // FSDP HYBRID_SHARD / FSDP2 HSDP: every backward), else in per_step_s
  // (DeepSpeed MiCS and ztune's executor: at the accumulation boundary).
  double replica_allreduce_s = 0;
  double replica_bytes = 0;      // nccl-tests S of that all-reduce, per reduction (whole partition)
  bool replica_per_microbatch = false;
};
[[nodiscard]] DpSyncCost dp_sync_cost(const Transformer& m, const Plan& p, const Cluster& c,
                                      const HardwareProfile& hw);

/// Whether the plan runs in DeepSpeed's BF16_Optimizer: the engine profile
/// says it has one (bf16_pipeline_fp32_accumulation) and DeepSpeed picks it
/// for the plan (memory_model.hpp deepspeed_runs_bf16_optimizer).
[[nodiscard]] bool bf16_optimizer_runs(const Plan& p, const EngineProfile& e);
/// Bytes per gradient element the data-parallel reduction moves: the plan's
/// grad_reduce_dtype where it states one, else the stored precision's (storage_precision), or 4
/// where the engine reduces an fp32 gradient buffer (Megatron-LM's main_grad
/// and DeepSpeed's BF16_Optimizer for bf16). THE one count: the
/// analytical dp_sync_cost and the simulator's gradient buckets both use it.
[[nodiscard]] double gradient_reduce_bytes(const Plan& p, const EngineProfile& e);
/// Parameter tensors of one transformer layer as Megatron-LM builds it and
/// ztune's executor registers them (GptStage): two norms (weight, and bias for
/// LayerNorm), the fused QKV and the output projection, the MLP's two linear
/// layers (SwiGLU's gate and up projections fused in one,
/// megatron/core/transformer/mlp.py), and a bias beside each linear where the
/// model has them (Q/K/V's alone with qkv_bias): 12 for GPT-2, 6 for Llama.
[[nodiscard]] int parameter_tensors_per_layer(const Transformer& m);
/// Parameter tensors of the plan's most loaded stage: its layers' and those
/// of its edge, as the executor registers them (param_specs): the first stage
/// the word embedding and learned positions, the last the final norm (weight,
/// and bias for LayerNorm) and the output layer, untied or, on a pipeline, the
/// tied embedding's copy. GPT-2: 4 on a single stage, 2 first, 3 last; Llama:
/// 3, 1 and 2. The ops that loop over tensors read it (DeepSpeed's
/// BF16_Optimizer fold, the CPU executor's sum_squares).
[[nodiscard]] int stage_parameter_tensors(const Transformer& m, const Plan& p);
/// DeepSpeed's BF16_Optimizer after each micro-batch's backward, per stage:
/// every parameter tensor's bf16 gradient cast to fp32 (read 2 B, write 4 B)
/// and added to its fp32 buffer (read 8 B, write 4 B), two kernels per tensor
/// issued from a Python loop, so max(HBM time of 18 B per parameter, the host's
/// dispatch of two ops per tensor). 0 where the BF16_Optimizer does not run.
[[nodiscard]] double bf16_grad_accumulation_time(const Transformer& m, const Plan& p, const Cluster& c,
                                                 const HardwareProfile& hw);

/// Hybrid sharding (plan.dp_shard): the all-reduce across the replicas of the
/// partition (bucket_bytes / dp_shard) a shard group's reduce-scatter of a
/// gradient bucket of `bucket_bytes` leaves on each rank, over the replica
/// group (place_groups), link time; 0 without hybrid sharding.
[[nodiscard]] double hybrid_replica_allreduce_time(double bucket_bytes, const Plan& p, const Cluster& c,
                                                   const HardwareProfile& hw);
/// Whether the engine all-reduces the partitions across replicas on every
/// micro-batch (FSDP's per-module units: HYBRID_SHARD reduces each backward)
/// or once at the accumulation boundary (bucketed engines: MiCS, ztune's executor).
[[nodiscard]] bool hybrid_reduces_every_microbatch(const HardwareProfile& hw);

/// ZeRO-3 parameter all-gathers per micro-batch (forward and again in backward),
/// link time, over the shard group (all of dp × cp, or dp_shard ranks with
/// hybrid sharding). 0 unless zero_stage is 3. With ZeRO++ (zeropp.hpp): forward in
/// int8 over the group plus its quantization kernels, backward in 16-bit from
/// hpZ's node-local secondary partition.
struct Zero3GatherCost {
  double fwd_s = 0;
  double bwd_s = 0;  // the backward window's: with a regathering engine and full recomputation, 1 + the regather share of a pass
  double bytes_per_pass = 0;  // bytes of the stage's parameters gathered in forward: as stored (int8 + scales with DeepSpeed's ZeRO++)
  int gathers = 0;             // all-gathers per pass (zero3_gathers_per_pass)
};
/// Of one block's parameters, the share a regathering engine
/// (EngineProfile::zero3_recompute_regathers: DeepSpeed) gathers a third time
/// for the block's backward, after the recomputed forward released it; 0
/// without full recomputation, ZeRO-3 or such an engine. The recomputed
/// forward walks the block's weights in order (QKV, attention output, FC1,
/// FC2: Megatron's modules, tensor-parallel shares) and releases each one
/// unless it is used again within plan.max_reuse_distance parameters of
/// modules (partitioned_param_coordinator __params_to_release): weight i is
/// next used by the backward after the recomputation of the later weights and
/// the backward of those, 2·Σ_{j>i} p_j, so it is kept iff that is below the
/// distance. Weights at most plan.param_persistence_threshold stay gathered.
/// The share of a recomputed layer's weights: Megatron's block method
/// recomputes only some layers (recomputed_layer_fraction).
[[nodiscard]] double zero3_backward_regather_share(const Transformer& m, const Plan& p, const HardwareProfile& hw);
/// All-gathers of one ZeRO-3 pass over the stage (the engine's gather unit:
/// DeepSpeed's prefetch buckets, at least one per layer; FSDP's modules).
[[nodiscard]] int zero3_gathers_per_pass(const Transformer& m, const Plan& p, const HardwareProfile& hw);
[[nodiscard]] Zero3GatherCost zero3_gather_cost(const Transformer& m, const Plan& p, const Cluster& c,
                                                const HardwareProfile& hw);

/// The optimizer step and the offload transfers of one step on one GPU.
struct OptimizerCost {
  double gpu_step_s = 0;       // fused Adam over the GPU's partition at achieved HBM bandwidth
  double host_step_s = 0;      // CPU Adam at the node's measured rate (offload_optimizer != none)
  double pcie_grads_s = 0;     // gradients device → host per step (per micro-batch for stage 2/3)
  double pcie_params_s = 0;    // updated parameters host → device per step
  double nvme_s = 0;           // optimizer states (and params) read + written on NVMe per step
  double zero3_param_fetch_s = 0;  // parameters fetched from host/NVMe per micro-batch pass (offload_params)
};
[[nodiscard]] OptimizerCost optimizer_cost(const Transformer& m, const Plan& p, const Cluster& c,
                                           const HardwareProfile& hw);

/// Plain transfer times, for the simulator's PCIe and NVMe resources.
[[nodiscard]] double pcie_copy_time(double bytes, const Cluster& c, const HardwareProfile& hw);
[[nodiscard]] double nvme_copy_time(double bytes, const Cluster& c, const HardwareProfile& hw);

}  // namespace ztune
