#include "ztune/vocab/executor_support.hpp"

#include <algorithm>

namespace ztune {

VocabRange vocab_range(int vocab, int tp, int tp_rank) {
  const int per = (vocab + tp - 1) / tp;
  VocabRange r;
  r.begin = std::min(vocab, tp_rank * per);
  r.rows = std::min(vocab, r.begin + per) - r.begin;
  return r;
}


std::optional<std::string> unsupported_reason(const Plan& p, const Transformer& m, int world, ExecBackend backend,
                                              int ranks_per_node) {
  auto s = [](auto v) { return std::to_string(v); };
  if (p.gpus() != world && p.ulysses > 1)
    return "$.plan: dp×tp×ulysses×pp = " + s(p.dp) + "×" + s(p.tp) + "×" + s(p.ulysses) + "×" + s(p.pp) + " = " +
           s(p.gpus()) + " ranks, but the job has " + s(world) + " (ztune run --np " + s(p.gpus()) + ", mpirun -np " + s(p.gpus()) + ")";
  if (p.gpus() != world && p.cp > 1)
    return "$.plan: dp×tp×cp×pp = " + s(p.dp) + "×" + s(p.tp) + "×" + s(p.cp) + "×" + s(p.pp) + " = " +
           s(p.gpus()) + " ranks, but the job has " + s(world) + " (ztune run --np " + s(p.gpus()) + ", mpirun -np " + s(p.gpus()) + ")";
  if (p.gpus() != world)
    return "$.plan: dp×tp×pp = " + s(p.dp) + "×" + s(p.tp) + "×" + s(p.pp) + " = " + s(p.gpus()) +
           " ranks, but the job has " + s(world) + " (ztune run --np " + s(p.gpus()) + ", mpirun -np " + s(p.gpus()) + ")";
  // Context parallelism: ring attention over MPI (executor/src/ring_attention.cpp),
  // the CPU backend's; the CUDA backend has no ring kernels yet.
  if (p.cp > 1 && backend == ExecBackend::cuda)
    return "$.plan.cp: " + s(p.cp) + ": context parallelism (ring attention) runs on the CPU backend only; the CUDA "
           "backend has no ring attention kernels (expected cp 1)";
  // DeepSpeed-Ulysses: the all-to-all over heads (executor/src/ulysses.cpp),
  // MPI's on the CPU backend; the CUDA backend has no all-to-all yet.
  if (p.ulysses > 1 && backend == ExecBackend::cuda)
    return "$.plan.ulysses: " + s(p.ulysses) + ": DeepSpeed-Ulysses (the all-to-all over heads) runs on the CPU "
           "backend only; the CUDA backend's communicator has no all-to-all yet (expected ulysses 1)";
  if (p.ulysses > 1) {
    if (auto why = check_plan_shape(p, m); why && why->starts_with("$.ulysses")) return in_plan_file(*why);
    if (p.sparse_attention != SparseLayout::none)
      return "$.plan.ulysses: the executor's Ulysses runs dense attention; block-sparse attention (" +
             to_string(p.sparse_attention) + ") is not run with it (expected sparse_attention none)";
    // With tp > 1 each Ulysses group is one tp rank's column (process_groups:
    // the slot after tp): its all-to-all scatters that rank's heads/tp heads,
    // as Megatron-DeepSpeed's DistributedAttention does inside a TP layer.
  }
  if (p.cp > 1) {
    if (auto why = check_plan_shape(p, m); why && why->starts_with("$.cp")) return in_plan_file(*why);
    if (p.sequence_parallel && (static_cast<long>(p.micro_batch) * m.seq_len / p.cp) % p.tp != 0)
      return "$.plan.sequence_parallel: micro_batch × seq_len / cp = " +
             s(static_cast<long>(p.micro_batch) * m.seq_len / p.cp) + " rows do not split over tp " + s(p.tp);
  }
  // Hybrid sharding: shard and replica communicators (process_groups.cpp),
  // trained and tested on the CPU backend.
  if (p.dp_shard > 0) {
    if (auto why = check_plan_shape(p, m); why && why->starts_with("$.dp_shard")) return in_plan_file(*why);
    if (backend == ExecBackend::cuda)
      return "$.plan.dp_shard: hybrid sharding runs on the CPU backend only; the CUDA backend's ZeRO-3 path is "
             "not tested with shard and replica groups (expected dp_shard omitted)";
    if (p.offload_optimizer != OffloadTarget::none || p.offload_params != OffloadTarget::none)
      return "$.plan.dp_shard: the executor's hybrid sharding keeps the states on the device; offload with "
             "dp_shard is not implemented (expected offload none)";
  }
  // 16-bit precision is 16-bit storage with fp32 master weights on either
  // backend (the CPU computes each kernel in fp32 on the stored values).
  if (p.precision != Precision::fp32 && p.onebit_adam)
    return "$.plan.precision: ztune's executor runs 1-bit Adam's compressed momentum exchange on fp32 parameters "
           "only; got \"" + to_string(p.precision) + "\" (expected \"fp32\" with onebit_adam)";
  if (p.precision != Precision::fp32 && p.offload_params == OffloadTarget::nvme)
    return "$.plan.precision: ztune's executor keeps parameters offloaded to NVMe in fp32 files; got \"" +
           to_string(p.precision) + "\" (expected \"fp32\" with offload_params nvme)";
  if (p.onebit_adam && (p.zero_stage != 0 || p.offload_optimizer != OffloadTarget::none))
    return "$.plan.onebit_adam: 1-bit Adam needs zero_stage 0 and no optimizer offload (as DeepSpeed's OnebitAdam)";
  if (p.sparse_attention != SparseLayout::none && (m.seq_len % p.sparse_block != 0))
    return "$.plan.sparse_attention.block: " + s(p.sparse_block) + " does not divide the sequence length " +
           s(m.seq_len);
  if (fused_attention(p.attention) && p.sparse_attention != SparseLayout::none)
    return "$.plan.attention: " + to_string(p.attention) + " is a dense attention kernel; block-sparse attention has its own";
  if (p.attention == AttentionKernel::eager)
    return "$.plan.attention: eager is PyTorch's separate mask, softmax and dropout kernels; ztune's executor runs its "
           "own fused softmax (use attention \"standard\", the same arithmetic)";
  if (fused_attention(p.attention) && !executor_runs_flash(m, backend))
    return "$.plan.attention: the CUDA fused attention kernels take head sizes 64 and 128; the model's is " +
           s(m.head_dim()) + " (use \"standard\")";
  // ZeRO++ across nodes reduces gradients in two levels (zeropp_reduce.hpp),
  // which needs each node to hold whole tensor-parallel groups and the same
  // number of data-parallel ranks (ranks are placed node by node).
  if (p.zeropp && ranks_per_node > 0 && world > ranks_per_node &&
      (ranks_per_node % p.tp != 0 || world % ranks_per_node != 0))
    return "$.plan.zeropp: ZeRO++ across nodes needs nodes of whole tensor-parallel groups (tp " + s(p.tp) +
           " dividing the " + s(ranks_per_node) + " ranks per node) and equal nodes (" + s(world) + " ranks)";
  // GPT-2 and Llama shapes and their mixtures (GptStage); LayerNorm there always
  // carries its shift, which a model without biases would not have.
  if (m.norm == NormKind::layernorm && !m.bias)
    return "$.model.bias: the executor's LayerNorm has a bias; a model without biases needs norm \"rmsnorm\"";
  if (m.position == PositionEmbedding::rotary && (m.rotary_dims() <= 0 || m.rotary_dims() % 2 != 0))
    return "$.model.rotary_fraction: rotary positions turn channel pairs; " + s(m.rotary_dims()) + " of the " +
           s(m.head_dim()) + " channels of a head is not a positive even number";
  if (m.windowed() && backend == ExecBackend::cuda)
    return "$.model.attention_window: the CUDA attention kernels attend the whole causal prefix; a sliding window "
           "of " + s(m.attention_window) + " tokens runs on the CPU backend only (--seq " + s(m.attention_window) +
           " is the same model)";
  if (m.position == PositionEmbedding::alibi)
    return "$.model.position_embedding: the executor's attention kernels add no ALiBi bias (learned and rotary "
           "positions only)";
  if (m.head_token_fraction != 1)
    return "$.model.head_token_fraction: the executor trains causal language models (its head predicts at every "
           "position); a masked-LM head on a share of the positions is priced, not trained";
  if (m.heads % p.tp != 0) return "$.plan.tp: " + s(p.tp) + " does not divide heads " + s(m.heads);
  if (m.kv_heads % p.tp != 0)
    return "$.plan.tp: " + s(p.tp) + " does not divide kv_heads " + s(m.kv_heads) +
           " (each tensor-parallel rank holds whole key/value heads)";
  if (m.ffn_hidden % p.tp != 0) return "$.plan.tp: " + s(p.tp) + " does not divide ffn_hidden " + s(m.ffn_hidden);
  // Every vocabulary-parallel rank needs at least one row (vocab_range).
  if (vocab_range(m.vocab, p.tp, p.tp - 1).rows <= 0)
    return "$.plan.tp: " + s(p.tp) + " vocabulary-parallel ranks leave one without rows of the " + s(m.vocab) +
           "-token vocabulary";
  // Uneven stages train (issue 19), interleaved too: the plan's own rules say
  // which partitions exist (each stage in virtual_stages equal chunks).
  if (p.pp > m.layers) return "$.plan.pp: " + s(p.pp) + " stages for " + s(m.layers) + " layers";
  if (auto why = check_plan_shape(p, m);
      why && (why->starts_with("$.stage_layers") || why->starts_with("$.chunk_layers") ||
              why->starts_with("$.virtual_stages")))
    return in_plan_file(*why);
  if (p.schedule == Schedule::interleaved && p.grad_accum % p.pp != 0)
    return "$.plan.grad_accum: interleaved 1F1B needs micro-batches (" + s(p.grad_accum) +
           ") divisible by pp (" + s(p.pp) + ")";
  if (p.partition_activations)
    return "$.plan.partition_activations: ztune's executor keeps every checkpoint whole on each tensor-parallel rank "
           "(no ZeRO-R Pa yet); use sequence_parallel, which splits them, or drop it";
  if (!p.reduce_scatter)
    return "$.plan.communication.reduce_scatter: ztune's executor reduce-scatters its ZeRO-1/2 gradients (DeepSpeed's "
           "all-reduce variant is not implemented); set it true";
  if (!p.bias_fusion)
    return "$.plan.bias_fusion: ztune's executor runs its own elementwise kernels; false is Megatron-LM's switch "
           "(--no-bias-gelu-fusion, --no-bias-dropout-fusion), not one of its own; set it true";
  // Gradients are kept and reduced in the type the plan states: fp32, or the
  // plan's own 16-bit type (the default).
  if (p.grad_reduce_dtype && *p.grad_reduce_dtype != Precision::fp32 && *p.grad_reduce_dtype != p.precision)
    return "$.plan.communication.grad_reduce_dtype: ztune's executor keeps gradients in fp32 or in the plan's own "
           "precision (\"" + to_string(p.precision) + "\"); got \"" + to_string(*p.grad_reduce_dtype) + "\"";
  if (p.param_remainders)
    return "$.plan.optimizer.param_remainders: ztune's executor keeps its fp32 master weights whole (no remainder "
           "store); expected false, or master_dtype \"bf16\" (the bf16 parameters are then the master: no copy)";
  if (p.cpu_checkpointing)
    return "$.plan.cpu_checkpointing: ztune's executor keeps its activation checkpoints in device memory (no "
           "CPU checkpointing); drop it (the same plan trains with its checkpoints on the device)";
  if (p.recompute_policy != SelectivePolicy::attention)
    return "$.plan.recompute_policy: ztune's executor's selective recomputation recomputes the attention core "
           "only; \"" + to_string(p.recompute_policy) + "\" is another engine's policy (expected \"attention\")";
  if (p.tp_comm_overlap)
    return "$.plan.communication.tp_comm_overlap: ztune's executor runs its tensor-parallel collectives between its "
           "GEMMs (no userbuffer overlap); set it false (the same sequence-parallel plan trains without it)";
  if (p.fp8 != Fp8Recipe::none)
    return "$.plan.fp8: ztune's executor has no FP8 kernels (its GEMMs run on the stored 16-bit or fp32 values); "
           "expected \"none\" (the same plan trains in " + to_string(p.precision) + ")";
  if (p.sequence_parallel && (static_cast<long>(p.micro_batch) * m.seq_len) % p.tp != 0)
    return "$.plan.sequence_parallel: micro_batch × seq_len = " + s(static_cast<long>(p.micro_batch) * m.seq_len) +
           " rows do not split over tp " + s(p.tp);
  if (p.sequences_per_step() != p.global_batch)
    return "$.plan.global_batch: expected micro_batch × grad_accum × dp";
  return std::nullopt;
}

}  // namespace ztune
