#include "ztune/model/memory_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "ztune/vocab/executor_support.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/onebit_adam.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/vocab/pipeline_schedule.hpp"
#include "ztune/model/sparse_attention.hpp"
#include "ztune/model/zeropp.hpp"
#include "executor_memory.hpp"

namespace ztune {

namespace {

// Runtime constants (assumptions until calibration measures them): the CUDA
// context with cuBLAS/cuDNN handles, NCCL's per-communicator buffers
// (NCCL_BUFFSIZE 4 MiB × channels × send/recv), cuBLAS workspace, and the
// caching allocator's fragmentation as a fraction of the dynamic allocations.
constexpr double kCudaContextBytes = 1.0e9;
constexpr double kNcclBytesPerCommunicator = 0.25e9;
constexpr double kCublasWorkspaceBytes = 32.0 * 1024 * 1024;
constexpr double kFragmentation = 0.10;
// DeepSpeed's NVMe swap buffers: pinned host buffers per GPU (aio buffer_count
// 4-5 of up to 1e8 elements).
constexpr double kSwapBufferElems = 1e8;
constexpr double kSwapBuffers = 4;

std::size_t idx(MemLine l) { return static_cast<std::size_t>(l); }

}  // namespace

bool deepspeed_runs_bf16_optimizer(Precision precision, int pp, int zero_stage) {
  return precision == Precision::bf16 && pp > 1 && zero_stage == 0;
}

OptimizerDtypes optimizer_dtypes(const Plan& p) {
  // bf16 masters beside bf16 parameters are Apex's DistributedFusedAdam under
  // NeMo, which keeps none (store_params false). fp16 masters are Megatron-Core's
  // precision-aware optimizer, whose Transformer Engine FusedAdam keeps them as
  // its own copy whatever the parameters' dtype (master_weights=True,
  // master_weight_dtype = --main-params-dtype).
  const bool in_params =
      storage_precision(p) == Precision::bf16 && p.master_dtype == Precision::bf16 && !p.param_remainders;
  return {p.master_dtype, p.moments_dtype, p.param_remainders, in_params};
}

OptimizerDtypes optimizer_dtypes_kept(const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  OptimizerDtypes d = optimizer_dtypes(p);
  if (executor_layout(c, hw) && executor_updates_16bit_in_place(p)) d.in_params = true;
  return d;
}

double adam_state_bytes(OptimizerDtypes d) {
  const double master = d.remainders ? 2.0 : d.in_params ? 0.0 : bytes_of(d.master);
  return master + 2.0 * bytes_of(d.moments);
}

ModelStateBytes model_state_bytes(double psi, int dp, int zero_stage, StateAccounting a, Precision precision, int pp,
                                  std::optional<Precision> grad_reduce, OptimizerDtypes states) {
  const double n = std::max(1, dp);
  const double k = adam_state_bytes(states);
  ModelStateBytes b;
  switch (a) {
    case StateAccounting::paper:
      b.params = zero_stage >= 3 ? 2.0 * psi / n : 2.0 * psi;
      b.grads = zero_stage >= 2 ? 2.0 * psi / n : 2.0 * psi;
      b.optimizer = zero_stage >= 1 ? k * psi / n : k * psi;
      break;
    case StateAccounting::deepspeed:
      if (deepspeed_runs_bf16_optimizer(precision, pp, zero_stage)) {
        // BF16_Optimizer (bf16_optimizer.py): 16-bit params and gradients, a
        // full fp32 gradient buffer (the one reduced), and the fp32 master,
        // momentum and variance of this rank's data-parallel partition only.
        b = {2.0 * psi, 6.0 * psi, k * psi / n};
      } else if (zero_stage == 0) {
        b = {2.0 * psi, 2.0 * psi, k * psi};  // FP16_Optimizer (DDP_BFLOAT16 for bf16): fp32 states whole
      } else if (zero_stage <= 2) {
        // 16-bit params whole; 16-bit + fp32 gradient partitions; fp32 states partitioned.
        b = {2.0 * psi, 6.0 * psi / n, k * psi / n};
      } else {
        b = {2.0 * psi / n, 4.0 * psi / n, k * psi / n};
      }
      break;
    case StateAccounting::megatron: {
      // fp16 keeps 16-bit main gradients and an fp32 copy of the optimizer's
      // shard of them; bf16 (and fp32) fp32 main gradients (memory_model.hpp).
      // A stated reduction dtype is the main_grad buffer's: fp32 under
      // --accumulate-allreduce-grads-in-fp32, 16-bit under --grad-reduce-in-bf16
      // (whose distributed optimizer then keeps an fp32 copy of its shard).
      // A precision-aware optimizer reads the 16-bit shard itself (Megatron-
      // Core's TE FusedAdam with decoupled gradients; Apex
      // DistributedFusedAdam with dtype = grad_sync_dtype): no copy is kept.
      const bool grads16 = grad_reduce ? *grad_reduce != Precision::fp32 : precision == Precision::fp16;
      const double grad_bytes = grads16 ? 2.0 : 4.0;
      const double state_bytes = k + (grads16 && states.fp32() ? 4.0 : 0.0);
      b.params = zero_stage >= 3 ? 2.0 * psi / n : 2.0 * psi;
      b.grads = zero_stage >= 2 ? grad_bytes * psi / n : grad_bytes * psi;
      b.optimizer = zero_stage >= 1 ? state_bytes * psi / n : state_bytes * psi;
      break;
    }
  }
  return b;
}

double attention_score_bytes(const Transformer& m) {
  // Korthikanti et al. 2022 §4.1: the softmax output (2), the dropout mask (1)
  // and the dropout output (2) per score. Without dropout the product with V
  // reads the softmax output itself: 2.
  return m.has_dropout() ? 5.0 : 2.0;
}

double layer_activation_bytes(const Transformer& m, int micro_batch, int tp, bool sequence_parallel, Recompute r,
                              double attention_density, AttentionKernel kernel, int cp) {
  // Context parallelism: every tensor below holds s/cp of the sequence's rows
  // (the scores: s/cp query rows × s keys), so the whole count divides by cp.
  if (cp > 1)
    return layer_activation_bytes(m, micro_batch, tp, sequence_parallel, r, attention_density, kernel, 1) / cp;
  const double s = m.seq_len, b = micro_batch, h = m.hidden, a = m.heads, t = tp;
  const double sbh = s * b * h;
  const double sp = sequence_parallel ? t : 1.0;
  if (r == Recompute::full) return 2.0 * sbh / sp;  // only the layer input
  const double kvd = static_cast<double>(m.kv_heads) * m.head_dim();
  const double mlp = (m.activation == Activation::swiglu ? 6.0 : 4.0) * m.ffn_hidden;
  // Outside the tensor-parallel region: 2 norm inputs (4), QKV and FC1 inputs
  // (2 + 2), two dropout masks (1 + 1) = 10·s·b·h; divided by t only with SP.
  // Parallel blocks (GPT-J/NeoX) feed both norms the layer input: one norm input fewer.
  // Without dropout (m.dropout 0) the masks are not kept.
  const double masks = m.has_dropout() ? 2.0 : 0.0;
  const double outside = ((m.parallel_residual ? 6.0 : 8.0) + masks) * sbh / sp;
  // Inside: Q, K, V, projection input and the MLP's stored tensors (24·s·b·h for GPT).
  const double inside = s * b * (2.0 * h + 4.0 * kvd + 2.0 * h + mlp) / t;
  // Attention scores: softmax output (2), dropout mask (1), dropout output (2);
  // a flash kernel keeps the fp32 log-sum-exp per row (its dropout mask is
  // regenerated from the RNG state in backward).
  if (fused_attention(kernel)) return outside + inside + 4.0 * a * s * b / t;
  const double scores =
      r == Recompute::selective ? 0.0 : attention_score_bytes(m) * a * s * s * b / t * attention_density;
  return outside + inside + scores;
}

namespace {

// What the engines' own selective policies keep of a layer (SelectivePolicy),
// 16-bit, the tensors they name: the block's input, which the recomputation
// starts from (÷t only with SP), and the outputs of the operations the policy
// saves. alternate_mm (torchtitan op SAC): wq, wv, the attention output, w1
// and, with a gated MLP, w2; the attention kernel's own state (a fused
// kernel's log-sum-exp, else the probabilities, mask and dropout output of
// Korthikanti's count) stays, as its output is not recomputed. mlp_in
// (MaxText save_dot_except_mlpwi): q, k, v, the out and MLP-out projections;
// the attention core is recomputed, so nothing of it is kept. dots (JAX
// dots_saveable): every matmul's output, the MLP input projections' too.
double selective_policy_bytes(const Transformer& m, const Plan& p, bool split) {
  const double s = m.seq_len, b = p.micro_batch, h = m.hidden, a = m.heads, t = p.tp;
  const double kvd = static_cast<double>(m.kv_heads) * m.head_dim();
  const double input = 2.0 * s * b * h / (split ? t : 1.0);
  double inside = 0;
  switch (p.recompute_policy) {
    case SelectivePolicy::attention:         // Korthikanti's count, layer_activation_bytes
    case SelectivePolicy::alternate_layers: break;  // a k-th full, the rest none: layer_activation_bytes
    case SelectivePolicy::alternate_mm: {
      const bool gated = m.activation == Activation::swiglu;
      inside = s * b * (2.0 * h + 2.0 * kvd + 2.0 * h + 2.0 * m.ffn_hidden + (gated ? 2.0 * h : 0.0)) / t;
      inside += fused_attention(p.attention) ? 4.0 * a * s * b / t
                                             : attention_score_bytes(m) * a * s * s * b / t * attention_density(m, p);
      break;
    }
    case SelectivePolicy::mlp_in:
    case SelectivePolicy::dots: {
      // q, k, v, the out and MLP-out projections; dots also keeps the MLP's
      // input projections' outputs (gate and up with SwiGLU).
      const double f_in = m.activation == Activation::swiglu ? 2.0 * m.ffn_hidden : m.ffn_hidden;
      const double mlp_in = p.recompute_policy == SelectivePolicy::dots ? 2.0 * f_in : 0.0;
      inside = s * b * (2.0 * h + 4.0 * kvd + 2.0 * h + 2.0 * h + mlp_in) / t;
      break;
    }
  }
  return (input + inside) / p.seq_split();
}

}  // namespace

double layer_activation_bytes(const Transformer& m, const Plan& p, Recompute r) {
  // ZeRO-R's Pa keeps 1/t of each saved layer input (Rajbhandari et al. 2020,
  // §6.1: the checkpoints shrink by the model-parallel degree), as SP does.
  const bool split = p.sequence_parallel || (p.partition_activations && r == Recompute::full);
  if (r == Recompute::selective && p.recompute_policy == SelectivePolicy::alternate_layers) {
    // Every k-th layer as full recomputation keeps it, the others whole.
    const double share = whole_layer_recompute_share(p);
    return share * layer_activation_bytes(m, p, Recompute::full) +
           (1.0 - share) * layer_activation_bytes(m, p, Recompute::none);
  }
  if (r == Recompute::selective && p.recompute_policy != SelectivePolicy::attention)
    return selective_policy_bytes(m, p, split);
  // DeepSpeed-Ulysses divides the same count by u (Jacobs et al. 2023, §3):
  // every tensor outside attention holds s/u tokens; Q, K, V and the
  // attention output after the all-to-all hold s tokens of h/u, the same
  // s·h/u elements; the scores are a/u heads of s × s. So it is cp's division.
  return layer_activation_bytes(m, p.micro_batch, p.tp, split, r, attention_density(m, p), p.attention,
                                p.seq_split());
}

double microbatches_in_flight(const Plan& p) {
  const double m = p.grad_accum;
  if (p.pp <= 1) return 1.0;
  switch (p.schedule) {
    case Schedule::gpipe: return m;
    case Schedule::one_f_one_b: return std::min<double>(p.pp, m);
    case Schedule::interleaved: {
      // Korthikanti §4.2.3: the first stage holds p micro-batches × (1 + (p−1)/(p·v)).
      const double pp = p.pp;
      return std::min(m, pp * (1.0 + (pp - 1.0) / (pp * p.virtual_stages)));
    }
  }
  return 1.0;
}

namespace {

struct StageMemory {
  std::array<double, static_cast<std::size_t>(MemLine::count)> gpu{};
  double total = 0;
};

// A stage's stored layer activations: `recomputed` of its `layers` keep
// `own` bytes (their recomputation's), the others `whole`, for each
// micro-batch in flight (Megatron's block method leaves the rest whole).
// Every layer recomputed is written layers × in_flight × own, the product
// the model used before the block method, so its predictions stay the same
// to the bit.
double stored_layers_bytes(double layers, double recomputed, double in_flight, double own, double whole) {
  return recomputed == layers ? layers * in_flight * own
                              : in_flight * (recomputed * own + (layers - recomputed) * whole);
}

// Whether a recomputed layer's whole activations come on top of what the
// stage stores: with every layer recomputed (or torchtitan's every k-th
// one), one is re-materialised at a time beside the checkpoints. Megatron's
// block method recomputes the first layers of each chunk, which backward
// reaches last: the chunk's whole layers, freed by then, were the larger
// working set (measured on the executor: tiny at 512 tokens, 1 of 4 layers
// recomputed, 62.2 MiB; +18 % when counted on top).
bool recompute_working_layer(const Plan& p, double recomputed, double layers) {
  return whole_layer_recompute_share(p) > 0 && recomputed == layers;
}

// The lines of ztune's own executor (on CPU ranks measured with
// exact allocation tracking, the first calibration point of the memory model,
// issue 8). Without the CUDA runtime and the allocator's fragmentation, which
// stage_memory adds on a GPU (on CPU ranks it tracks requested bytes).
// Gradients reduced in place for ZeRO 0/1 (no buckets), a full flat gradient plus the owned
// partition for ZeRO 2/3 reduce-scatter, the activations and gradients
// between pipeline stages being received or sent, the logits, and a flat
// parameter-sized workspace used at the optimizer step, after activations are
// freed, so it adds to the peak only where it exceeds them; the backward's
// temporaries (executor_backward_workspace) beside the rest.
void executor_lines(const Transformer& m, const Plan& p, double psi, double layers, double in_flight,
                    double layer_in_flight, double density, bool first, bool last, bool gpu, double bucket, double qgz, double output,
                    StageMemory& sm) {
  const double eb = bytes_of(storage_precision(p)), gb = bytes_of(executor_grad_precision(p));
  // Megatron's block method: the stage's other layers keep every activation.
  const double recomputed = recomputed_layers(p, static_cast<int>(layers));
  const double whole = layer_activation_bytes_executor(m, p, Recompute::none, density);
  const double own = layer_activation_bytes_executor(m, p, p.recompute, density);
  double act = stored_layers_bytes(layers, recomputed, layer_in_flight, own, whole);
  const double working = recompute_working_layer(p, recomputed, layers) ? whole : 0.0;
  // Each model chunk's output of every micro-batch in flight (in_flight
  // counts stages' worth of chunks).
  act += working + in_flight * p.model_chunks() * output;
  sm.gpu[idx(MemLine::activations)] = act;
  double buckets = 0;
  if (p.dp_cp() > 1 && p.zero3_held_through_step()) {
    // ZeRO-3 under a pipeline reduce-scatters each bucket of the whole
    // gradients once, in the step's last backward: the pieces arriving, at
    // most kExecutorReductionsInFlight + 1 at once (ParamStore::
    // launch_reduction). By then only that micro-batch's activations are
    // left of the in_flight the stage held at its peak, and of those the
    // share of the buckets already through their backward is freed too (as
    // for ZeRO-2/3 below): the pieces count where they exceed what was freed.
    const double inflight = static_cast<double>(kExecutorReductionsInFlight) + 1.0;
    const double done = std::min(psi, inflight * bucket);
    const double last_micro = act / std::max(1.0, in_flight);
    buckets += std::max(0.0, gb * done / p.shard_group() - (act - last_micro) - last_micro * done / psi);
  } else if (p.dp_cp() > 1 && p.zero_stage >= 2) {
    // ZeRO-2/3: a bucket's full gradients from its first gradient, and its
    // reduce-scattered piece from its reduction's start, until the reduction is
    // retired: at most kExecutorReductionsInFlight running beside the one being
    // filled with overlap_comm; without it every bucket is reduced at the end
    // of the backward. The largest of two moments: the backward's start (the
    // first bucket filling beside every activation), and once J buckets'
    // reductions have started (J = kExecutorReductionsInFlight, or all of
    // them), each with its piece, the next one filling, beside the
    // activations of the part of the stage not yet through (1 − J·B/Ψ). One
    // bucket for the stage is reduced when the whole backward is through.
    // Tied embeddings on one stage: the head's backward starts the word
    // embedding's bucket, which is reduced after the embedding's, last.
    const double per_elem = gb * (1.0 + 1.0 / p.shard_group());
    const double filling = std::min(bucket, psi);
    const double done =
        p.overlap_comm ? std::min(psi, static_cast<double>(kExecutorReductionsInFlight) * bucket) : psi;
    const double word =
        first && last && m.tied_embeddings && done < psi ? std::min(psi - done, m.embedding_params() / p.tp) : 0.0;
    const double later = per_elem * done + gb * ((done < psi ? filling : 0.0) + word) - act * done / psi;
    buckets += std::max(gb * (filling + word), later);
  }
  if (p.pp > 1) {
    // Between pipeline stages (Trainer::run_pipeline): the activation or
    // gradient being received, and the sends not yet matched by the peer's
    // receive. Under 1F1B a stage runs at most one step ahead of a peer it
    // sends to (its backward waits for that peer's gradient, the peer's for
    // its activation), so at most two of its sends are unmatched on each link
    // it sends on: the first stage only forward, the last only back, the
    // others and every stage of an interleaved pipeline (the wrap-around
    // between the last stage and the first) both. GPipe's forwards wait for
    // nothing downstream: every micro-batch's activation may be in flight.
    // Measured on CPU ranks (executor_equivalence, the run record's at_peak):
    // 2-3 buffers at the first stage's peak with 1F1B, 4 interleaved.
    const double links = p.model_chunks() > 1 ? 2.0 : (first ? 0.0 : 1.0) + (last ? 0.0 : 1.0);
    const double held = p.schedule == Schedule::gpipe ? p.grad_accum + 1.0
                                                      : std::min(p.grad_accum + 1.0, 1.0 + 2.0 * links);
    buckets += held * output;  // each an activation (or its gradient) the size of the stage's output
  }
  // The logits in the storage type and three fp32 rows (the cross-entropy's
  // row max, row sum and losses) of every micro-batch whose forward is done
  // and backward not begun (GptStage::Acts: GPipe's whole step, 1F1B's one),
  // and ∂L/∂loss (dloss_, one row).
  const double rows = static_cast<double>(m.seq_len) / p.seq_split() * m.head_token_fraction * p.micro_batch;
  const double logits = last ? eb * rows * m.vocab / p.tp : 0.0;
  const double waiting = p.pp > 1 && p.schedule == Schedule::gpipe ? p.grad_accum : 1.0;
  sm.gpu[idx(MemLine::logits)] = last ? waiting * (logits + 3.0 * 4.0 * rows) + 4.0 * rows : 0.0;
  // ZeRO++'s two-level qgZ (executor_qgz) reduces a bucket once the backward
  // has been through its units: the stage's last ones, for the first bucket
  // (units are grouped in forward order). Their activations, the logits and
  // the backward's temporaries are free by then; with one bucket for the stage the
  // whole backward is done and the gathered weights are released too. The
  // larger of the two phases counts.
  const double backward =
      executor_backward_workspace(m, p, first, last, density, gpu, {act, working, logits, output});
  if (qgz > 0) {
    const bool whole_stage = bucket >= psi;
    const double bucket_layers = std::ceil(bucket / (m.params_per_layer() / p.tp));
    const double freed = (whole_stage ? act + sm.gpu[idx(MemLine::zero3_gathered)]
                                      : act * std::min(1.0, bucket_layers / std::max(1.0, layers))) +
                         sm.gpu[idx(MemLine::logits)] + backward;
    buckets += std::max(0.0, qgz - freed);
  }
  sm.gpu[idx(MemLine::comm_buckets)] = buckets;
  const double transient = act + buckets + sm.gpu[idx(MemLine::logits)];
  // 16-bit optimizer states are widened at the step a chunk at a time beside
  // that workspace (Backend::adamw_fused_impl, staged_adam_chunk), unless the
  // backend updates them at their own dtypes (CUDA's fused kernel).
  const ExecBackend backend = gpu ? ExecBackend::cuda : ExecBackend::cpu;
  const bool master16 = storage_precision(p) != Precision::fp32 && p.master_dtype != Precision::fp32;
  const bool staged = !adam_states_native(backend, storage_precision(p), master16 ? p.master_dtype : Precision::fp32,
                                          p.moments_dtype);
  const double states16 = staged ? (master16 ? 1.0 : 0.0) + (p.moments_dtype != Precision::fp32 ? 2.0 : 0.0) : 0.0;
  const double part = p.zero_stage >= 1 ? psi / p.shard_group() : psi;
  const double chunk = static_cast<double>(staged_adam_chunk(backend));
  // The step's own: Backend::adamw_fused_impl widens each span's 16-bit
  // gradient to fp32 (a span is the whole replicated buffer at ZeRO-0, a
  // bucket's owned piece above), one span at a time. fp32 gradients are read
  // in place (their clipping and unscaling applied before, scale_grads). With
  // optimizer offload the states' host path is counted as a flat
  // parameter-sized buffer, as before.
  const bool grads16 = executor_grad_precision(p) != Precision::fp32;
  const double span = p.zero_stage == 0 ? psi : std::min(part, std::ceil(bucket / p.shard_group()));
  const double staged_grads = p.offload_optimizer != OffloadTarget::none ? psi : (grads16 ? span : 0.0);
  const double step = 4.0 * staged_grads + 4.0 * std::min(part, chunk) * states16;
  // ParamStore::initialise builds each bucket whole in fp32 before keeping
  // this rank's share: before any activation, beside the model states.
  const double init = 4.0 * bucket;
  sm.gpu[idx(MemLine::workspace)] = std::max({backward, step - transient, init - transient});
  sm.gpu[idx(MemLine::runtime)] = 0;
  sm.gpu[idx(MemLine::fragmentation)] = 0;
}

}  // namespace

double fp8_activation_saving(const Transformer& m, const Plan& p, Fp8Library lib) {
  if (p.fp8 == Fp8Recipe::none || lib != Fp8Library::transformer_engine) return 0;
  const double eb = bytes_of(storage_precision(p));
  const double tokens = static_cast<double>(m.seq_len) / p.seq_split() * p.micro_batch;
  const double sp = p.sequence_parallel ? p.tp : 1.0;
  // QKV's and FC1's inputs outside the tensor-parallel region (÷t with SP)
  // and FC2's (ffn/t) inside it: kept in FP8 instead of 16 bits. The
  // projection's input is the attention output: the standard core frees
  // it, so its FP8 copy saves the same; a fused attention kernel keeps it
  // for its own backward (flash-attn and cuDNN save q, k, v and out), so
  // the projection's FP8 copy is a byte more per element.
  const double proj = (fused_attention(p.attention) ? -1.0 : eb - 1.0) * tokens * m.hidden / p.tp;
  return (eb - 1.0) * tokens * (2.0 * m.hidden / sp + static_cast<double>(m.ffn_hidden) / p.tp) + proj;
}

double fp8_weight_copy_bytes(const Transformer& m, const Plan& p, Fp8Library lib, double stage_layers) {
  if (p.fp8 == Fp8Recipe::none || lib == Fp8Library::none) return 0;
  const double layer = linear_weight_elements(layer_linear_gemms(m, p));
  // Transformer Engine caches an FP8 copy of every linear weight and of its
  // transpose across the step (1 + 1 bytes each, the stage's layers); with
  // FP8 parameters (fp8_param_gather) the weight is its own FP8 copy and the
  // transpose alone is cached. torchao casts them at each use, one layer's
  // live at a time.
  if (lib != Fp8Library::transformer_engine) return 2.0 * layer;
  return (p.fp8_param_gather ? 1.0 : 2.0) * layer * stage_layers;
}

namespace {

// The dynamic lines of a GPU engine's stage (Megatron-LM, DeepSpeed, FSDP:
// storage in the training precision; GPUs only, CPU ranks run the executor):
// activations, communication buffers, workspace and logits. ztune's executor
// has its own (executor_lines).
void engine_lines(const Transformer& m, const Plan& p, const HardwareProfile& hw, double psi,
                  double layers, double in_flight, double layer_in_flight, double density, bool first, bool last, double sign_buffer_bytes,
                  StageMemory& sm) {
  const double t = p.tp;
  const double eb = bytes_of(storage_precision(p));
  // Megatron's unfused softmax chain (op_costs megatron_softmax_fallback)
  // keeps the probabilities its softmax backward reads in fp32: 2 bytes per
  // score more than Korthikanti's 16-bit count, wherever the scores are stored.
  const double fallback = megatron_softmax_fallback(m, p, hw) ? 2.0 * attention_score_elements(m, p) : 0.0;
  // ZeRO-R CPU checkpointing: the checkpoints live on the host (predict_memory
  // counts them there); the GPU holds the one copied back for its layer's
  // recomputation.
  // Megatron's block method (recomputed_layers) keeps the stage's other
  // layers whole.
  const double recomputed = recomputed_layers(p, static_cast<int>(layers));
  // Transformer Engine's FP8 linears keep their inputs for wgrad as FP8 (1
  // byte) where Korthikanti's count has them 16-bit: QKV's and FC1's (the
  // norms' outputs; the norms' own 16-bit inputs stay), the projection's
  // and FC2's (FC1's 16-bit pre-activation stays beside it). Full
  // recomputation keeps the layer input only.
  const double fp8_saved = fp8_activation_saving(m, p, hw.engine.fp8);
  const double own = layer_activation_bytes(m, p, p.recompute) + (p.recompute == Recompute::none ? fallback : 0.0) -
                     (p.recompute == Recompute::full ? 0.0 : fp8_saved);
  const double whole = layer_activation_bytes(m, p, Recompute::none) + fallback - fp8_saved;
  double act = p.cpu_checkpointing ? own : stored_layers_bytes(layers, recomputed, layer_in_flight, own, whole);
  // Full recomputation re-materialises one layer's activations at a time.
  // The layer being recomputed holds its whole activations while its backward runs.
  const bool working = recompute_working_layer(p, recomputed, layers);
  if (working) act += whole;
  // Embedding output dropout mask (Korthikanti: s·b·h·p/t with SP), of this
  // rank's s/cp rows; none without dropout.
  const double sbh = static_cast<double>(m.seq_len) / p.seq_split() * p.micro_batch * m.hidden;
  if (first && m.has_dropout()) act += sbh / (p.sequence_parallel ? t : 1.0) * in_flight;
  sm.gpu[idx(MemLine::activations)] = act;

  // Communication buckets (DeepSpeed reduce_bucket_size / allgather_bucket_size,
  // in elements of 16-bit gradients; the reduce bucket is doubled with overlap_comm).
  // An engine that reduces and gathers inside its contiguous gradient and
  // parameter buffers (Megatron-Core's DDP and distributed optimizer, ZeRO
  // 0/1) has no bucket beside them (EngineProfile::dp_buffers_in_place).
  if (p.dp_cp() > 1) {
    const bool in_place = hw.engine.dp_buffers_in_place && p.zero_stage <= 1;
    const double overlap = p.overlap_comm ? 2.0 : 1.0;
    double buckets = in_place ? 0.0 : eb * std::min(p.reduce_bucket_elems, psi) * overlap;
    if (!in_place && (p.zero_stage == 1 || p.zero_stage == 2)) buckets += eb * std::min(p.allgather_bucket_elems, psi);
    buckets += sign_buffer_bytes;  // 1-bit Adam's packed sign buffers
    sm.gpu[idx(MemLine::comm_buckets)] = buckets;
  }

  // Workspace: cuBLAS plus the largest transient gradient buffers of one layer
  // (attention-score gradient, FC1 output gradient), two of them live. A flash
  // kernel's score gradient stays on chip; its backward accumulates dQ in fp32
  // (FlashAttention-2's dq_accum, s·b·h/t floats).
  // With context parallelism a rank's rows are s/cp, and the score gradient
  // is one ring block's, (s/cp)² per head.
  // With Ulysses the rows outside attention are s/u, and the score gradient
  // is a/u heads of the whole s × s.
  const double s_local = static_cast<double>(m.seq_len) / p.seq_split();
  const double sbh_local = s_local * p.micro_batch * m.hidden / t;
  const double s_rows = static_cast<double>(m.seq_len) / p.cp;  // query rows (and keys) of one score block
  const double scores = fused_attention(p.attention)
                            ? 4.0 * sbh_local
                            : static_cast<double>(p.micro_batch) * m.heads / (t * p.ulysses) * s_rows * s_rows * eb *
                                  density;
  const double f_in = m.activation == Activation::swiglu ? 2.0 * m.ffn_hidden : m.ffn_hidden;
  const double fc1 = s_local * p.micro_batch * f_in / t * eb;
  sm.gpu[idx(MemLine::workspace)] = kCublasWorkspaceBytes + 2.0 * std::max(scores, fc1);
  sm.gpu[idx(MemLine::workspace)] += fp8_weight_copy_bytes(m, p, hw.engine.fp8, layers);

  // Logits: what the engine's loss holds at its peak (op_costs.hpp
  // cross_entropy_cost: the 16-bit logits and an fp32 copy in Megatron's
  // vocab-parallel cross entropy; three fp32 tensors in PyTorch's).
  if (last)
    sm.gpu[idx(MemLine::logits)] = s_local * m.head_token_fraction * p.micro_batch * m.vocab / t *
                                   cross_entropy_cost(hw.engine.cross_entropy, eb).peak_bytes;
  // The layer a whole-layer recomputation re-materialises and the logits are
  // never live together where each micro-batch's backward follows its own
  // forward (1F1B, or no pipeline): the loss's backward frees the logits and
  // its fp32 softmax before the first layer is recomputed. The stage's peak is
  // the stored checkpoints plus the larger of the two: the activations line
  // (Korthikanti's count with the working set) stands, and the logits line
  // keeps only what the logits add above the working set they take turns
  // with. Interleaved and GPipe schedules run other forwards between a
  // micro-batch's loss and its backward: both are counted whole there.
  const bool own_backward_next = p.pp == 1 || p.schedule == Schedule::one_f_one_b;
  if (last && own_backward_next && working) sm.gpu[idx(MemLine::logits)] = std::max(0.0, sm.gpu[idx(MemLine::logits)] - whole);

  // The context-parallel ring's buffers: the K/V chunk in use and the one
  // arriving (forward), and in backward also their dK/dV: 2 × 4 chunks of
  // b·(s/cp)·kv_dim/t elements (Megatron-Core's p2p double buffering).
  if (p.cp > 1) {
    const double kv_chunk = s_local * p.micro_batch * static_cast<double>(m.kv_heads) * m.head_dim() / t * eb;
    sm.gpu[idx(MemLine::comm_buckets)] += 2.0 * 4.0 * kv_chunk;
  }

  // DeepSpeed-Ulysses: the all-to-all's contiguous send copies of Q, K and V
  // (single_all_to_all transposes each [s/u, heads] tensor before sending):
  // b·(s/u)·(h + 2·kv_dim)/t elements, live around the attention core.
  if (p.ulysses > 1)
    sm.gpu[idx(MemLine::comm_buckets)] +=
        s_local * p.micro_batch * (m.hidden + 2.0 * static_cast<double>(m.kv_heads) * m.head_dim()) / t * eb;
}

// One stage's lines: stage `stage` of p.pp, holding `stage_layers` layers
// (the embedding on stage 0, the head on the last).
StageMemory stage_memory(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw, int stage,
                         int stage_layers, const MemoryOptions& opt) {
  StageMemory sm;
  const bool first = stage == 0;
  const bool last = stage == p.pp - 1;
  const double density = attention_density(m, p);
  const double t = p.tp;
  const Precision storage = storage_precision(p);
  const double eb = bytes_of(storage);
  const double layers = stage_layers;
  const double word = static_cast<double>(m.vocab) * m.hidden / t;
  const double positions = m.embedding_params() - static_cast<double>(m.vocab) * m.hidden;
  const double final_norm = m.head_params() - (m.tied_embeddings ? 0.0 : static_cast<double>(m.vocab) * m.hidden);
  const double layer_params = m.params_per_layer() / t;
  double psi = layers * layer_params;
  if (first) psi += word + positions;
  if (last) psi += final_norm + (m.tied_embeddings ? (first ? 0.0 : word) : word);

  // Context-parallel ranks hold the same weights: ZeRO partitions over dp × cp
  // (Megatron-Core's distributed optimizer shards over its data-parallel group
  // with context parallelism, dp × cp ranks; parameters are not divided by cp).
  // Hybrid sharding (plan.dp_shard): ZeRO-3's partitions over the shard group
  // of dp_shard ranks, replicated across the dp × cp / dp_shard groups.
  ModelStateBytes st = model_state_bytes(psi, p.shard_group(), p.zero_stage, opt.accounting, p.precision, p.pp,
                                         p.grad_reduce_dtype, optimizer_dtypes(p));
  const bool executor = executor_layout(c, hw);
  if (executor) {
    st = executor_state_bytes(psi, p);
  } else if (storage == Precision::fp32) {
    // fp32 storage (fp32 training): 4-byte parameters and gradients, and Adam
    // keeps only momentum and variance (8 bytes in fp32) since the parameters
    // are already the fp32 master copy. Partitioning follows the same ZeRO stages.
    const double n = std::max(1, p.shard_group());
    const double moments = 2.0 * bytes_of(p.moments_dtype);
    st.params = p.zero_stage >= 3 ? 4.0 * psi / n : 4.0 * psi;
    st.grads = p.zero_stage >= 2 ? 4.0 * psi / n : 4.0 * psi;
    st.optimizer = p.zero_stage >= 1 ? moments * psi / n : moments * psi;
  }
  // DeepSpeed's ZeRO-1 (stage_1_and_2.py, partition_gradients false) reduces
  // and frees a parameter's gradient only at the accumulation boundary
  // (reduce_ready_partitions_and_remove_grads), or in the backward's epilogue
  // without overlap_comm: until then every 16-bit gradient is whole, beside the
  // averaged partition it is reduced into (2Ψ/N). Its estimator
  // (estimate_zero2_model_states_mem_needs, which model_state_bytes follows)
  // counts stage 2's partitions for it: 12 GiB short for a 7B model.
  const bool ds_stage1_whole_grads = opt.accounting == StateAccounting::deepspeed && !executor &&
                                     p.zero_stage == 1 && storage != Precision::fp32 &&
                                     !deepspeed_runs_bf16_optimizer(p.precision, p.pp, p.zero_stage) &&
                                     (p.grad_accum > 1 || !p.overlap_comm);
  if (ds_stage1_whole_grads) st.grads = 2.0 * psi + 2.0 * psi / std::max(1, p.shard_group());
  if (p.offload_optimizer != OffloadTarget::none) {
    st.optimizer = 0;
    // ZeRO-Offload streams gradient partitions to the host as they are
    // reduced (stage 2); ZeRO-1 keeps its gradients whole on the device until
    // the boundary (the ZeRO paper's Pos: 2Ψ), DeepSpeed's with one
    // micro-batch and overlap_comm reduces them as they come (as stage 2).
    // ztune's executor keeps its partition (ZeRO-1: every gradient) on the
    // device and copies it at the step (ParamStore's grad_shards_).
    if (!executor && (p.zero_stage >= 2 || (p.zero_stage == 1 && opt.accounting == StateAccounting::deepspeed &&
                                            !ds_stage1_whole_grads)))
      st.grads = 0;
  }
  if (p.offload_params != OffloadTarget::none) st.params = 0;
  // ZeRO-3 under a pipeline (Plan::zero3_held_through_step): the stage's
  // gradients accumulate whole, in the reduction dtype (FSDP2's
  // unsharded_accumulated_grad, upcast to reduce_dtype), beside the partition
  // they are reduce-scattered into once per step. (The executor's own count:
  // executor_state_bytes.)
  if (p.zero3_held_through_step() && !executor) st.grads += gradient_reduce_bytes(p, hw.engine) * psi;
  // ZeRO++ hpZ: the node-local secondary copy of the 16-bit parameters.
  if (p.zeropp) st.params += zeropp_secondary_bytes(m, p, c);
  // FP8 parameters (fp8_param_gather): the linear weights' compute copy is
  // 1 byte (its fp32 main copy stays the optimizer's).
  if (p.fp8_param_gather && !executor && p.offload_params == OffloadTarget::none)
    st.params -= (eb - 1.0) * linear_weight_elements(layer_linear_gemms(m, p)) * layers /
                 (p.zero_stage >= 3 ? std::max(1, p.shard_group()) : 1);
  sm.gpu[idx(MemLine::params)] = st.params;
  sm.gpu[idx(MemLine::grads)] = st.grads;
  // 1-bit Adam's error feedback (fp32 worker and server errors) is optimizer
  // state, on the GPU beside Adam's moments in DeepSpeed; ztune's executor
  // keeps all of them in host memory on every backend (executor/onebit_adam.hpp;
  // predict_memory's host line): predicted on the GPU, its plans had read
  // 84-94 % over the measured peak.
  OnebitAdamCost onebit;
  if (p.onebit_adam) {
    onebit = onebit_adam_cost(m, p, c, hw);
    if (executor) st.optimizer = 0;
    else st.optimizer += onebit.error_feedback_bytes;
  }
  sm.gpu[idx(MemLine::optimizer)] = st.optimizer;

  // ZeRO-3 gathered parameters: the largest layer, the prefetch bucket, capped
  // by max_live_parameters, plus persistent small tensors kept whole.
  // ztune's executor's largest gradient (and ZeRO-3 gather) bucket.
  const double bucket = executor ? executor_bucket_elems(m, p, psi) : 0.0;
  if (p.zero3_held_through_step()) {
    // Gathered at the stage's first forward of the step and kept to its last
    // backward: every parameter of the stage, in the stored type.
    sm.gpu[idx(MemLine::zero3_gathered)] = eb * psi;
  } else if (p.zero_stage == 3) {
    if (executor) {
      // ztune's executor (ParamStore::acquire_bucket) gathers a bucket before
      // its use and the next one ahead, and keeps a bucket whose every tensor
      // is below param_persistence_threshold until the step: every layer's,
      // when even the largest weight is.
      const bool persistent = m.largest_module_params() / t < p.param_persistence_threshold;
      sm.gpu[idx(MemLine::zero3_gathered)] =
          eb * (persistent ? psi : std::min(psi, 2.0 * bucket));
    } else if (opt.accounting == StateAccounting::deepspeed) {
      sm.gpu[idx(MemLine::zero3_gathered)] = 4.0 * std::max(layer_params, first ? word : 0.0);
    } else {
      const double largest = std::max(layer_params, (first || last) ? word : 0.0);
      // max_live_parameters bounds what prefetch holds, not a module: a
      // module's weight is gathered whole however large (FC1 of a 2T model
      // is 4.3 G elements against the default 1e9).
      const double live = std::max(m.largest_module_params() / t,
                                   std::min(p.max_live_params, largest + std::min(p.prefetch_bucket_elems, psi)));
      const double h = m.hidden;
      const double kvd = static_cast<double>(m.kv_heads) * m.head_dim();
      const double f_in = m.activation == Activation::swiglu ? 2.0 * m.ffn_hidden : m.ffn_hidden;
      double small = 0;  // vectors under the persistence threshold, per layer
      auto keep = [&](double n) { if (n < p.param_persistence_threshold) small += n; };
      const double norms = m.norm == NormKind::layernorm && m.bias ? 2.0 : 1.0;
      for (int i = 0; i < 2; ++i) keep(norms * h);
      if (m.bias) { keep((h + 2 * kvd) / t); keep(h); keep(f_in / t); keep(h); }
      else if (m.qkv_bias) keep((h + 2 * kvd) / t);  // Qwen2: the Q/K/V bias alone
      sm.gpu[idx(MemLine::zero3_gathered)] = eb * (live + layers * small);
      // ZeRO++ qwZ: the int8 staging buffer of the gather in flight.
      if (p.zeropp)
        sm.gpu[idx(MemLine::zero3_gathered)] += kZeroppWeightBytes * std::min(p.prefetch_bucket_elems, psi);
    }
  }

  // Activations: this stage's layers × micro-batches in flight. Under 1F1B
  // stage i holds min(pp − i, m) (Narayanan et al. 2021, §2.2: the warm-up
  // runs pp − i − 1 forwards before the first backward): the first stage the
  // most, the last one. Interleaved (vocab/pipeline_schedule
  // chunks_in_flight): stage s holds its warm-up's chunks + 1, each chunk a
  // v-th of its layers; stage 0 the most with equal stages, a later stage with
  // more layers possibly more (uneven stages).
  double in_flight = microbatches_in_flight(p);
  // The same count for the stored layers: micro-batches' worth of the
  // stage's layers at the peak (= in_flight unless chunks differ in size).
  double layer_in_flight = in_flight;
  if (p.pp > 1 && p.schedule != Schedule::gpipe) {
    const int v = p.model_chunks();
    in_flight = static_cast<double>(chunks_in_flight(p.schedule, p.pp, stage, p.grad_accum, v)) / v;
    // Stated chunks (Plan::chunk_layers) differ in size, and the peak of the
    // layers held need not come at the end of the warm-up.
    layer_in_flight = p.chunk_layers.empty()
                          ? in_flight
                          : interleaved_peak_layers(p.pp, stage, p.grad_accum, p.chunk_layers) / stage_layers;
  }
  // ztune's executor allocates as it does on CPU ranks wherever it runs
  // (executor_layout). On a GPU the CUDA context, NCCL, cuBLAS and the caching
  // allocator come on top (below).
  if (executor) {
    executor_lines(m, p, psi, layers, in_flight, layer_in_flight, density, first, last, c.device_kind == DeviceKind::gpu, bucket,
                   executor_qgz_bytes(p, c, bucket, executor_grad_precision(p)), stage_output_bytes(m, p, c, hw), sm);
    if (c.device_kind == DeviceKind::cpu) {
      for (double v : sm.gpu) sm.total += v;
      return sm;
    }
    sm.gpu[idx(MemLine::workspace)] += kCublasWorkspaceBytes + executor_cuda_scratch(m, p);
  } else {
    engine_lines(m, p, hw, psi, layers, in_flight, layer_in_flight, density, first, last, onebit.sign_buffer_bytes, sm);
  }

  int communicators = (p.tp > 1) + (p.dp_cp() > 1) + (p.pp > 1) + (p.cp > 1) + (p.ulysses > 1) + p.hybrid_sharded();
  sm.gpu[idx(MemLine::runtime)] = c.device_kind == DeviceKind::gpu
                                      ? kCudaContextBytes + communicators * kNcclBytesPerCommunicator
                                      : 0.0;
  const double dynamic = sm.gpu[idx(MemLine::activations)] + sm.gpu[idx(MemLine::comm_buckets)] +
                         sm.gpu[idx(MemLine::zero3_gathered)] + sm.gpu[idx(MemLine::workspace)] +
                         sm.gpu[idx(MemLine::logits)];
  sm.gpu[idx(MemLine::fragmentation)] = kFragmentation * dynamic;
  for (double v : sm.gpu) sm.total += v;
  return sm;
}

}  // namespace

bool executor_layout(const Cluster& c, const HardwareProfile& hw) {
  return c.device_kind == DeviceKind::cpu || hw.engine.executor;
}

std::string dropout_note(const Transformer& m, const Cluster& c, const HardwareProfile& hw) {
  // The validation runs carried it unnoticed until session 52 (data/validation/README.md `dropout`).
  if (m.activation != Activation::swiglu || !m.has_dropout() || executor_layout(c, hw)) return "";
  char p[32];
  std::snprintf(p, sizeof p, "%g", m.dropout);
  return std::string("dropout ") + p +
         " priced (its masks kept for backward, its kernels run); Llama-style models train without it: "
         "\"dropout\": 0 in the model file prices that";
}

const char* states_counted_as(StateAccounting a, Precision storage, const Cluster& c, const HardwareProfile& hw) {
  if (executor_layout(c, hw)) return "executor";
  return storage == Precision::fp32 ? "fp32" : to_string(a);
}

double stored_activation_bytes(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                               Recompute r) {
  if (executor_layout(c, hw)) return layer_activation_bytes_executor(m, p, r, attention_density(m, p));
  return layer_activation_bytes(m, p, r);
}

double stage_output_bytes(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  if (!executor_layout(c, hw)) return 0;
  const double rows = static_cast<double>(m.seq_len) / p.seq_split() * p.micro_batch;
  return bytes_of(storage_precision(p)) * rows * m.hidden / (p.sequence_parallel ? p.tp : 1.0);
}

std::optional<MemoryPrediction> predict_memory_unless_above(const Transformer& m, const Plan& p, const Cluster& c,
                                                            const HardwareProfile& hw, const MemoryOptions& opt,
                                                            double pressure_above) {
  MemoryPrediction mp;
  const double usable = c.node.gpu.memory_bytes() * (1.0 - opt.gpu_headroom);
  // A stage's total is a lower bound of the plan's GPU total, and with it of
  // its memory pressure (Candidate::memory_pressure: the largest used /
  // capacity ratio). Strictly above: a tie may still enter a list by its id.
  auto beyond = [&](double gpu_total) {
    return usable > 0 && gpu_total > usable && gpu_total > pressure_above * usable;
  };
  // The most loaded stage. With equal stages that is the first (embedding,
  // most micro-batches in flight) or the last (head, logits). With uneven
  // ones a middle stage can be: balanced stages need one more candidate, the
  // first stage of the shorter ones (it holds more in flight than those after
  // it); a stated partition is checked stage by stage.
  const int last_stage = p.pp - 1;
  StageMemory worst = stage_memory(m, p, c, hw, 0, stage_layer_count(p, m.layers, 0), opt);
  if (beyond(worst.total)) return std::nullopt;
  int worst_stage = 0;
  auto consider = [&](int stage) {
    StageMemory s = stage_memory(m, p, c, hw, stage, stage_layer_count(p, m.layers, stage), opt);
    if (s.total > worst.total) {
      worst = s;
      worst_stage = stage;
    }
    return beyond(worst.total);
  };
  if (p.pp > 1) {
    if (consider(last_stage)) return std::nullopt;
    if (!p.stage_layers.empty()) {
      // A middle stage's lines depend on its layer count and on what it
      // holds in flight, which never grows with the stage's index
      // (chunks_in_flight): of a run of middle stages of one size the first
      // is the most loaded, so one candidate per run (Megatron's partitions,
      // stated by their ends, have one run in the middle). O(pp).
      for (int i = 1; i < last_stage; ++i)
        if (i == 1 || p.stage_layers[static_cast<std::size_t>(i)] != p.stage_layers[static_cast<std::size_t>(i - 1)])
          if (consider(i)) return std::nullopt;
    } else if (const int shorter = m.layers % p.pp; shorter > 0 && shorter < last_stage) {
      if (consider(shorter)) return std::nullopt;
    }
  }
  mp.gpu = worst.gpu;
  mp.gpu_total_bytes = worst.total;
  mp.stage = worst_stage;
  mp.gpu_capacity_bytes = c.node.gpu.memory_bytes();

  // Host and NVMe per node: every GPU of the node the plan uses holds its own partition.
  const double psi = stage_params(m, p);
  const double part = p.zero_stage >= 1 ? psi / p.shard_group() : psi;
  const double gpn = gpus_per_node_in_use(p, c);
  double host = 0, nvme = 0;
  // The offloaded states (fp32 master, momentum, variance: check_plan keeps
  // offload to fp32 states) and their fp32 gradients.
  const double offloaded = adam_state_bytes(optimizer_dtypes(p)) + 4.0;
  if (p.offload_optimizer == OffloadTarget::cpu) {
    host += gpn * offloaded * part;
  } else if (p.offload_optimizer == OffloadTarget::nvme) {
    nvme += gpn * offloaded * part;
    host += gpn * kSwapBuffers * std::min(part, kSwapBufferElems) * 4.0;
  }
  if (p.offload_params == OffloadTarget::cpu) {
    host += gpn * 2.0 * psi / p.shard_group();
  } else if (p.offload_params == OffloadTarget::nvme) {
    nvme += gpn * 2.0 * psi / p.shard_group();
    host += gpn * kSwapBuffers * std::min(psi / p.dp, kSwapBufferElems) * 2.0;
  }
  // ztune's executor's 1-bit Adam: its states and staging in host memory, each rank's.
  if (p.onebit_adam && executor_layout(c, hw)) host += gpn * executor_onebit_host_bytes(psi, p.dp);
  // CPU checkpointing: every GPU's checkpoints of its most loaded stage (the
  // first: most layers and micro-batches in flight under 1F1B).
  if (p.cpu_checkpointing)
    host += gpn * max_stage_layers(p, m.layers) * microbatches_in_flight(p) *
            layer_activation_bytes(m, p, Recompute::full);
  mp.host_bytes_per_node = host;
  mp.host_capacity_bytes = c.node.host_memory_gb * 1e9;
  mp.nvme_bytes_per_node = nvme;
  mp.nvme_capacity_bytes = c.node.nvme_size_tb * 1e12;
  mp.gpu_usable_bytes = usable;
  mp.fits_gpu = mp.gpu_total_bytes <= mp.gpu_usable_bytes;
  mp.fits_host = mp.host_bytes_per_node <= mp.host_capacity_bytes;
  mp.fits_nvme = mp.nvme_bytes_per_node <= mp.nvme_capacity_bytes;
  return mp;
}

MemoryPrediction predict_memory(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                                const MemoryOptions& opt) {
  // No bar: every candidate stage is computed, and the answer is never nullopt.
  return *predict_memory_unless_above(m, p, c, hw, opt, std::numeric_limits<double>::infinity());
}

StateAccounting state_accounting_of_engine(std::string_view engine) {
  if (engine == "megatron") return StateAccounting::megatron;
  if (engine == "deepspeed") return StateAccounting::deepspeed;
  return StateAccounting::paper;
}

MemoryPrediction predict_memory(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  return predict_memory(m, p, c, hw, MemoryOptions{});
}

double stage_gpu_bytes(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw, int stage,
                       const MemoryOptions& opt) {
  return stage_memory(m, p, c, hw, stage, stage_layer_count(p, m.layers, stage), opt).total;
}

int largest_fitting_micro_batch(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                                int limit, const MemoryOptions& opt) {
  Plan q = p;
  auto fits = [&](int b) {
    q.micro_batch = b;
    return predict_memory(m, q, c, hw, opt).fits_gpu;
  };
  if (limit < 1 || !fits(1)) return 0;
  int lo = 1, hi = 2;  // lo fits; find the first hi that does not
  while (hi <= limit && fits(hi)) { lo = hi; hi *= 2; }
  hi = std::min(hi, limit + 1);
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    if (fits(mid)) lo = mid; else hi = mid;
  }
  return lo;
}

double executor_bucket_elems(const Transformer& m, const Plan& p, double stage_params) {
  // Whole layers fill a bucket up to the size (the ends' units, the word
  // embedding above all, may form a larger bucket of their own).
  const double layer = m.params_per_layer() / p.tp;
  const double word = static_cast<double>(m.vocab) * m.hidden / p.tp;
  const double layers = std::max(1.0, std::floor(p.reduce_bucket_elems / layer)) * layer;
  return std::min(stage_params, std::max(layers, word));
}

int fewest_recomputed_layers(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                             const MemoryOptions& opt, MemoryPrediction* fitted) {
  if (p.recompute != Recompute::full || p.recompute_num_layers > 0) return 0;
  // A stage's chunks differ by at most one layer (stated chunks): the largest
  // holds the rounded-up share.
  const int chunks = p.model_chunks();
  const int largest_chunk = (max_stage_layers(p, m.layers) + chunks - 1) / chunks;
  Plan q = p;
  MemoryPrediction mp;
  auto fits = [&](int n) {
    q.recompute_num_layers = n;
    mp = predict_memory(m, q, c, hw, opt);
    return mp.fits();
  };
  // Below every layer of the largest chunk memory falls as N grows (one
  // whole layer for one checkpoint, each stage): the first N that fits.
  int lo = 1, hi = largest_chunk - 1;
  if (hi < lo || !fits(hi)) return 0;
  MemoryPrediction best = mp;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      hi = mid;
      best = mp;
    } else {
      lo = mid + 1;
    }
  }
  if (fitted != nullptr) *fitted = best;
  return hi;
}

int overflowing_lines(const MemoryPrediction& mp, MemLine* out, int max) {
  if (mp.fits_gpu || max <= 0) return 0;
  std::array<MemLine, static_cast<std::size_t>(MemLine::count)> order{};
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<MemLine>(i);
  std::sort(order.begin(), order.end(), [&](MemLine a, MemLine b) { return mp.line(a) > mp.line(b); });
  double sum = 0;
  int n = 0;
  for (MemLine l : order) {
    if (n >= max) break;
    out[n++] = l;
    sum += mp.line(l);
    if (sum > mp.gpu_usable_bytes) break;
  }
  return n;
}

}  // namespace ztune
