// The memory of ztune's own executor (executor/: GptStage, Backend, the
// CUDA backend's allocator), which predict_memory uses for plans on the
// executor's layout (executor_layout). Split from memory_model.cpp, which
// keeps the engines' accounting; declared in executor_memory.hpp.
#include "executor_memory.hpp"

#include <algorithm>
#include <cmath>

#include "ztune/model/op_costs.hpp"
#include "ztune/model/sparse_attention.hpp"
#include "ztune/vocab/executor_support.hpp"

namespace ztune {

// Activation bytes of one layer as ztune's executor stores them
// (executor/gpt_stage.hpp): the tensors of Korthikanti et al.'s count (LN
// inputs, QKV/FC1 inputs, Q, K, V, projection input, the MLP's two 4h tensors,
// the softmax output) in the plan's precision (the executor's storage, issue
// 24: 4 bytes for fp32, 2 for bf16/fp16), no dropout masks or dropout outputs
// (the executor has no dropout); a fused kernel's log-sum-exp in fp32. Context
// parallelism divides every term by cp, as in layer_activation_bytes (the
// executor's ring keeps its rows' probabilities against all s keys); the ring's
// and Ulysses' host-side states are fp32 (GptStage::att_dtype).
double layer_activation_bytes_executor(const Transformer& m, const Plan& p, Recompute r, double density) {
  const double s = m.seq_len, b = p.micro_batch, h = m.hidden, a = m.heads, t = p.tp;
  const double eb = bytes_of(storage_precision(p));
  const double sbh = s * b * h;
  const double sp = (p.sequence_parallel ? t : 1.0) * p.seq_split();
  if (r == Recompute::full) return eb * sbh / (p.partition_activations ? t * p.seq_split() : sp);
  const double kvd = static_cast<double>(m.kv_heads) * m.head_dim();
  const double mlp = (m.activation == Activation::swiglu ? 3.0 : 2.0) * m.ffn_hidden;
  const double outside = eb * (m.parallel_residual ? 3.0 : 4.0) * sbh / sp;  // x, (x2,) ln1, ln2
  const double inside = eb * s * b * (h + 2.0 * kvd + h + mlp) / (t * p.seq_split());
  // Ulysses (executor/ulysses_attention.hpp): the attention state also keeps
  // the gathered Q|K|V and output of the rank's heads, s × 4h/u floats (the
  // kernel's input repeats grouped-query heads), dropped with the state under
  // selective recomputation.
  const double gathered = p.ulysses > 1 && r == Recompute::none ? 4.0 * 4.0 * sbh / (t * p.ulysses) : 0.0;
  if (fused_attention(p.attention))
    return outside + inside + gathered + 4.0 * a * s * b / (t * p.seq_split());  // the lse
  const double score_bytes = p.cp > 1 || p.ulysses > 1 ? 4.0 : eb;
  const double scores = r == Recompute::selective ? 0.0 : score_bytes * a * s * s * b / (t * p.seq_split()) * density;
  return outside + inside + gathered + scores;
}

// The type ztune's executor keeps its gradients in (executor/param_store.hpp
// StoreOptions::grad_storage): the plan's reduction dtype when it states one,
// else the stored precision.
Precision executor_grad_precision(const Plan& p) { return p.grad_reduce_dtype.value_or(storage_precision(p)); }

// ztune's executor's model states (executor/param_store.hpp): parameters in the
// plan's precision, gradients in executor_grad_precision, Adam's momentum and
// variance and, beside 16-bit parameters, master weights in the plan's state
// dtypes (fp32 unless it states 16-bit ones; none when they are the
// parameters' own dtype: the step updates the parameters, OptimizerStates);
// partitioned by the ZeRO stage over the shard group.
bool executor_updates_16bit_in_place(const Plan& p) {
  return storage_precision(p) != Precision::fp32 && p.master_dtype == storage_precision(p);
}

ModelStateBytes executor_state_bytes(double psi, const Plan& p) {
  const double d = std::max(1, p.shard_group());
  const double pb = bytes_of(storage_precision(p)), gb = bytes_of(executor_grad_precision(p));
  // Adam's moments, and masters beside 16-bit parameters, at the plan's state dtypes (OptimizerStates).
  const bool own_master = storage_precision(p) != Precision::fp32 && !executor_updates_16bit_in_place(p);
  const double master = own_master ? bytes_of(p.master_dtype) : 0.0;
  const double ob = 2.0 * bytes_of(p.moments_dtype) + master;
  // ZeRO-3 under a pipeline accumulates whole gradients beside the partition
  // they are reduce-scattered into (Plan::zero3_held_through_step).
  const double grads = p.zero_stage < 2 ? gb * psi : gb * psi / d + (p.zero3_held_through_step() ? gb * psi : 0.0);
  return {p.zero_stage >= 3 ? pb * psi / d : pb * psi, grads, p.zero_stage >= 1 ? ob * psi / d : ob * psi};
}

double executor_onebit_host_bytes(double psi, int dp) {
  const double ranks = std::max(1, dp);
  const double chunk = std::ceil(std::ceil(psi / ranks) / 32.0) * 32.0;
  const double padded = chunk * ranks;
  return 4.0 * (2.0 * padded + psi + chunk) + 4.0 * 2.0 * psi;
}

// The CUDA backend's scratch beyond what the executor tracks, from its caching
// allocator and one call's at a time: the standard attention's buffers
// (kernels/cuda attention_workspace_elems: 7·n + heads·s² elements for the
// rank's n = b·s·channels, per call, cp's ring blocks of s/cp rows, Ulysses'
// whole sequence of a/u heads), in the stored type (CudaBackend's 16-bit
// instance), fp32 for the ring's and Ulysses' fp32 copies. The GEMMs and the
// fused kernel need none.
double executor_cuda_scratch(const Transformer& m, const Plan& p) {
  if (fused_attention(p.attention)) return 0;
  const double t = p.tp, u = p.ulysses, b = p.micro_batch, h = m.hidden;
  const double s = static_cast<double>(m.seq_len) / p.cp;
  const double eb = p.cp > 1 || p.ulysses > 1 ? 4.0 : bytes_of(storage_precision(p));
  return eb * (7.0 * b * s * h / (t * u) + b * m.heads / (t * u) * s * s);
}

// What the executor's backward holds beyond the stored activations, the
// logits and the buckets, at its largest moment, in bytes: the workspace
// line. Each phase is what GptStage keeps alive at once (executor/src/
// gpt_block.cpp, gpt_stage.cpp), in the storage type: the residual stream's
// incoming and outgoing gradients (d, dnext) throughout, and
//  - in a layer's backward, the attention branch's output gradient (dx2, a
//    sequential block) and the branch's own: the MLP's dg and dfc (n·F and
//    n·F_in rows at once, the activation's backward reading one and writing
//    the other), the linear layers' input gradients before they are reduced
//    (n·h), the attention's output and Q|K|V gradients (and GQA's dense
//    copies, selective recomputation's re-run probabilities and output), a
//    sequence-parallel input gathered for a GEMM (n·h); the stage's output
//    and the last stage's logits are freed by then;
//  - in the head's backward (last stage), the logits' gradient beside the
//    logits, then beside the final norm's input gradient; a recomputed layer
//    is not re-materialised yet;
//  - in the embedding's backward (first stage), every activation freed.
// Measured on CPU ranks (executor_equivalence's 73 plans, the run record's
// at_peak): the MLP phase is the peak of a layer's backward wherever F ≥ h.
// 16-bit storage on CPU ranks also widens every operand of the kernel running
// (Backend's StagedIn/StagedOut, fp32 copies): its input and output
// gradients and inputs; on a GPU every kernel runs on the stored values
// (CudaBackend's *_native hooks) but for a 16-bit embedding shard's gradient
// (fp32 atomics) and the block-sparse probabilities. The context-parallel
// ring and Ulysses attend on fp32 copies of 16-bit operands on either.
double executor_backward_workspace(const Transformer& m, const Plan& p, bool first, bool last, double density,
                                   bool gpu, const BackwardFreed& freed) {
  const double t = p.tp, h = m.hidden;
  const double n = static_cast<double>(m.seq_len) / p.seq_split() * p.micro_batch;  // a GEMM's rows (N_)
  const double ns = n / (p.sequence_parallel ? t : 1.0);                              // the rows a rank keeps
  const double eb = bytes_of(storage_precision(p));
  const bool sixteen = storage_precision(p) != Precision::fp32;
  const bool host_attention = p.cp > 1 || p.ulysses > 1;  // the ring and Ulysses (fp32 copies)
  const bool sparse = p.sparse_attention != SparseLayout::none;
  const bool fused = fused_attention(p.attention) && !sparse;
  const bool staged = sixteen && !gpu;
  // A GEMM's backward stages its input and weight, their gradients and the
  // output's gradient (only CPU ranks' 16-bit plans: the search prices GPU
  // plans, so the shapes are built only here).
  auto staged_backward = [&](const GemmShape LinearGemms::*which) {
    if (!staged) return 0.0;
    const GemmShape g = layer_linear_gemms(m, p).*which;
    return 4.0 * (2.0 * g.m * g.k + 2.0 * g.k * g.n + g.m * g.n) * g.batch;
  };
  auto stage = [&](double elems) { return staged ? 4.0 * elems : 0.0; };
  const double f = m.ffn_hidden / t, f_in = (m.activation == Activation::swiglu ? 2.0 : 1.0) * f;
  const double cl = h / t, qkvl = (h + 2.0 * m.kv_heads * m.head_dim()) / t;
  // The probabilities of the rank's heads (density: the sparse layout's share).
  const double probs = static_cast<double>(m.heads) / t * p.micro_batch * m.seq_len * m.seq_len * density;
  const double gathered = p.sequence_parallel ? n * h : 0.0;  // gather_rows of a sequence-parallel input
  // A sequential block keeps dx2 through both branches; a parallel one the
  // gathered output gradient both read.
  const double carried = m.parallel_residual ? gathered : ns * h;
  const double residual_grads = 2.0 * eb * ns * h;  // d and dnext
  // Selective recomputation re-runs the core first (GptStage::attn_backward's
  // att_tmp, atty_tmp): the unfused kernel's probabilities; under the ring and
  // Ulysses their whole fp32 state again (what selective recomputation did not
  // store: the ring's probabilities, or its log-sum-exp when fused, Ulysses'
  // gathered heads), beside the output. Left out, cp and Ulysses plans with
  // selective recomputation were predicted 9-15 % under their measured peak.
  double rerun = 0;
  if (p.recompute == Recompute::selective && host_attention) {
    const double dropped = layer_activation_bytes_executor(m, p, Recompute::none, density) -
                           layer_activation_bytes_executor(m, p, Recompute::selective, density);
    const double lse = fused ? 4.0 * m.heads * m.seq_len * p.micro_batch / (t * p.seq_split()) : 0.0;
    rerun = dropped + lse + eb * n * cl;
  } else if (p.recompute == Recompute::selective && !fused) {
    rerun = eb * (probs + n * cl);
  }
  const double gqa = m.kv_heads != m.heads ? 2.0 * n * 3.0 * cl : 0.0;  // the dense Q|K|V and its gradient
  double core = 0;  // the attention backward's widened operands
  // The ring's backward (RingAttention::backward) also holds, in fp32, the K|V
  // block it works on, the one arriving, their gradients' two, the queries'
  // gradient and a row term per head (D_i); Ulysses works in host vectors.
  if (host_attention)
    core = (sixteen ? 4.0 * 8.0 * n * cl : 0.0) + (p.cp > 1 ? 4.0 * (9.0 * n * cl + n * m.heads / t) : 0.0);
  else if (staged) core = 4.0 * (8.0 * n * cl + (fused ? 0.0 : probs));
  else if (gpu && sparse) core = 4.0 * probs;
  const double layer = std::max({
      eb * (carried + gathered + n * f) + staged_backward(&LinearGemms::fc2),             // the MLP's output GEMM
      eb * (carried + n * f + n * f_in) + stage(n * (2.0 * f_in + f)),                    // its activation
      eb * (carried + n * f_in + n * h + gathered) + staged_backward(&LinearGemms::fc1),  // its input GEMM
      eb * (carried + ns * h) + stage(3.0 * ns * h),                                      // a norm
      eb * (carried + gathered + n * cl) + staged_backward(&LinearGemms::proj),           // the projection
      eb * (carried + n * cl + n * qkvl + gqa) + rerun + core,                            // the attention core
      eb * (carried + n * qkvl + n * h + gathered) + staged_backward(&LinearGemms::qkv),  // the Q|K|V GEMM
  });
  double peak = residual_grads + layer - freed.logits - freed.output;
  if (last) {
    // The logits' gradient is the logits' size and type (freed.logits).
    const double dlogits = freed.logits, logits = freed.logits / eb;
    const double loss = dlogits + stage(2.0 * logits);
    // Each of the head's two GEMMs stages the logits' gradient, the table (or
    // its gradient) and the final norm's output (or its gradient).
    const double gemm = dlogits + eb * (n * h + gathered) +
                        stage(logits + h * m.vocab / t + n * m.head_token_fraction * h) - freed.logits;
    peak = std::max(peak, residual_grads + std::max(loss, gemm) - freed.working);
  }
  if (first) {
    double embedding = staged ? 4.0 * (m.vocab * h / t + n * h) : 0.0;
    if (gpu && executor_grad_precision(p) != Precision::fp32) embedding = 4.0 * m.vocab * h / t;
    peak = std::max(peak, residual_grads + embedding - freed.stored);
  }
  return std::max(0.0, peak);
}

}  // namespace ztune
