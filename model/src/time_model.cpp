#include "ztune/model/time_model.hpp"

#include <algorithm>

#include "ztune/model/flops.hpp"
#include "ztune/model/layer_cost_memo.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/onebit_adam.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/sparse_attention.hpp"

namespace ztune {

namespace {

std::size_t idx(TimePart t) { return static_cast<std::size_t>(t); }

// A stage's layers' time per micro-batch. `unit` is one layer's micro-batch,
// every part; `recompute` the part of it its recomputation adds (the forward
// again, its collectives, its host slack). Megatron's block method runs that
// part on some of a stage's layers only (recomputed_layers); every other plan
// on all of them, computed as layers × unit as before the block method.
struct StageUnit {
  const Plan& p;
  double unit;
  double recompute;
  // `layers` layers of which `recomputed` are recomputed.
  [[nodiscard]] double of(double layers, double recomputed) const {
    return recomputed == layers ? layers * unit : layers * (unit - recompute) + recomputed * recompute;
  }
  [[nodiscard]] double of_stage(int layers) const { return of(layers, recomputed_layers(p, layers)); }
};

// Fill and drain of uneven stages (issue 19), GPipe and 1F1B. Stage i's
// micro-batch takes T_i (its layers, its edge, its sends and the fixed
// per-micro-batch cost) and its forward F_i. A slowest stage k runs m
// micro-batches back to back once the pipeline is full; what else lies on
// the critical path through k:
//  - GPipe: the permutation flow shop of m identical jobs, makespan
//    Σ_i T_i + (m−1)·max_i T_i (with one stage slowest in both passes):
//    the other stages' times, Σ_{i≠k} T_i — not (p−1)·T_k.
//  - 1F1B (Narayanan et al. 2021, §2.2; PipeDream-flush): stage k starts
//    after the first forward has crossed stages 0..k−1 and ends before the
//    last backward recrosses them (Σ_{i<k} T_i); its first backward waits for
//    the round trip through stages k+1..p−1 (Σ_{i>k} T_i), of which its
//    p−k−1 warm-up forwards fill (p−k−1)·F_k. Stage k's path is
//    m·T_k + Σ_{i<k} T_i + max(0, Σ_{i>k} T_i − (p−k−1)·F_k), and the
//    iteration the longest such path. With equal stages the last stage's
//    path is the longest, (m + p − 1)·T: the equal-stage bubble again.
//    Each path is a chain of the schedule, so this is a lower bound; where
//    two stages are nearly as slow the real critical path zigzags between
//    them (the simulator, which runs the whole DAG, finds up to ~3% more on
//    GPT-3 over 7 stages: tests/simulator/test_model_agreement.cpp).
// Returned as the time beyond m·max_i T_i, plus the one send predict_time
// takes off (the steady state already holds it).
double uneven_fill_drain(const Transformer& m, const Plan& p, const LayerCost& lc, const EdgeCost& e,
                         const StageUnit& unit, double send, double microbatch_overhead_s) {
  const double fwd_unit =
      lc.fwd_s + lc.tp_fwd_s + lc.cp_fwd_s + lc.ulysses_fwd_s + std::max(0.0, lc.host_fwd_s - (lc.fwd_s + lc.tp_fwd_s));
  const double embedding = e.embedding_fwd_s + e.embedding_bwd_s + e.embedding_tp_s;
  const double head = e.head_fwd_s + e.head_bwd_s + e.head_tp_s;
  const int last = p.pp - 1;
  const bool balanced = p.stage_layers.empty();
  const int base = m.layers / p.pp, longer = m.layers % p.pp;
  auto period = [&](int i, double* fwd) {
    const int layers = stage_layer_count(p, m.layers, i);
    const double n = layers;
    const double sends = (i == 0 || i == last) ? send : 2.0 * send;
    double T = unit.of_stage(layers) + sends + microbatch_overhead_s;
    double F = n * fwd_unit + send;
    if (i == 0) { T += embedding; F += e.embedding_fwd_s + e.embedding_tp_s; }
    if (i == last) { T += head; F += e.head_fwd_s; }
    if (fwd != nullptr) *fwd = F;
    return T;
  };
  // Σ_{i<k} T_i (k ≤ pp) from the layers and recomputed layers of the stages
  // before k.
  auto before_from = [&](int k, double layers, double recomputed) {
    const double sends = k == 0 ? 0.0 : (k <= last ? 2.0 * k - 1.0 : 2.0 * k - 2.0) * send;
    return unit.of(layers, recomputed) + k * microbatch_overhead_s + sends + (k > 0 ? embedding : 0.0) +
           (k > last ? head : 0.0);
  };
  // Balanced stages: a closed form (no allocation, O(1)).
  auto before_balanced = [&](int k) {
    const int longer_before = std::min(k, longer);
    const double layers = static_cast<double>(k) * base + longer_before;
    const double recomputed = static_cast<double>(k - longer_before) * recomputed_layers(p, base) +
                              static_cast<double>(longer_before) * recomputed_layers(p, base + 1);
    return before_from(k, layers, recomputed);
  };
  double total = 0;
  if (balanced) {
    total = before_balanced(p.pp);
  } else {
    double layers = 0, recomputed = 0;
    for (const int n : p.stage_layers) {
      layers += n;
      recomputed += recomputed_layers(p, n);
    }
    total = before_from(p.pp, layers, recomputed);
  }
  const double mb = p.grad_accum;
  double longest = 0, slowest = 0;
  auto consider = [&](int k, double b) {
    double F = 0;
    const double T = period(k, &F);
    const double after = total - b - T;
    const double path = p.schedule == Schedule::gpipe ? mb * T + b + after
                                                      : mb * T + b + std::max(0.0, after - (last - k) * F);
    longest = std::max(longest, path);
    slowest = std::max(slowest, T);
  };
  if (balanced) {
    // Within a run of equal middle stages the path grows with k (by at least
    // F per stage), so each run's last stage stands for it; the slowest
    // stage is among these too.
    consider(0, before_balanced(0));
    consider(last, before_balanced(last));
    if (longer - 1 > 0 && longer - 1 < last) consider(longer - 1, before_balanced(longer - 1));
    if (last - 1 > 0) consider(last - 1, before_balanced(last - 1));
  } else {
    // A stated partition: its prefix carried along (O(pp); the search prices
    // Megatron's partitions of up to 126 stages). As above, only the last
    // stage of a run of equal middle stages is priced: Megatron's partitions
    // are one run between their ends.
    const auto& sl = p.stage_layers;
    double layers = 0, recomputed = 0;
    for (int k = 0; k <= last; ++k) {
      const auto i = static_cast<std::size_t>(k);
      if (k == 0 || k >= last - 1 || sl[i + 1] != sl[i]) consider(k, before_from(k, layers, recomputed));
      const int n = sl[i];
      layers += n;
      recomputed += recomputed_layers(p, n);
    }
  }
  return longest - mb * slowest + send;
}

}  // namespace

double cpu_checkpoint_copy_time(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  if (!p.cpu_checkpointing) return 0;
  return 2.0 * pcie_copy_time(layer_activation_bytes(m, p, Recompute::full), c, hw);
}

bool zero3_can_prefetch(const Transformer& m, const Plan& p, const HardwareProfile& hw) {
  if (hw.engine.zero3_gather == GatherUnit::module) return true;
  return p.prefetch_bucket_elems > 0 && p.max_live_params >= 2.0 * m.largest_module_params() / p.tp;
}

bool tp_shares_dp_link(const Plan& p, const Cluster& c) {
  if (p.tp <= 1 || p.dp_cp() <= 1) return false;
  const GroupLayout g = place_groups(p, c);
  // Hybrid sharding gathers and reduce-scatters in the shard group, usually
  // inside the node beside TP, whatever level dp spans.
  return g.tp.crosses_nodes() == g.shard.crosses_nodes();
}

std::optional<Cluster> oversubscribed_view(const Plan& p, const Cluster& c) {
  if (c.device_kind != DeviceKind::cpu || c.node.cpu_cores <= 0) return std::nullopt;
  const int ranks = std::min(p.gpus(), c.node.gpus);
  if (ranks <= c.node.cpu_cores) return std::nullopt;
  const double share = static_cast<double>(c.node.cpu_cores) / ranks;
  Cluster v = c;
  v.node.gpu.peak_tflops_fp32 *= share;
  v.node.gpu.peak_tflops_fp16 *= share;
  v.node.gpu.peak_tflops_bf16 *= share;
  v.node.gpu.peak_tflops_fp8 *= share;
  v.node.gpu.hbm_bandwidth_gbps *= share;
  v.node.pcie_bandwidth_gbps *= share;
  v.intra_node.bandwidth_gbps *= share;
  v.node.cpu_cores = ranks;
  return v;
}

namespace {

// ZeRO-3's exposed gathers of one forward and one backward window. A
// prefetched gather hides behind the previous unit's compute as far as the
// profile's overlap allows; the first unit of each pass has nothing before it
// and waits for its gather. (Held under a pipeline: no backward gathers, and
// z.bwd_s is 0.)
double exposed_zero3_gathers(const Zero3GatherCost& z, double fwd_window, double bwd_window, bool prefetch,
                             const HardwareProfile& hw) {
  const double overlap = prefetch ? hw.engine.zero3_prefetch_overlap : 0.0;
  const double e = exposed(z.fwd_s, fwd_window, overlap) + exposed(z.bwd_s, bwd_window, overlap);
  return prefetch && z.gathers > 0 ? std::max(e, (z.fwd_s + z.bwd_s) / z.gathers) : e;
}

// microbatch_times from the layer's and the edges' costs, computed or
// remembered, and the plan's data-parallel sync, which predict_time reads
// too: computed once per prediction (twice for ZeRO 2/3 before, where it is
// about a quarter of a search's rank pass).
MicrobatchTimes times_of(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                         const LayerCost& lc, const EdgeCost& e, const DpSyncCost& d) {
  const bool single = p.pp == 1;
  const double tp_bwd = lc.tp_bwd_s + exposed(lc.tp_bwd_async_s, lc.tp_bwd_window_s, hw.engine.tp_overlap);
  const double tp_layer = lc.tp_fwd_s + tp_bwd + lc.tp_recompute_s;
  // Each pass takes max(GPU time, host dispatch time); the excess is overhead.
  const double recompute_slack = std::max(0.0, lc.host_recompute_s - (lc.recompute_s + lc.tp_recompute_s));
  const double host_slack = std::max(0.0, lc.host_fwd_s - (lc.fwd_s + lc.tp_fwd_s)) +
                            std::max(0.0, lc.host_bwd_s - (lc.bwd_s + tp_bwd)) + recompute_slack;
  // Context parallelism: the ring exchanges not hidden behind the attention
  // blocks (op_costs.cpp context_parallel_attention), every pass.
  const double cp_layer = lc.cp_fwd_s + lc.cp_bwd_s + lc.cp_recompute_s;
  // DeepSpeed-Ulysses: its all-to-alls block the layer (nothing to hide them).
  const double ulysses_layer = lc.ulysses_fwd_s + lc.ulysses_bwd_s + lc.ulysses_recompute_s;
  // ZeRO-R CPU checkpointing: each layer's checkpoint goes to the host after
  // its forward and comes back before its recomputation, both with a blocking
  // .to() (DeepSpeed checkpointing.py: copy_to_device / move_to_device), so
  // the compute stream waits for both copies.
  const double checkpoint_layer = cpu_checkpoint_copy_time(m, p, c, hw);
  // One layer's micro-batch, every part: the unit stage times are built of.
  const double unit =
      lc.fwd_s + lc.bwd_s + lc.recompute_s + tp_layer + cp_layer + ulysses_layer + host_slack + checkpoint_layer;
  const StageUnit stage{p, unit,
                        lc.recompute_s + lc.tp_recompute_s + lc.cp_recompute_s + lc.ulysses_recompute_s +
                            recompute_slack};

  // The slowest stage sets the 1F1B period (Narayanan et al. 2021, §2.2).
  // With one stage it holds both ends. Otherwise an end stage, carrying the
  // embedding or the head and 2v−1 sends, or — with three stages or more — a
  // middle stage, with no edge work and 2v sends. Equal end stages: the
  // larger of the two edges, part by part (the head outweighs the embedding
  // lookup). Uneven ones (issue 19): the end stage whose layers and edge take
  // longer, with its own edge.
  const int first_layers = stage_layer_count(p, m.layers, 0);
  const int last_layers = stage_layer_count(p, m.layers, p.pp - 1);
  double edge_fwd = e.embedding_fwd_s + e.head_fwd_s;
  double edge_bwd = e.embedding_bwd_s + e.head_bwd_s;
  double edge_tp = e.embedding_tp_s + e.head_tp_s;
  int slowest = first_layers;
  if (!single && first_layers == last_layers) {
    edge_fwd = std::max(e.embedding_fwd_s, e.head_fwd_s);
    edge_bwd = std::max(e.embedding_bwd_s, e.head_bwd_s);
    edge_tp = std::max(e.embedding_tp_s, e.head_tp_s);
  } else if (!single) {
    const double first_s = stage.of_stage(first_layers) + e.embedding_fwd_s + e.embedding_bwd_s + e.embedding_tp_s;
    const double last_s = stage.of_stage(last_layers) + e.head_fwd_s + e.head_bwd_s + e.head_tp_s;
    const bool head_end = last_s > first_s;
    slowest = head_end ? last_layers : first_layers;
    edge_fwd = head_end ? e.head_fwd_s : e.embedding_fwd_s;
    edge_bwd = head_end ? e.head_bwd_s : e.embedding_bwd_s;
    edge_tp = head_end ? e.head_tp_s : e.embedding_tp_s;
  }

  // Pipeline sends, on the pipeline's slowest stage. Megatron's and DeepSpeed's
  // point-to-point operations are synchronous (batch_isend_irecv, then wait),
  // so a stage's sends sit on its critical path. Each model chunk sends its
  // activation forward and its gradient backward, except the last stage's last
  // chunk (no forward send) and the first stage's first chunk (no backward
  // send). A middle stage slower than the end stage only by its extra send is
  // charged as pipeline communication; one with more layers is the slowest
  // stage itself.
  MicrobatchTimes t;
  double middle_sends = 0;
  if (p.pp > 1) {
    const double v = p.model_chunks();
    const double send = pipeline_p2p(m, p, c, hw).time_s;
    t.pp_send = send;
    middle_sends = 2.0 * v * send;
    const double end_sends = (2.0 * v - 1.0) * send;
    const double edge = edge_fwd + edge_bwd + edge_tp;
    const int middle_layers = max_middle_stage_layers(p, m.layers);
    const double end_s = stage.of_stage(slowest) + edge + end_sends;
    const double middle_s = stage.of_stage(middle_layers) + middle_sends;
    if (p.pp >= 3 && middle_layers > slowest && middle_s > end_s) {
      slowest = middle_layers;
      edge_fwd = edge_bwd = edge_tp = 0;
      t.pp_comm = middle_sends;
    } else {
      t.pp_comm = p.pp >= 3 ? std::max(end_sends, middle_s - (stage.of_stage(slowest) + edge)) : end_sends;
    }
  }
  const int stage_layers = single ? m.layers : slowest;
  const double layers = stage_layers;
  // The layers recomputed (Megatron's block method: some), and each
  // per-layer figure with its recomputation's part on those only.
  const double recomputed = recomputed_layers(p, stage_layers);
  auto per_layer = [&](double whole, double recompute_part) {
    return StageUnit{p, whole, recompute_part}.of(layers, recomputed);
  };

  t.forward = layers * lc.fwd_s + edge_fwd;
  t.backward = layers * lc.bwd_s + edge_bwd;
  t.recompute = recomputed * lc.recompute_s;
  t.tp_comm = per_layer(tp_layer, lc.tp_recompute_s) + edge_tp;
  t.cp_comm = per_layer(cp_layer, lc.cp_recompute_s);
  t.ulysses_comm = per_layer(ulysses_layer, lc.ulysses_recompute_s);
  // DeepSpeed's BF16_Optimizer folds each micro-batch's bf16 gradients into
  // its fp32 buffers after the stage's backward (op_costs.hpp).
  const double fold = bf16_grad_accumulation_time(m, p, c, hw);
  t.overhead = per_layer(host_slack, recompute_slack) + hw.engine.microbatch_overhead_s + fold;
  // Overlapped data-parallel link time beside each pass (for link sharing).
  double dp_link_fwd = 0;
  double dp_link_bwd = 0;
  double reduce_hidden = 0;  // of the per-micro-batch reduction, the part hidden behind backward
  if (p.reduces_every_microbatch() && p.dp_cp() > 1) {
    t.dp_comm = exposed(d.per_microbatch_s, t.backward + t.recompute, p.overlap_comm ? hw.engine.dp_overlap : 0.0);
    if (p.overlap_comm) {
      dp_link_bwd += d.per_microbatch_s;
      // The last bucket is issued as the backward ends, and the backward call
      // returns only when it is reduced (DeepSpeed's
      // independent_gradient_partition_epilogue synchronizes the reduction
      // stream; the executor's ParamStore::finish_backward waits): at least
      // one bucket's reduction is exposed every micro-batch.
      t.dp_comm = std::max(t.dp_comm, d.per_microbatch_s / d.buckets);
      reduce_hidden = d.per_microbatch_s - t.dp_comm;
    }
  }
  // ZeRO-3 under a pipeline gathers once per step (predict_time's zero3_gather).
  if (p.zero_stage == 3 && !p.zero3_held_through_step()) {
    const Zero3GatherCost z = zero3_gather_cost(m, p, c, hw);
    const bool prefetch = zero3_can_prefetch(m, p, hw);
    // The backward's gathers and its gradient reduce-scatters use the same
    // links (both run over the dp group): the gathers hide only behind the
    // part of the backward window the reductions have not already filled.
    const double bwd_window = std::max(0.0, t.backward + t.recompute - reduce_hidden);
    t.zero3_gather = exposed_zero3_gathers(z, t.forward, bwd_window, prefetch, hw);
    if (prefetch) {
      dp_link_fwd += z.fwd_s;
      dp_link_bwd += z.bwd_s;
    }
  }
  t.tp_backward_link = per_layer(tp_bwd + lc.tp_recompute_s, lc.tp_recompute_s);
  if (tp_shares_dp_link(p, c)) {
    t.tp_comm += layers * lc.tp_fwd_s * link_sharing(dp_link_fwd, t.forward) +
                 t.tp_backward_link * link_sharing(dp_link_bwd, t.backward + t.recompute);
  }
  if (p.offload_params != OffloadTarget::none) {
    // Half the fetches come before the forward, half before the backward, and
    // hide behind the same windows as the gathers they feed (the recomputed
    // forward runs inside the backward's window).
    const OptimizerCost o = optimizer_cost(m, p, c, hw);
    const double overlap = zero3_can_prefetch(m, p, hw) ? hw.engine.offload_overlap : 0.0;
    const double half = 0.5 * o.zero3_param_fetch_s;
    t.offload = exposed(half, t.forward, overlap) + exposed(half, t.backward + t.recompute, overlap);
  }
  t.offload += layers * checkpoint_layer;
  // The bubble unit: the slowest stage's micro-batch without its edge, every
  // send included, and BF16_Optimizer's fold, which DeepSpeed's pipeline runs
  // between a stage's backward and its gradient send (_exec_backward_pass
  // calls update_hp_grads before the SendGrad instruction): in the drain every
  // stage's fold waits for the next one's.
  t.layers_only = stage.of_stage(stage_layers) + middle_sends + fold;
  // Fill and drain. Narayanan et al. 2021, §2.2: with p equal stages of time
  // T the bubble is (p−1)·T, and interleaving divides it by v (equal stages:
  // the formula as before, with the stages' layers and sends, not their edges).
  if (p.pp > 1 && (p.schedule == Schedule::interleaved || even_stages(p, m.layers))) {
    t.fill_drain = (p.pp - 1) / static_cast<double>(p.model_chunks()) * t.layers_only;
  } else if (p.pp > 1) {
    t.fill_drain = uneven_fill_drain(m, p, lc, e, stage, t.pp_send, hw.engine.microbatch_overhead_s + fold);
  }
  return t;
}

// The plan's micro-batch times on a cluster its ranks fit (no oversubscribed view).
MicrobatchTimes times_on(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                         LayerCostMemo* memo, const DpSyncCost& d) {
  if (memo != nullptr && memo->serves(m, c, hw)) {
    const LayerCostMemo::Costs& remembered = memo->costs(p);
    return times_of(m, p, c, hw, remembered.layer, remembered.edge, d);
  }
  return times_of(m, p, c, hw, layer_cost(m, p, c, hw), edge_cost(m, p, c, hw), d);
}

}  // namespace

MicrobatchTimes microbatch_times(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                                 LayerCostMemo* memo) {
  if (const auto v = oversubscribed_view(p, c)) return microbatch_times(m, p, *v, hw);
  return times_on(m, p, c, hw, memo, dp_sync_cost(m, p, c, hw));
}

TimePrediction predict_time(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                            LayerCostMemo* memo) {
  if (const auto v = oversubscribed_view(p, c)) return predict_time(m, p, *v, hw);
  TimePrediction tp;
  const DpSyncCost d = dp_sync_cost(m, p, c, hw);
  const MicrobatchTimes mb = times_on(m, p, c, hw, memo, d);
  const double n_mb = p.grad_accum;
  auto& parts = tp.parts;
  parts[idx(TimePart::forward)] = n_mb * mb.forward;
  parts[idx(TimePart::backward)] = n_mb * mb.backward;
  parts[idx(TimePart::recompute)] = n_mb * mb.recompute;
  parts[idx(TimePart::tp_comm)] = n_mb * mb.tp_comm;
  parts[idx(TimePart::pp_comm)] = n_mb * mb.pp_comm;
  parts[idx(TimePart::cp_comm)] = n_mb * mb.cp_comm;
  parts[idx(TimePart::ulysses_comm)] = n_mb * mb.ulysses_comm;
  parts[idx(TimePart::zero3_gather)] = n_mb * mb.zero3_gather;
  if (p.zero3_held_through_step()) {
    // ZeRO-3 under a pipeline: the stage's parameters are gathered in its
    // first forward of the step, module by module with the next prefetched,
    // and held (exposed_zero3_gathers over that forward). Every stage
    // gathers when its first forward begins (FSDP2's pre-forward hooks under
    // Schedule1F1B, ztune's ParamStore::acquire), which in the fill is after
    // the previous stage's: the fill's critical path pays each stage's
    // exposed gather, pp of them (the simulator's stalls fall the same way).
    const double once =
        exposed_zero3_gathers(zero3_gather_cost(m, p, c, hw), mb.forward, 0.0, zero3_can_prefetch(m, p, hw), hw);
    parts[idx(TimePart::zero3_gather)] += p.pp * once;
  }
  parts[idx(TimePart::overhead)] = n_mb * mb.overhead + hw.engine.step_overhead_s;
  // Fill and drain (microbatch_times: the other stages' times, (p−1)/v
  // stage-times with equal stages, Narayanan et al. 2021, §2.2). The
  // last stage's final gradient send, which starts the drain, is already in
  // its per-micro-batch sends: fill and drain add one send fewer.
  if (p.pp > 1) parts[idx(TimePart::bubble)] = mb.fill_drain - mb.pp_send;

  // Once-per-step data-parallel work: stage 0/1 reduce after the last
  // backward (hidden behind it only with overlap_comm), stage 1/2 gather the
  // updated parameters, tied embeddings sync across the pipeline ends.
  double reduce = exposed(d.per_step_s, mb.backward + mb.recompute, p.overlap_comm ? hw.engine.dp_overlap : 0.0);
  // ZeRO-3 under a pipeline reduce-scatters each module as its last backward
  // ends: the last one's is exposed, as a per-micro-batch reduction's last
  // bucket is (microbatch_times).
  if (p.zero3_held_through_step() && p.overlap_comm) reduce = std::max(reduce, d.per_step_s / d.buckets);
  double step_dp = reduce + d.param_allgather_s + d.embedding_sync_s;
  // The once-per-step reduction runs beside the last micro-batch's backward
  // and its TP collectives when both use the same link (link_sharing).
  double step_tp_sharing = 0;
  if (p.overlap_comm && tp_shares_dp_link(p, c))
    step_tp_sharing = mb.tp_backward_link * link_sharing(d.per_step_s, mb.backward + mb.recompute);
  // 1-bit Adam: this is the compression phase (onebit_adam.hpp). No gradient
  // all-reduce; the momentum's compressed exchange runs inside the optimizer
  // step after backward, fully exposed, and its kernels add to the step.
  double onebit_kernels_s = 0;
  if (p.onebit_adam && p.dp_cp() > 1) {
    const OnebitAdamCost ob = onebit_adam_cost(m, p, c, hw);
    step_dp = ob.compressed_s + d.param_allgather_s + d.embedding_sync_s;
    onebit_kernels_s = ob.compress_kernels_s;
    step_tp_sharing = 0;  // nothing reduces beside the backward
  }
  parts[idx(TimePart::dp_comm)] = n_mb * mb.dp_comm + step_dp;
  parts[idx(TimePart::tp_comm)] += step_tp_sharing;

  const OptimizerCost o = optimizer_cost(m, p, c, hw);
  parts[idx(TimePart::optimizer)] =
      (p.offload_optimizer == OffloadTarget::none ? o.gpu_step_s : o.host_step_s) + onebit_kernels_s;
  double stall = n_mb * mb.offload;
  if (p.offload_optimizer != OffloadTarget::none) {
    double grads_stall = exposed(o.pcie_grads_s, n_mb * mb.backward, hw.engine.offload_overlap);
    // Stage 2/3 copy each micro-batch's reduced partition down as its bucket
    // is reduced; the last bucket's copy ends the backward call (as above).
    if (p.zero_stage >= 2 && p.overlap_comm)
      grads_stall = std::max(grads_stall, o.pcie_grads_s / d.buckets);
    stall += grads_stall;
    // The NVMe swap of the optimizer states does not overlap the host step:
    // each sub-group is read, stepped and written in turn — DeepSpeed's
    // offload_optimizer pipeline_read/pipeline_write default to false, and
    // ztune's executor does the same (nvme_optimizer_states.cpp). The updated
    // 16-bit parameters go up behind the step.
    stall += o.nvme_s + exposed(o.pcie_params_s, o.host_step_s, hw.engine.offload_overlap);
  }
  parts[idx(TimePart::offload_stall)] = stall;

  for (double v : parts) tp.iteration_s += v;
  const double gpus = p.gpus();
  // An FP8 plan's utilization is against the FP8 peak, as NVIDIA reports its
  // FP8 runs (dgxc-benchmarking: "The peak theoretical throughput for H100
  // FP8 is 1979 TFLOPS"), though only its linear GEMMs run in FP8.
  const double peak =
      p.fp8 != Fp8Recipe::none ? c.node.gpu.peak_tflops_fp8 * 1e12 : c.node.gpu.peak_flops(p.precision);
  tp.model_flops = model_flops_per_iteration(m, static_cast<double>(p.global_batch), attention_density(m, p));
  tp.hardware_flops = hardware_flops_per_iteration(m, p);
  if (tp.iteration_s > 0) {
    tp.tokens_per_s = static_cast<double>(p.global_batch) * m.seq_len / tp.iteration_s;
    tp.model_tflops_per_gpu = tp.model_flops / tp.iteration_s / gpus / 1e12;
    tp.hardware_tflops_per_gpu = tp.hardware_flops / tp.iteration_s / gpus / 1e12;
    if (peak > 0) {
      tp.mfu = tp.model_tflops_per_gpu * 1e12 / peak;
      tp.hfu = tp.hardware_tflops_per_gpu * 1e12 / peak;
    }
  }
  return tp;
}

ComputeByKind compute_by_kind_rank0(const Transformer& m, const Plan& p, const Cluster& c,
                                    const HardwareProfile& hw) {
  if (const auto v = oversubscribed_view(p, c)) return compute_by_kind_rank0(m, p, *v, hw);
  const LayerCost lc = layer_cost(m, p, c, hw);
  const EdgeCost e = edge_cost(m, p, c, hw);
  // Rank 0 holds the first stage's layers (the first chunk of each of its
  // virtual stages: layers / pp in all when equal) and the embedding; with one
  // stage also the head.
  const int stage_layers = stage_layer_count(p, m.layers, 0);
  const double layers = stage_layers;
  // Megatron's block method recomputes a share of the stage's layers.
  const double share = recomputed_layer_fraction(p, stage_layers);
  const double full = whole_layer_recompute_share(p) * share;
  const double attn_recompute = attention_recompute_share(p) * share;
  ComputeByKind k;
  k.gemm = layers * (lc.fwd_gemm_s * (1 + full) + lc.bwd_gemm_s);
  k.attention = layers * (lc.fwd_attention_s * (1 + attn_recompute) + lc.bwd_attention_s);
  k.memory_bound = layers * (lc.fwd_elementwise_s * (1 + full) + lc.bwd_elementwise_s) + e.embedding_fwd_s +
                   e.embedding_bwd_s;
  if (p.pp == 1) {
    k.gemm += e.head_gemm_s;
    k.memory_bound += e.head_fwd_s + e.head_bwd_s - e.head_gemm_s;
  }
  const double n_mb = p.grad_accum;
  k.gemm *= n_mb;
  k.attention *= n_mb;
  k.memory_bound *= n_mb;
  const OptimizerCost o = optimizer_cost(m, p, c, hw);
  if (p.offload_optimizer == OffloadTarget::none)
    k.memory_bound += o.gpu_step_s;
  else
    k.host_adam = o.host_step_s;
  return k;
}

Prediction predict(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  return Prediction{predict_memory(m, p, c, hw), predict_time(m, p, c, hw)};
}

}  // namespace ztune
