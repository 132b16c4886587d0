#include "ztune/simulator/graph_builder.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>

#include "ztune/model/op_costs.hpp"
#include "ztune/vocab/pipeline_schedule.hpp"

namespace ztune::sim {

Placement placement_of(const Plan& p, const Cluster& c) {
  // The groups where the cost model places them (vocab/collective place_groups:
  // ranks tp fastest, then cp, then dp, then pp, Megatron-Core's order). We
  // simulate the replica with dp and cp index 0; its gradients reduce over the
  // dp × cp ranks. Only the stage boundaries are this file's: which of them
  // cross a node.
  const GroupLayout g = place_groups(p, c);
  Placement w;
  w.tp_crosses_nodes = g.tp.crosses_nodes();
  w.dp_crosses_nodes = g.dp.crosses_nodes();
  w.shard_crosses_nodes = g.shard.crosses_nodes();  // hybrid sharding's groups; dp's without it
  const int per_node = std::max(1, c.node.gpus);
  const int stage_ranks = p.tp * p.dp_cp();
  w.boundary_crosses_nodes.resize(static_cast<std::size_t>(p.pp));
  for (int s = 0; s < p.pp; ++s) {
    const int next = (s + 1) % p.pp;  // the last entry is the interleaved wrap-around p−1 → 0
    w.boundary_crosses_nodes[static_cast<std::size_t>(s)] =
        (s * stage_ranks) / per_node != (next * stage_ranks) / per_node;
  }
  return w;
}

Placement single_node_placement(const Plan& p) {
  Placement w;
  w.boundary_crosses_nodes.assign(static_cast<std::size_t>(p.pp), false);
  return w;
}

namespace {

constexpr OpId kNone = std::numeric_limits<OpId>::max();

struct Streams {
  OpId main = kNone;    // the compute stream and what blocks it (TP collectives, unoverlapped buckets)
  OpId dp = kNone;      // data-parallel communication stream (in order, as NCCL streams are)
  OpId gather = kNone;  // ZeRO-3 gather stream
  OpId pcie_h2d = kNone;  // host → GPU copies, in order
  OpId pcie_d2h = kNone;  // GPU → host copies, in order (the other direction of the same full-duplex link)
  OpId nvme = kNone;
  OpId host = kNone;
  std::vector<OpId> join;  // extra inputs of the next operation on the main chain
};

class Builder {
 public:
  Builder(int layers, const Plan& plan, const Placement& where, const CostSource& costs, const BuildOptions& options)
      : plan_(plan), where_(where), costs_(costs), options_(options), layer_(costs.layer()), edges_(costs.edges()) {
    stages_ = plan.pp;
    chunks_ = plan.model_chunks();
    vstages_ = stages_ * chunks_;
    microbatches_ = plan.grad_accum;
    // Model chunk j holds layers [vstage_begin_[j], vstage_begin_[j + 1]):
    // the plan's partition (balanced or stated: uneven stages, issue 19), each
    // stage cut into equal chunks when interleaved unless the plan states its
    // chunks (plan.hpp virtual_stage_bounds).
    vstage_begin_ = virtual_stage_bounds(plan.stage_layers, layers, stages_, chunks_, plan.chunk_layers);
    for (int j = 0; j < vstages_; ++j)
      layers_per_vstage_ = std::max(layers_per_vstage_, vstage_begin_[static_cast<std::size_t>(j) + 1] -
                                                            vstage_begin_[static_cast<std::size_t>(j)]);
    group_ = choose_group(layers);
    host_optimizer_ = plan.offload_optimizer != OffloadTarget::none;
    // ZeRO-3 holds a use's parameters only while it runs: gathered over dp,
    // and with parameter offload fetched from the host even when dp = 1.
    zero3_ = plan.zero_stage == 3 && (plan.dp_cp() > 1 || plan.offload_params != OffloadTarget::none);
    held_ = zero3_ && plan.zero3_held_through_step();
    first_held_gather_.assign(static_cast<std::size_t>(vstages_), kNone);
    const double group_params = std::min(group_, layers_per_vstage_) * layer_.params;
    prefetch_depth_ = prefetch_depth(group_params);
    g_.stages = stages_;
    g_.chunks = chunks_;
    g_.microbatches = microbatches_;
    add_stage_resources(g_, stages_);
    streams_.resize(static_cast<std::size_t>(stages_));
    const auto steps = static_cast<std::size_t>(microbatches_ * vstages_);
    fwd_first_.assign(steps, kNone);
    fwd_send_.assign(steps, kNone);
    bwd_first_.assign(steps, kNone);
    bwd_send_.assign(steps, kNone);
    // Forward, backward (+ recompute) and their collectives per layer group
    // and micro-batch, plus sends: an estimate that avoids regrowing.
    const double groups = std::ceil(static_cast<double>(layers) / group_) * microbatches_;
    const auto estimate = static_cast<std::size_t>(groups * (layer_.recompute_s > 0 ? 8 : 6)) + 4 * steps + 64;
    g_.ops.reserve(estimate);
    g_.edge_sources.reserve(2 * estimate);
    g_.edge_targets.reserve(2 * estimate);
  }

  OpGraph build() {
    for (int s = 0; s < stages_; ++s) build_stage(s);
    add_embedding_sync();
    for (int s = 0; s < stages_; ++s) optimizer_step(s);
    link_pipeline_sends();
    finalize_graph(g_);
    return std::move(g_);
  }

 private:
  const Plan& plan_;
  const Placement& where_;
  const CostSource& costs_;
  BuildOptions options_;
  LayerTimes layer_;
  EdgeTimes edges_;
  int stages_ = 1;
  int chunks_ = 1;
  int vstages_ = 1;
  int microbatches_ = 1;
  int layers_per_vstage_ = 1;  // the largest model chunk's layers
  std::vector<int> vstage_begin_;  // first layer of each model chunk, then the layer count
  int group_ = 1;
  bool host_optimizer_ = false;
  bool zero3_ = false;
  // ZeRO-3 under a pipeline (Plan::zero3_held_through_step): each use is
  // gathered in micro-batch 0's forward and held to the end of the step.
  bool held_ = false;
  int forward_microbatch_ = 0;  // of the forward being built
  int gathering_vstage_ = 0;     // the model chunk whose forward is being built
  // Held: each model chunk's first gather, which (as FSDP2's pre-forward hook
  // and ztune's ParamStore::acquire) starts only when its first forward does,
  // after the activation arrives (link_pipeline_sends).
  std::vector<OpId> first_held_gather_;
  bool last_microbatch_ = false;  // the backward being built is the step's last micro-batch's
  int prefetch_depth_ = 0;
  OpGraph g_;
  std::vector<Streams> streams_;
  // [mb · vstages + j]: the first compute of each step, and the send of its output
  std::vector<OpId> fwd_first_, fwd_send_, bwd_first_, bwd_send_;
  // per stage while it is built
  std::vector<OpId> uses_;  // ZeRO-3: the op that releases each gathered group, in use order
  double bucket_fill_ = 0;  // gradient elements waiting for the current bucket
  OpId bucket_source_ = kNone;
  std::vector<double> pending_buckets_;  // unoverlapped: buckets issued after the backward
  // A pipeline stage's backward sends its input gradient before it waits for
  // its reductions (DeepSpeed's ReduceGrads after the schedule, Megatron's
  // finish_grad_sync after forward_backward_func, ztune's Trainer before
  // ParamStore::finish_backward): the compute stream's share of the
  // reductions issued in a backward (dp_stall) is charged after its send.
  // Charged before it, every stage's exposed reduction would hold the next
  // stage's drain, pp of them in a row where the analytical model (and the
  // engines) expose one.
  bool defer_dp_stalls_ = false;
  double deferred_dp_stall_s_ = 0;

  // Of layers [lb, le) of the model chunk starting at layer `begin`, how many
  // are recomputed: all of them, or with Megatron's block method those among
  // the chunk's first block_layers.
  [[nodiscard]] double recomputed_in(int begin, int lb, int le) const {
    if (layer_.block_layers <= 0) return le - lb;
    return std::max(0, std::min(le, begin + layer_.block_layers) - lb);
  }

  // Every operation goes through here: the graph stops at options_.op_limit.
  OpId add(const Op& op) {
    if (g_.ops.size() % kStopCheckEvery == 0) throw_if_stopped(options_.stop);
    if (g_.ops.size() >= options_.op_limit)
      throw GraphTooLarge(plan_.summary(), "needs more than " + std::to_string(options_.op_limit) +
                                               " operations to simulate (" + std::to_string(microbatches_) +
                                               " micro-batches through " + std::to_string(vstages_) +
                                               " model chunks); the simulator builds at most that many");
    return add_op(g_, op);
  }

  int choose_group(int layers) const {
    if (options_.layers_per_group > 0) return std::min(options_.layers_per_group, layers_per_vstage_);
    // Operations per layer and micro-batch: forward, backward, (recompute),
    // each with its TP collective, and a ZeRO-3 gather for each of two uses.
    double per_layer = 2;
    if (layer_.recompute_s > 0) per_layer += 1;
    if (plan_.tp > 1) per_layer *= 2;
    if (plan_.zero_stage == 3) per_layer += 2;
    const double estimate = per_layer * layers * microbatches_;
    const auto budget = static_cast<double>(options_.max_ops);
    const int g = estimate <= budget ? 1 : static_cast<int>(std::ceil(estimate / budget));
    return std::clamp(g, 1, layers_per_vstage_);
  }

  // DeepSpeed ZeRO-3 prefetches parameters up to stage3_prefetch_bucket_size
  // elements ahead (at least the next module when the bucket is non-zero),
  // holding at most stage3_max_live_parameters gathered at once.
  //
  // DeepSpeed fetches and releases per module (each Linear), while this graph
  // gathers a layer group at a time. When two groups do not fit in
  // max_live_params but two of the largest modules do, DeepSpeed still fetches
  // the next module while one computes: the graph then prefetches one group
  // ahead, the overlap DeepSpeed's module pipelining gives (the memory model,
  // not this trace, bounds the gathered bytes by max_live_params).
  int prefetch_depth(double group_params) const {
    if (plan_.zero_stage != 3 || group_params <= 0) return 0;
    if (costs_.prefetches_next_module()) return 1;
    if (plan_.prefetch_bucket_elems <= 0) return 0;
    int depth = std::max(1, static_cast<int>(plan_.prefetch_bucket_elems / group_params));
    const int live = static_cast<int>(plan_.max_live_params / group_params) - 1;
    // (time_model.hpp zero3_can_prefetch: the same rule for the analytical model.)
    if (live < 1 && plan_.max_live_params >= 2.0 * layer_.largest_module_params) return 1;
    return std::clamp(depth, 0, std::max(0, live));
  }

  Op make(OpKind kind, int stage, ResourceKind where, double duration) const {
    Op op;
    op.kind = kind;
    op.stage = static_cast<std::int16_t>(stage);
    op.resource = g_.resource_index(stage, where);
    op.duration_s = duration;
    return op;
  }

  OpId add_chained(const Op& op, OpId& tail) {
    const OpId id = add(op);
    if (tail != kNone) add_dependency(g_, tail, id);
    tail = id;
    return id;
  }

  // On the main chain, the next op also waits for pending asynchronous work.
  OpId add_main(int s, const Op& op) {
    Streams& st = streams_[static_cast<std::size_t>(s)];
    const OpId id = add_chained(op, st.main);
    for (const OpId j : st.join) add_dependency(g_, j, id);
    st.join.clear();
    return id;
  }

  ResourceKind level(bool crosses) const { return crosses ? ResourceKind::inter_link : ResourceKind::intra_link; }
  ResourceKind dp_level() const { return level(where_.dp_crosses_nodes); }
  std::size_t key(int microbatch, int vstage) const {
    return static_cast<std::size_t>(microbatch * vstages_ + vstage);
  }

  // ---------------------------------------------------------------- stage

  void build_stage(int s) {
    uses_.clear();
    const auto order = pipeline_schedule(plan_.schedule, stages_, s, microbatches_, chunks_);
    // ZeRO 0/1 reduce gradients once per step: in the last backward of each
    // chunk (DDP's no_sync on the others); ZeRO 2/3 on every micro-batch.
    std::vector<std::size_t> last_backward(static_cast<std::size_t>(chunks_), 0);
    for (std::size_t i = 0; i < order.size(); ++i)
      if (!order[i].forward) last_backward[static_cast<std::size_t>(order[i].chunk)] = i;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const PipeAction& st = order[i];
      if (st.forward) {
        forward_step(s, st);
      } else {
        const bool reduce = plan_.reduces_every_microbatch() || i == last_backward[static_cast<std::size_t>(st.chunk)];
        backward_step(s, st, reduce);
      }
    }
  }

  // Megatron: with tied embeddings the first and last stage each hold the word
  // embedding; after the data-parallel reduction their gradients are
  // all-reduced, before either optimizer step.
  void add_embedding_sync() {
    const double duration = costs_.embedding_sync_s();
    if (stages_ <= 1 || duration <= 0) return;
    const int last = stages_ - 1;
    const bool crosses = where_.boundary_crosses_nodes[static_cast<std::size_t>(last)];
    Op op = make(OpKind::dp_reduce, 0, level(crosses), duration);
    op.peer_stage = -1;
    const OpId id = add(op);
    for (const int s : {0, last}) {
      Streams& st = streams_[static_cast<std::size_t>(s)];
      if (st.main != kNone) add_dependency(g_, st.main, id);
      if (st.dp != kNone) add_dependency(g_, st.dp, id);
      st.join.push_back(id);
    }
  }

  int vstage_of(int s, int chunk) const { return chunk * stages_ + s; }

  OpId compute(int s, OpKind kind, const PipeAction& st, int lb, int le, double duration) {
    Op op = make(kind, s, ResourceKind::compute, duration);
    op.chunk = static_cast<std::int16_t>(st.chunk);
    op.microbatch = st.microbatch;
    op.layer_begin = lb;
    op.layer_end = le;
    return add_main(s, op);
  }

  Op tp_op(int s, const PipeAction& st, int lb, int le, double duration) const {
    Op op = make(OpKind::tp_comm, s, level(where_.tp_crosses_nodes), duration);
    op.chunk = static_cast<std::int16_t>(st.chunk);
    op.microbatch = st.microbatch;
    op.layer_begin = lb;
    op.layer_end = le;
    return op;
  }

  void overhead(int s, const PipeAction* st, int lb, int le, double duration) {
    if (duration <= 0) return;
    Op op = make(OpKind::overhead, s, ResourceKind::compute, duration);
    if (st != nullptr) {
      op.chunk = static_cast<std::int16_t>(st->chunk);
      op.microbatch = st->microbatch;
    }
    op.layer_begin = lb;
    op.layer_end = le;
    add_main(s, op);
  }

  // The compute stream's share of an overlapped transfer (CostSource's
  // *_overlap_loss): a stall at the point the transfer is issued.
  void stall(int s, OpKind kind, double transfer_s, double loss) {
    if (transfer_s <= 0 || loss <= 0) return;
    if (kind == OpKind::dp_stall && defer_dp_stalls_) {
      deferred_dp_stall_s_ += transfer_s * loss;
      return;
    }
    add_main(s, make(kind, s, ResourceKind::compute, transfer_s * loss));
  }

  // Context parallelism's exposed ring exchange after a pass's attention
  // (held on the compute stream: the attention kernel waits for the chunk).
  void cp_exchange(int s, const PipeAction& st, int lb, int le, double duration) {
    if (plan_.cp <= 1 || duration <= 0) return;
    Op op = make(OpKind::cp_comm, s, ResourceKind::compute, duration);
    op.chunk = static_cast<std::int16_t>(st.chunk);
    op.microbatch = st.microbatch;
    op.layer_begin = lb;
    op.layer_end = le;
    add_main(s, op);
  }

  // DeepSpeed-Ulysses' all-to-alls of a pass (blocking: the attention waits
  // for Q, K, V and the next layer for the output; on the compute stream).
  void ulysses_exchange(int s, const PipeAction& st, int lb, int le, double duration) {
    if (plan_.ulysses <= 1 || duration <= 0) return;
    Op op = make(OpKind::ulysses_comm, s, ResourceKind::compute, duration);
    op.chunk = static_cast<std::int16_t>(st.chunk);
    op.microbatch = st.microbatch;
    op.layer_begin = lb;
    op.layer_end = le;
    add_main(s, op);
  }

  void tp_collective(int s, const PipeAction& st, int lb, int le, double duration) {
    if (plan_.tp <= 1 || duration <= 0) return;
    add_main(s, tp_op(s, st, lb, le, duration));
  }

  // Megatron's backward issues the input-gradient collectives asynchronously
  // and runs the weight-gradient GEMMs meanwhile: the backward is split so
  // that the collectives run beside its last `window` seconds.
  // Returns the first and the last compute op of the backward.
  std::pair<OpId, OpId> backward_compute(int s, const PipeAction& st, int lb, int le, double n) {
    const double async = plan_.tp > 1 ? n * layer_.tp_backward_async_s : 0.0;
    const double window = std::min(n * layer_.tp_backward_window_s, n * layer_.backward_s);
    if (async <= 0 || window <= 0) {
      const OpId b = compute(s, OpKind::backward, st, lb, le, n * layer_.backward_s);
      tp_collective(s, st, lb, le, n * layer_.tp_backward_s + async);
      return {b, b};
    }
    const OpId head = compute(s, OpKind::backward, st, lb, le, n * layer_.backward_s - window);
    const OpId tail = compute(s, OpKind::backward, st, lb, le, window);
    Op op = tp_op(s, st, lb, le, async);
    const OpId a = add(op);
    add_dependency(g_, head, a);
    streams_[static_cast<std::size_t>(s)].join.push_back(a);
    tp_collective(s, st, lb, le, n * layer_.tp_backward_s);
    return {head, tail};
  }

  // ZeRO-3: gather `params` (this GPU's tensor-parallel share, unpartitioned)
  // before a use; with offloaded parameters, fetch the partition first. The
  // gather waits until the use prefetch_depth+1 earlier released its buffer.
  OpId gather(int s, double params, bool backward = false) {
    if (!zero3_ || params <= 0) return kNone;
    if (held_ && (backward || forward_microbatch_ > 0)) return kNone;  // still held from micro-batch 0
    Streams& st = streams_[static_cast<std::size_t>(s)];
    // The 16-bit parameters the use holds; what the wire carries may differ (ZeRO++ int8).
    const double bytes = params * costs_.param_bytes_per_param();
    const double partition = bytes / plan_.shard_group();  // ZeRO's partition: dp × cp × ulysses, or dp_shard
    const std::size_t use = uses_.size();
    const std::size_t lag = static_cast<std::size_t>(prefetch_depth_) + 1;
    const OpId release = use >= lag ? uses_[use - lag] : kNone;
    OpId first = kNone;
    // A prefetched fetch still costs the compute stream the profile's overlap
    // loss, as the analytical model's exposed() charges it (time_model.cpp).
    if (plan_.offload_params == OffloadTarget::nvme) {
      Op read = make(OpKind::nvme_read, s, ResourceKind::nvme, costs_.nvme_s(partition));
      read.bytes = partition;
      if (prefetch_depth_ > 0) stall(s, OpKind::offload_stall, read.duration_s, costs_.offload_overlap_loss());
      first = add_chained(read, st.nvme);
    }
    if (plan_.offload_params != OffloadTarget::none) {
      Op copy = make(OpKind::pcie_h2d, s, ResourceKind::pcie_h2d, costs_.pcie_s(partition));
      copy.bytes = partition;
      if (prefetch_depth_ > 0) stall(s, OpKind::offload_stall, copy.duration_s, costs_.offload_overlap_loss());
      const OpId id = add_chained(copy, st.pcie_h2d);
      if (first != kNone) add_dependency(g_, first, id);
      else first = id;
    }
    // With dp = 1 there is nothing to gather: the op only marks the fetched
    // parameters as resident.
    const bool gathers = plan_.dp_cp() > 1;
    Op op = make(OpKind::zero3_gather, s, level(where_.shard_crosses_nodes),
                 gathers ? costs_.zero3_gather_s(params, backward) : 0.0);
    op.bytes = gathers ? costs_.zero3_gather_bytes(params, backward) : 0.0;
    if (prefetch_depth_ > 0) stall(s, OpKind::zero3_stall, op.duration_s, costs_.zero3_overlap_loss());
    op.gathered_param_delta = bytes;
    const OpId id = add_chained(op, st.gather);
    if (first != kNone) add_dependency(g_, first, id);
    else first = id;
    if (release != kNone) add_dependency(g_, release, first);
    if (held_ && first_held_gather_[static_cast<std::size_t>(gathering_vstage_)] == kNone)
      first_held_gather_[static_cast<std::size_t>(gathering_vstage_)] = first;
    uses_.push_back(kNone);  // filled by the op that releases it
    return id;
  }

  void consume(OpId gathered, OpId user, bool releases) {
    if (gathered == kNone) return;
    add_dependency(g_, gathered, user);
    if (!releases || held_) return;
    g_.ops[user].gathered_param_delta = -g_.ops[gathered].gathered_param_delta;  // what it held, not what crossed the wire
    uses_.back() = user;
  }

  void forward_step(int s, const PipeAction& st) {
    forward_microbatch_ = st.microbatch;
    const int j = vstage_of(s, st.chunk);
    gathering_vstage_ = j;
    OpId first = kNone;
    if (st.chunk == 0) {
      // The schedule's per-micro-batch host work; not a compute input of
      // the micro-batch, so the incoming activation is awaited after it.
      overhead(s, &st, -1, -1, costs_.microbatch_overhead_s());
    }
    if (j == 0) {
      const OpId gp = gather(s, edges_.embedding_params);
      first = compute(s, OpKind::embedding_fwd, st, -1, -1, edges_.embedding_forward_s);
      consume(gp, first, true);
      tp_collective(s, st, -1, -1, edges_.embedding_tp_s);
    }
    const int begin = vstage_begin_[static_cast<std::size_t>(j)];
    const int end = vstage_begin_[static_cast<std::size_t>(j) + 1];
    OpId last_forward = kNone;
    for (int lb = begin; lb < end; lb += group_) {
      const int le = std::min(end, lb + group_);
      const double n = le - lb;
      const OpId gp = gather(s, n * layer_.params);
      const double r = recomputed_in(begin, lb, le);
      const OpId f = compute(s, OpKind::forward, st, lb, le, n * layer_.forward_s);
      g_.ops[f].activation_delta =
          r * layer_.stored_activation_bytes + (n - r) * (layer_.stored_activation_bytes + layer_.recompute_extra_bytes);
      consume(gp, f, true);
      if (first == kNone) first = f;
      last_forward = f;
      cp_exchange(s, st, lb, le, n * layer_.cp_forward_s);
      ulysses_exchange(s, st, lb, le, n * layer_.ulysses_forward_s);
      tp_collective(s, st, lb, le, n * layer_.tp_forward_s);
      overhead(s, &st, lb, le, n * layer_.forward_overhead_s);
      stall(s, OpKind::offload_stall, n * layer_.checkpoint_copy_s, 1.0);  // the checkpoint to the host
    }
    // The chunk's output, kept until its backward begins.
    if (last_forward != kNone) g_.ops[last_forward].activation_delta += layer_.chunk_output_bytes;
    if (j == vstages_ - 1) {
      const OpId gp = gather(s, edges_.head_params);
      const OpId h = compute(s, OpKind::head_fwd, st, -1, -1, edges_.head_forward_s);
      consume(gp, h, true);
      tp_collective(s, st, -1, -1, edges_.head_tp_forward_s);
      if (first == kNone) first = h;  // a last chunk of no layers (Plan::chunk_layers) begins at the head
    }
    fwd_first_[key(st.microbatch, j)] = first;
    if (j + 1 < vstages_) fwd_send_[key(st.microbatch, j)] = pipeline_send(s, j, j + 1, st.microbatch);
  }

  void backward_step(int s, const PipeAction& st, bool reduce) {
    last_microbatch_ = st.microbatch == microbatches_ - 1;
    defer_dp_stalls_ = vstages_ > 1;
    const int j = vstage_of(s, st.chunk);
    OpId first = kNone;
    if (j == vstages_ - 1) {
      const OpId gp = gather(s, edges_.head_params, true);
      first = compute(s, OpKind::head_bwd, st, -1, -1, edges_.head_backward_s);
      consume(gp, first, true);
      tp_collective(s, st, -1, -1, edges_.head_tp_backward_s);
      if (reduce) produce_gradients(s, first, edges_.head_params);
    }
    const int begin = vstage_begin_[static_cast<std::size_t>(j)];
    const int end = vstage_begin_[static_cast<std::size_t>(j) + 1];
    // Backward walks the chunk's layers in reverse, group by group.
    const int groups = (end - begin + group_ - 1) / group_;
    for (int gi = groups - 1; gi >= 0; --gi) {
      const int lb = begin + gi * group_;
      const int le = std::min(end, lb + group_);
      const double n = le - lb;
      OpId gp = gather(s, n * layer_.params, true);
      stall(s, OpKind::offload_stall, n * layer_.checkpoint_copy_s, 1.0);  // and back, before its recomputation
      const double rn = recomputed_in(begin, lb, le);
      if (layer_.recompute_s > 0 && rn > 0) {
        const OpId r = compute(s, OpKind::recompute, st, lb, le, rn * layer_.recompute_s);
        g_.ops[r].activation_delta = rn * layer_.recompute_extra_bytes;
        // A regathering engine (DeepSpeed) released part of the group after
        // the recomputation; the backward gathers that share again.
        const bool regather = layer_.regather_share > 0;
        consume(gp, r, regather);
        if (regather) gp = gather(s, rn * layer_.params * layer_.regather_share, true);
        if (first == kNone) first = r;
        cp_exchange(s, st, lb, le, rn * layer_.cp_recompute_s);
        ulysses_exchange(s, st, lb, le, rn * layer_.ulysses_recompute_s);
        if (layer_.tp_recompute_s > 0) tp_collective(s, st, lb, le, rn * layer_.tp_recompute_s);
        overhead(s, &st, lb, le, rn * layer_.recompute_overhead_s);
      }
      const auto [b_first, b] = backward_compute(s, st, lb, le, n);
      g_.ops[b].activation_delta = -n * (layer_.stored_activation_bytes + layer_.recompute_extra_bytes);
      if (b_first != b) consume(gp, b_first, false);
      consume(gp, b, true);
      if (first == kNone) first = b_first;
      cp_exchange(s, st, lb, le, n * layer_.cp_backward_s);
      ulysses_exchange(s, st, lb, le, n * layer_.ulysses_backward_s);
      overhead(s, &st, lb, le, n * layer_.backward_overhead_s);
      if (reduce) produce_gradients(s, b, n * layer_.params);
    }
    if (j == 0) {
      const OpId gp = gather(s, edges_.embedding_params, true);
      const OpId e = compute(s, OpKind::embedding_bwd, st, -1, -1, edges_.embedding_backward_s);
      consume(gp, e, true);
      if (first == kNone) first = e;  // a first chunk of no layers (Plan::chunk_layers) is its embedding's backward
      if (reduce) produce_gradients(s, e, edges_.embedding_params);
    }
    // DeepSpeed's BF16_Optimizer folds the gradients into fp32 before the
    // stage sends its gradient on (an overhead op of the stage, split over its
    // model chunks).
    overhead(s, &st, -1, -1, costs_.gradient_fold_s() * stages_ / vstages_);
    // The gradient goes to the previous stage as soon as the backward is done;
    // an unoverlapped reduction holds the compute stream, not the send.
    if (first != kNone && end > begin) g_.ops[first].activation_delta -= layer_.chunk_output_bytes;
    bwd_first_[key(st.microbatch, j)] = first;
    if (j > 0) bwd_send_[key(st.microbatch, j)] = pipeline_send(s, j, j - 1, st.microbatch);
    defer_dp_stalls_ = false;
    if (deferred_dp_stall_s_ > 0) add_main(s, make(OpKind::dp_stall, s, ResourceKind::compute, deferred_dp_stall_s_));
    deferred_dp_stall_s_ = 0;
    if (reduce) flush_gradients(s);
  }

  // ---------------------------------------------------------------- gradients

  // 1-bit Adam's compression phase reduces no gradients: each rank updates its
  // momentum locally and exchanges it compressed in the optimizer step.
  bool onebit() const { return plan_.onebit_adam && plan_.dp_cp() > 1; }
  bool gradients_leave_gpu() const { return (plan_.dp_cp() > 1 && !onebit()) || host_optimizer_; }

  // DeepSpeed / Megatron DDP fill reduce buckets in the order the backward
  // produces gradients and launch each one when it is full.
  void produce_gradients(int s, OpId source, double params) {
    if (!gradients_leave_gpu() || params <= 0) return;
    bucket_fill_ += params;
    bucket_source_ = source;
    const double cap = plan_.reduce_bucket_elems > 0 ? plan_.reduce_bucket_elems : bucket_fill_;
    while (bucket_fill_ >= cap) {
      issue_bucket(s, cap);
      bucket_fill_ -= cap;
    }
  }

  void flush_gradients(int s) {
    if (bucket_fill_ > 0) issue_bucket(s, bucket_fill_);
    bucket_fill_ = 0;
    bucket_source_ = kNone;
    // ZeRO 2/3 reduce every micro-batch, and the backward call returns only
    // when its reductions (and, offloaded, their copies to the host) are done:
    // DeepSpeed's independent_gradient_partition_epilogue synchronizes the
    // reduction stream, ztune's ParamStore::finish_backward waits on every
    // pending request. The next micro-batch's work waits for them.
    if (plan_.overlap_comm && plan_.zero_stage >= 2) {
      Streams& st = streams_[static_cast<std::size_t>(s)];
      if (st.dp != kNone) st.join.push_back(st.dp);
      if (host_optimizer_ && st.pcie_d2h != kNone) st.join.push_back(st.pcie_d2h);
    }
    // Without overlap the reduction runs after the backward, and the compute
    // stream waits for it (DeepSpeed overlap_comm=false; Megatron without
    // --overlap-grad-reduce).
    Streams& st = streams_[static_cast<std::size_t>(s)];
    for (const double elems : pending_buckets_) {
      const OpId id = reduce_bucket(s, elems, st.main);
      if (id != kNone) st.main = id;
    }
    pending_buckets_.clear();
  }

  void issue_bucket(int s, double elems) {
    if (!plan_.overlap_comm) {
      pending_buckets_.push_back(elems);
      return;
    }
    reduce_bucket(s, elems, bucket_source_);
  }

  // One bucket: its reduction over the dp group (all-reduce for ZeRO 0,
  // reduce-scatter for 1-3), then with optimizer offload the copy of this
  // GPU's reduced partition to the host. Both wait for `after`. Returns what
  // an unoverlapped compute stream waits for: the reduction (or the copy when
  // there is none).
  OpId reduce_bucket(int s, double elems, OpId after) {
    Streams& st = streams_[static_cast<std::size_t>(s)];
    const double bytes = elems * costs_.grad_bytes_per_param();
    OpId reduced = kNone;
    if (plan_.dp_cp() > 1 && !onebit()) {
      const auto kind = plan_.zero_stage == 0 || (plan_.zero_stage <= 2 && !plan_.reduce_scatter)
                            ? DpCollective::all_reduce
                            : DpCollective::reduce_scatter;
      const double t = plan_.zero_stage == 3 ? costs_.zero3_reduce_s(bytes) : costs_.dp_collective_s(kind, bytes);
      const bool hybrid = plan_.zero_stage == 3 && plan_.hybrid_sharded();
      Op op = make(OpKind::dp_reduce, s, hybrid ? level(where_.shard_crosses_nodes) : dp_level(), t);
      op.bytes = bytes;
      reduced = add_chained(op, st.dp);
      if (after != kNone) add_dependency(g_, after, reduced);
      if (plan_.overlap_comm) stall(s, OpKind::dp_stall, t, costs_.dp_overlap_loss());
      // Hybrid sharding: the reduce-scattered partition summed across the
      // replicas over the nodes' NICs, after every micro-batch's reduction
      // (FSDP) or only the last one's (MiCS: the accumulation boundary).
      if (hybrid && (costs_.replica_reduce_every_microbatch() || last_microbatch_)) {
        const double r = costs_.replica_reduce_s(bytes);
        Op ar = make(OpKind::dp_reduce, s, dp_level(), r);
        ar.bytes = bytes / plan_.shard_group();
        reduced = add_chained(ar, st.dp);
        if (plan_.overlap_comm) stall(s, OpKind::dp_stall, r, costs_.dp_overlap_loss());
      }
    }
    if (!host_optimizer_) return reduced;
    const double partition =
        plan_.zero_stage >= 1 ? bytes / plan_.shard_group() : bytes;
    Op copy = make(OpKind::pcie_d2h, s, ResourceKind::pcie_d2h, costs_.pcie_s(partition));
    copy.bytes = partition;
    if (plan_.overlap_comm) stall(s, OpKind::offload_stall, copy.duration_s, costs_.offload_overlap_loss());
    const OpId id = add_chained(copy, st.pcie_d2h);
    if (reduced != kNone) add_dependency(g_, reduced, id);
    else if (after != kNone) add_dependency(g_, after, id);
    return reduced != kNone ? reduced : id;
  }

  // ---------------------------------------------------------------- optimizer

  double stage_params(int s) const {
    double params = 0;
    for (int c = 0; c < chunks_; ++c) {
      const int j = vstage_of(s, c);
      params += (vstage_begin_[static_cast<std::size_t>(j) + 1] - vstage_begin_[static_cast<std::size_t>(j)]) *
                layer_.params;
      if (j == 0) params += edges_.embedding_params;
      if (j == vstages_ - 1) params += edges_.head_params;
    }
    return params;
  }

  void optimizer_step(int s) {
    Streams& st = streams_[static_cast<std::size_t>(s)];
    const double params = stage_params(s);
    const double partition =
        plan_.zero_stage >= 1 ? params / plan_.shard_group() : params;
    OpId updated = kNone;  // after which the updated parameters are on the GPU
    overhead(s, nullptr, -1, -1, costs_.step_overhead_s());
    if (onebit()) {
      // 1-bit Adam (onebit_adam.hpp): the compressed momentum's all-to-all +
      // all-gather after the backward, exposed; the optimizer waits for it.
      Op op = make(OpKind::dp_reduce, s, dp_level(), costs_.onebit_exchange_s(params));
      op.bytes = 2.0 * params / 8.0;  // signs sent in the all-to-all and again in the all-gather
      const OpId id = add_chained(op, st.dp);
      if (st.main != kNone) add_dependency(g_, st.main, id);
    }
    if (!host_optimizer_) {
      const double kernels = onebit() ? costs_.onebit_kernels_s(params) : 0.0;
      Op op = make(OpKind::optimizer_gpu, s, ResourceKind::compute, costs_.gpu_optimizer_s(partition) + kernels);
      updated = add_main(s, op);
      if (st.dp != kNone) add_dependency(g_, st.dp, updated);
    } else {
      updated = host_optimizer(s, partition);
    }
    // ZeRO-1/2: every rank updated its partition; all-gather the 16-bit
    // parameters in allgather_bucket_size buckets.
    if ((plan_.zero_stage == 1 || plan_.zero_stage == 2) && plan_.dp > 1) {
      const double cap = plan_.allgather_bucket_elems > 0 ? plan_.allgather_bucket_elems : params;
      for (double left = params; left > 0; left -= cap) {
        const double bytes = std::min(cap, left) * costs_.param_bytes_per_param();
        Op op = make(OpKind::dp_param_gather, s, dp_level(),
                     costs_.dp_collective_s(DpCollective::all_gather, bytes));
        op.bytes = bytes;
        const OpId id = add_chained(op, st.dp);
        if (updated != kNone) add_dependency(g_, updated, id);
      }
    }
  }

  // ZeRO-Offload / ZeRO-Infinity: CPU Adam in sub-groups; with NVMe the
  // states of each sub-group are read before and written after its update;
  // updated 16-bit parameters go back over PCIe unless they live on the host.
  OpId host_optimizer(int s, double partition) {
    Streams& st = streams_[static_cast<std::size_t>(s)];
    const OpId grads_ready = st.pcie_d2h;  // the last gradient copy
    const std::vector<OpId> joins = std::move(st.join);
    st.join.clear();
    const int groups = std::clamp(static_cast<int>(std::ceil(partition / options_.host_subgroup_params)), 1,
                                  options_.max_host_subgroups);
    const double each = partition / groups;
    OpId last = kNone;
    for (int k = 0; k < groups; ++k) {
      OpId read = kNone;
      if (plan_.offload_optimizer == OffloadTarget::nvme) {
        const double bytes = each * costs_.optimizer_state_bytes_per_param();
        Op op = make(OpKind::nvme_read, s, ResourceKind::nvme, costs_.nvme_s(bytes));
        op.bytes = bytes;
        read = add_chained(op, st.nvme);
        // The swap-in is part of the step (DeepSpeed's optimizer swapper, the
        // executor's NvmeOptimizerStates::step): it waits for the gradients,
        // it is not prefetched during the backward.
        if (grads_ready != kNone) add_dependency(g_, grads_ready, read);
        if (st.dp != kNone) add_dependency(g_, st.dp, read);
        for (const OpId j : joins) add_dependency(g_, j, read);
      }
      Op adam = make(OpKind::optimizer_host, s, ResourceKind::host_cpu, costs_.host_optimizer_s(each));
      const OpId step = add_chained(adam, st.host);
      if (read != kNone) add_dependency(g_, read, step);
      if (grads_ready != kNone) add_dependency(g_, grads_ready, step);
      if (st.dp != kNone) add_dependency(g_, st.dp, step);
      for (const OpId j : joins) add_dependency(g_, j, step);
      last = step;
      if (plan_.offload_optimizer == OffloadTarget::nvme) {
        const double bytes = each * costs_.optimizer_state_bytes_per_param();
        Op op = make(OpKind::nvme_write, s, ResourceKind::nvme, costs_.nvme_s(bytes));
        op.bytes = bytes;
        add_dependency(g_, step, add_chained(op, st.nvme));
      }
      if (plan_.offload_params == OffloadTarget::none) {
        const double bytes = each * costs_.param_bytes_per_param();
        Op op = make(OpKind::pcie_h2d, s, ResourceKind::pcie_h2d, costs_.pcie_s(bytes));
        op.bytes = bytes;
        const OpId copy = add_chained(op, st.pcie_h2d);
        add_dependency(g_, step, copy);
        last = copy;
      }
    }
    // The GPU's compute stream ends the iteration after the backward; the
    // next one starts with the updated parameters.
    if (st.main != kNone && last != kNone) add_dependency(g_, st.main, last);
    return last;
  }

  // ---------------------------------------------------------------- pipeline

  int stage_of(int vstage) const { return vstage % stages_; }

  // The output of virtual stage `from_vstage` (on stage s) sent to its
  // neighbour, after the step's last op. Megatron and DeepSpeed wait for
  // their pipeline sends (Megatron synchronises after batch_isend_irecv), so
  // with blocking_p2p the sender's compute stream waits for it too.
  OpId pipeline_send(int s, int from_vstage, int to_vstage, int mb) {
    const int to = stage_of(to_vstage);
    // The boundary between stage b and b+1 (b = p−1 is the wrap-around).
    const int boundary = to_vstage > from_vstage ? s : to;
    const bool crosses = where_.boundary_crosses_nodes[static_cast<std::size_t>(boundary)];
    Op op = make(OpKind::pp_send, s, level(crosses), costs_.p2p_s(crosses));
    op.peer_stage = static_cast<std::int16_t>(to);
    op.chunk = static_cast<std::int16_t>(from_vstage / stages_);
    op.microbatch = mb;
    op.bytes = costs_.p2p_bytes();
    Streams& st = streams_[static_cast<std::size_t>(s)];
    if (options_.blocking_p2p) return add_main(s, op);
    const OpId id = add(op);
    if (st.main != kNone) add_dependency(g_, st.main, id);
    return id;
  }

  // The receiving step waits for the send.
  void link_pipeline_sends() {
    for (int mb = 0; mb < microbatches_; ++mb) {
      for (int j = 0; j < vstages_; ++j) {
        const OpId f = fwd_send_[key(mb, j)];
        if (f != kNone) add_dependency(g_, f, fwd_first_[key(mb, j + 1)]);
        if (f != kNone && mb == 0 && first_held_gather_[static_cast<std::size_t>(j) + 1] != kNone)
          add_dependency(g_, f, first_held_gather_[static_cast<std::size_t>(j) + 1]);
        const OpId b = bwd_send_[key(mb, j)];
        if (b != kNone) add_dependency(g_, b, bwd_first_[key(mb, j - 1)]);
      }
    }
  }
};

}  // namespace

double fewest_ops(const Plan& plan) {
  return 2.0 * plan.pp * plan.model_chunks() * static_cast<double>(plan.grad_accum);
}

OpGraph build_iteration_graph(int layers, const Plan& plan, const Placement& where, const CostSource& costs,
                              const BuildOptions& options) {
  Builder b(layers, plan, where, costs, options);
  return b.build();
}

}  // namespace ztune::sim
