#pragma once
// The plan space, built from small generator functions (STYLE.md #14): the
// device layouts (dp × tp × pp = devices used) form the outer loop, which the
// search splits across threads; inside a layout, the inner dimensions are
// enumerated as lists prepared once per layout, so generating a plan costs a few
// stores. Layout-level rules (tp inside a node, tp dividing heads, pp at most
// the layers) reject a whole layout at once and are counted in plans. A pp
// that does not divide the layers gives balanced uneven stages (issue 19).
//
// Example: SearchSpace s(model, cluster, opts); s.for_each_plan(s.layouts()[0], f);
#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/tuner/search_options.hpp"

namespace ztune {

/// The positive divisors of n, ascending, in n's own type (divisors(12) = 1 2 3
/// 4 6 12): a global batch's (64-bit) are not cut to int.
template <std::integral T>
std::vector<T> divisors(T n) {
  std::vector<T> small, large;
  for (T d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

/// Sequences at least this long get context parallelism in the default space
/// (SpaceOptions::max_cp 0): NeMo's and Megatron-Core's recipes turn it on
/// from 8k tokens (the Llama 3.1 recipes at seq 8192 use cp 2), where the
/// s/cp activations pay for the ring; shorter ones are searched with cp 1.
inline constexpr int kContextParallelMinSeq = 8192;
/// The largest cp the default space tries: one node's worth (the ring's
/// neighbours on NVLink, as Megatron-Core's tp-cp-dp order places them).
inline constexpr int kContextParallelMaxDefault = 8;
/// The largest degree a sequence is split into by default (cp and Ulysses
/// alike): the bound asked (--max-cp, --max-ulysses), else up to
/// kContextParallelMaxDefault from kContextParallelMinSeq tokens, else none.
[[nodiscard]] int sequence_split_limit(int bound, const Transformer& m);

/// Why a whole layout is outside the space.
enum class LayoutRule : std::uint8_t {
  none,
  tp_across_nodes,  // tp does not fit inside a node (--allow-tp-across-nodes lifts it)
  tp_shape,         // check_plan: tp does not divide heads / kv heads / ffn
  pp_layers,        // check_plan: more stages than layers
  fp8_shape,        // check_plan: with FP8, tp leaves weight dimensions that are not multiples of 16
  other,            // check_plan broke another rule for this layout
  unlaunchable,     // the engine's launcher cannot start the ranks with each tp group inside a node
};

/// One device layout: the outer loop of the search.
struct Layout {
  int gpus = 0;
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int cp = 1;  // context parallelism (context_parallel_degrees)
  int ulysses = 1;  // DeepSpeed-Ulysses (ulysses_degrees; never with cp > 1)
  LayoutRule rejected = LayoutRule::none;
  std::string reason;       // check_plan's message when rejected by it
  std::int64_t plans = 0;   // plans inside this layout (also when rejected)
  std::int64_t first_id = 0;  // id of its first plan (ids number the whole space)
};

/// The zero/offload/1-bit/ZeRO++ choices, valid together by construction.
struct StateChoice {
  int zero_stage = 0;
  OffloadTarget offload_optimizer = OffloadTarget::none;
  OffloadTarget offload_params = OffloadTarget::none;
  bool onebit_adam = false;
  bool zeropp = false;
  int dp_shard = 0;  // hybrid sharding (ZeRO-3 only): shard group size, 0 = all of dp × cp
};

/// Shard-group sizes the space tries for hybrid sharding when the weights'
/// data-parallel group spans nodes: one node's data-parallel ranks, and that
/// times 2, 4 and 8 while it divides dp × cp and is smaller (HSDP's usual
/// "shard within the node", MiCS' partition groups of a few nodes).
inline constexpr int kHybridShardNodeMultiples[] = {1, 2, 4, 8};

/// The attention core: a dense kernel, or a block-sparse layout (standard kernel).
struct AttentionChoice {
  SparseLayout layout = SparseLayout::none;
  AttentionKernel kernel = AttentionKernel::standard;
};

/// Whether the space holds recomputation `r` (selective under policy `s`) with
/// attention `a`. Korthikanti's selective recomputation re-runs only the
/// attention core to drop its s×s tensors; a flash kernel stores none, so
/// flash + that selective would repeat flash + none at a higher price and is
/// left out. The engines' other policies (torchtitan's op-level SAC) drop GEMM
/// outputs and go with any kernel.
[[nodiscard]] constexpr bool recompute_fits(Recompute r, SelectivePolicy s, const AttentionChoice& a) {
  return !(r == Recompute::selective && s == SelectivePolicy::attention && fused_attention(a.kernel));
}

/// How a tensor-parallel layout splits the activations outside its
/// tensor-parallel regions: not at all, by sequence parallelism (Korthikanti
/// et al. 2022), or only the full-recomputation checkpoints (ZeRO-R Pa).
enum class ActivationSplit : std::uint8_t { none, sequence_parallel, partitioned };

/// Whether split `a` goes with recomputation `r` (Pa partitions the checkpoints
/// of full recomputation only).
[[nodiscard]] constexpr bool split_fits(ActivationSplit a, Recompute r) {
  return a != ActivationSplit::partitioned || r == Recompute::full;
}

/// Context parallelism runs dense ring attention: no block-sparse layout with cp > 1.
[[nodiscard]] constexpr bool cp_fits(const Layout& l, const AttentionChoice& a) {
  return l.cp == 1 || a.layout == SparseLayout::none;
}

/// A pipeline schedule with its virtual stage count.
struct ScheduleChoice {
  Schedule schedule = Schedule::one_f_one_b;
  int virtual_stages = 1;
  /// Megatron-Core's accounting layout (Plan::chunk_layers) when not empty:
  /// the embedding and the loss counted as layers of the first and last chunk.
  std::vector<int> chunk_layers{};
};

/// What laying out a large space reports and obeys (millions of device counts
/// take seconds): `progress(counts_done, counts_total, plans_so_far)` every
/// 100 ms or so, and `stop`, which ends the enumeration early (interrupted()).
struct EnumerationHooks {
  std::function<void(std::int64_t, std::int64_t, std::int64_t)> progress;
  const std::atomic<bool>* stop = nullptr;
};

/// A space of more than SpaceOptions::max_plans plans: the message names
/// --max-plans, the devices and what narrows the space. Its own type, so the
/// fit hints, whose probes search wider spaces than the user's, can say a probe
/// went past the cap instead of losing the search's result to it.
class PlanSpaceOverCap : public InputError {
 public:
  using InputError::InputError;
};

class SearchSpace {
 public:
  /// Throws InputError (naming the flag) for constraints the cluster or model cannot
  /// meet, and PlanSpaceOverCap for a space of more than o.max_plans plans.
  SearchSpace(const Transformer& m, const Cluster& c, const SpaceOptions& o, const EnumerationHooks& hooks = {});

  /// Whether hooks.stop ended the enumeration: the layouts are those laid out so far.
  [[nodiscard]] bool interrupted() const { return interrupted_; }

  [[nodiscard]] const std::vector<Layout>& layouts() const { return layouts_; }
  /// Plans in the whole space, rejected layouts included.
  [[nodiscard]] std::int64_t size() const { return size_; }
  [[nodiscard]] std::int64_t global_batch() const { return global_batch_; }
  [[nodiscard]] const std::vector<Precision>& precisions() const { return precisions_; }
  /// The device counts searched.
  [[nodiscard]] const std::vector<int>& gpu_counts() const { return gpu_counts_; }
  /// The freeze_step 1-bit Adam plans get (options' or the default fraction of the run).
  [[nodiscard]] int onebit_freeze_step() const { return freeze_step_; }
  /// The attention cores searched: dense standard, dense flash (where the
  /// GPUs and the engine have it), the requested sparse layout.
  [[nodiscard]] const std::vector<AttentionChoice>& attention_choices() const { return attention_; }

  /// Calls f(const Plan&) for every plan of the layout, ids first_id, first_id+1, ...
  template <class F>
  void for_each_plan(const Layout& l, F&& f) const;

  // Generators for one layout's inner dimensions (public for tests).
  [[nodiscard]] std::vector<ScheduleChoice> schedules(const Layout& l) const;
  [[nodiscard]] std::vector<StateChoice> states(const Layout& l) const;
  [[nodiscard]] std::vector<int> micro_batches(const Layout& l) const;
  /// none; with tp >= 2 also sequence parallelism, and Pa where the engine
  /// runs it (DeepSpeed, Megatron-LM).
  [[nodiscard]] std::vector<ActivationSplit> activation_splits(const Layout& l) const;
  /// The context-parallel degrees searched for `rest` = devices / tp ranks:
  /// the divisors c of rest with 2c dividing the sequence (load-balanced
  /// chunks), up to max_cp (0: 1 only below kContextParallelMinSeq tokens,
  /// else up to kContextParallelMaxDefault), or the --cp pin.
  [[nodiscard]] std::vector<int> context_parallel_degrees(int rest) const;
  /// The DeepSpeed-Ulysses degrees searched for `rest` = devices / tp ranks
  /// (with cp 1): the divisors u of rest that divide the sequence, the heads
  /// per tp rank and the KV heads per tp rank, up to max_ulysses (0: as cp's
  /// default), or the --ulysses pin; {1} for engines without Ulysses.
  [[nodiscard]] std::vector<int> ulysses_degrees(int tp, int rest) const;
  /// The hybrid-sharding group sizes searched for a layout (empty when its
  /// dp × cp ranks fit one node), or the --dp-shard pin.
  [[nodiscard]] std::vector<int> shard_group_sizes(const Layout& l) const;
  /// Micro-batches usable with `s`: interleaving needs grad_accum divisible by pp.
  [[nodiscard]] std::vector<int> micro_batches_for(const Layout& l, const ScheduleChoice& s) const;

 private:
  [[nodiscard]] std::int64_t count_plans(const Layout& l) const;
  [[nodiscard]] std::vector<StateChoice> all_states(const Layout& l) const;  // before the --zero pin
  void classify(Layout& l) const;

  const Transformer* model_;
  const Cluster* cluster_;
  SpaceOptions options_;
  std::int64_t global_batch_ = 0;
  std::vector<int> gpu_counts_;
  std::vector<Precision> precisions_;
  std::vector<AttentionChoice> attention_;
  int freeze_step_ = 0;
  bool tp_comm_overlap_ = false;  // megatron on GPUs Transformer Engine runs on (supports_transformer_engine)
  bool cpu_checkpointing_ = false;  // deepspeed on GPUs: full recomputation's checkpoints on the device or the host
  bool optimizer16_ = false;  // the options pin 16-bit optimizer states (Plan::low_precision_optimizer)
  bool pipelined_zero3_ = false;
  /// ztune's engine on GPUs: its executor runs context parallelism, Ulysses
  /// and hybrid sharding on the CPU backend only (engine_violation with the
  /// cluster), so the space leaves them out.
  bool cpu_backend_modes_only_ = false;  // the engine runs ZeRO-3 under a pipeline (Plan::zero3_held_through_step)
  /// What the engine's selective recomputation recomputes: torchtitan's
  /// op-level SAC for fsdp (its selective mode), the attention core elsewhere.
  SelectivePolicy selective_policy_ = SelectivePolicy::attention;
  std::vector<Recompute> recomputes_;  // the modes searched: the pinned one, else kRecomputeModes
  /// Where full recomputation's checkpoints can live: the device, and the host too with cpu_checkpointing_.
  [[nodiscard]] int checkpoint_homes(Recompute r) const { return r == Recompute::full && cpu_checkpointing_ ? 2 : 1; }
  std::vector<Layout> layouts_;
  std::int64_t size_ = 0;
  bool interrupted_ = false;
};

/// How many plans an opt-in option (1-bit Adam, ZeRO++, a sparse layout) adds
/// to the space: its size with the option minus its size without it.
struct OptionPlans {
  std::string option;  // the search flag, e.g. "--onebit-adam"
  std::int64_t added = 0;
};
[[nodiscard]] std::vector<OptionPlans> plans_added_by_options(const Transformer& m, const Cluster& c,
                                                              const SpaceOptions& o);

/// The precisions a search with these options covers (the pinned one, else
/// the cluster's default); throws InputError for one the devices lack.
[[nodiscard]] std::vector<Precision> searched_precisions(const SpaceOptions& o, const Cluster& c);

/// Whether the fused attention kernel of a plan at `precision` is left out of
/// the search, unless --attention pins it, because the kernel the executor
/// would run is not the one the cost model prices: ztune's CUDA executor in
/// fp32 runs its own SIMT fp32 kernel, far slower than FlashAttention-2.
[[nodiscard]] bool fused_attention_unpriced(const SpaceOptions& o, const Transformer& m, const Cluster& c,
                                            Precision precision);

inline constexpr Recompute kRecomputeModes[] = {Recompute::none, Recompute::selective, Recompute::full};

template <class F>
void SearchSpace::for_each_plan(const Layout& l, F&& f) const {
  Plan p;
  p.dp = l.dp;
  p.tp = l.tp;
  p.pp = l.pp;
  p.cp = l.cp;
  p.ulysses = l.ulysses;
  // Megatron-LM states uneven stages by their ends only: where pp does not
  // divide the layers its plans carry the partition it can run (once per
  // layout, not per plan); other engines balance as DeepSpeed's uniform split.
  const std::vector<int> megatron_stages =
      options_.engine == Engine::megatron ? megatron_stage_layers(model_->layers, l.pp) : std::vector<int>{};
  p.stage_layers = megatron_stages;
  p.global_batch = global_batch_;
  p.sparse_block = options_.sparse_block;
  p.grad_reduce_dtype = options_.grad_reduce_dtype;
  p.master_dtype = options_.master_dtype;
  p.moments_dtype = options_.moments_dtype;
  p.param_remainders = options_.param_remainders;
  p.fp8 = options_.fp8;
  p.fp8_param_gather = options_.fp8_param_gather;
  const auto scheds = schedules(l);
  const auto splits = activation_splits(l);
  const auto sts = states(l);
  const std::int64_t per_rank = global_batch_ / l.dp;
  for (const auto& sc : scheds) {
    p.schedule = sc.schedule;
    p.virtual_stages = sc.virtual_stages;
    // Stated chunks carry their stages; the other schedules the layout's.
    p.chunk_layers = sc.chunk_layers;
    p.stage_layers = sc.chunk_layers.empty() ? megatron_stages : stage_sums_of_chunks(sc.chunk_layers, l.pp);
    const auto mbs = micro_batches_for(l, sc);
    for (ActivationSplit split : splits) {
      p.sequence_parallel = split == ActivationSplit::sequence_parallel;
      // Megatron-Core overlaps the sequence-parallel collectives with their
      // GEMMs (--tp-comm-overlap, Transformer Engine: Ampere or newer), never
      // slower in the cost model: its sequence-parallel plans there carry it,
      // so the space does not grow.
      p.tp_comm_overlap = p.sequence_parallel && tp_comm_overlap_;
      p.partition_activations = split == ActivationSplit::partitioned;
      for (Recompute rc : recomputes_) {
        if (!split_fits(split, rc)) continue;
        p.recompute = rc;
        p.recompute_policy = rc == Recompute::selective ? selective_policy_ : SelectivePolicy::attention;
        for (int home = 0; home < checkpoint_homes(rc); ++home) {
          p.cpu_checkpointing = home == 1;
          for (const auto& st : sts) {
            p.zero_stage = st.zero_stage;
            p.offload_optimizer = st.offload_optimizer;
            p.offload_params = st.offload_params;
            p.onebit_adam = st.onebit_adam;
            p.onebit_freeze_step = st.onebit_adam ? freeze_step_ : 0;
            p.zeropp = st.zeropp;
            p.dp_shard = st.dp_shard;
            for (const AttentionChoice& at : attention_) {
              if (!recompute_fits(rc, p.recompute_policy, at) || !cp_fits(l, at)) continue;
              p.sparse_attention = at.layout;
              p.attention = at.kernel;
              for (int mb : mbs) {
                p.micro_batch = mb;
                p.grad_accum = static_cast<int>(per_rank / mb);
                for (Precision pr : precisions_) {
                  p.precision = pr;
                  f(static_cast<const Plan&>(p));
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace ztune
