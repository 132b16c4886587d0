#pragma once
// The collectives, THE one vocabulary of them (issue 22 item 2): their kinds and
// the names run records use, nccl-tests' bus factor, the latency steps NCCL's
// and MPI's algorithms take, and where a plan's communication groups sit on the
// cluster. The cost model prices them (model/op_costs: the level's bandwidth
// and latency from the profile), the simulator places them, the executor counts
// what it ran under the same kinds, and the calibration fit divides measured
// times by the same factors and steps. Pure functions of the plan and cluster.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/plan.hpp"

namespace ztune {

/// A communication call. `send`/`recv` are the two ends of a point-to-point
/// transfer (the pipeline's activations); `barrier` moves no data.
enum class Collective : std::uint8_t {
  all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, reduce, send, recv, barrier, count };
inline constexpr std::size_t kCollectiveKinds = static_cast<std::size_t>(Collective::count);

/// The name a run record's collectives_rank0 keys use ("all_reduce", "send", ...).
[[nodiscard]] const char* to_string(Collective k);
/// The kind a run-record key names; nullopt for an unknown name.
[[nodiscard]] std::optional<Collective> collective_named(std::string_view name);
/// Every kind, in enum order (what a reader of run records iterates).
[[nodiscard]] const std::array<Collective, kCollectiveKinds>& all_collectives();

/// nccl-tests bus factor (doc/PERFORMANCE.md): busbw = algbw · factor.
/// all-reduce 2(n−1)/n; reduce-scatter, all-gather, all-to-all (n−1)/n;
/// broadcast, reduce, send, recv 1; a barrier moves nothing (0). S is
/// nccl-tests' size: the whole array (for reduce-scatter the input, for
/// all-gather the output). THE one definition.
[[nodiscard]] double bus_factor(Collective k, int n);

enum class CollectiveAlgo : std::uint8_t { ring, tree, best };

/// How a communication group sits on the cluster: `size` ranks, of which
/// `per_node` share a node (the group spans size/per_node nodes).
struct GroupPlacement {
  int size = 1;
  int per_node = 1;
  [[nodiscard]] int nodes() const { return (size + per_node - 1) / per_node; }
  [[nodiscard]] bool crosses_nodes() const { return per_node < size; }
};

/// The latency steps of one collective over group `g`, by the level each
/// hop crosses, as NCCL's tuner counts them (src/graph/tuning.cc
/// ncclTopoTuneModel): a ring of n ranks on N nodes takes n−1 steps for
/// reduce-scatter, all-gather, broadcast and reduce (2(n−1) for all-reduce),
/// of which N−1 (2(N−1)) cross nodes and the rest stay inside one; the double
/// binary tree's all-reduce 2((n/N − 1) intra + ⌈log2 N⌉ inter), a chain
/// inside each node; an all-to-all's n−1 sends, n − n/N of them to other
/// nodes; a send or receive 1 step; a barrier an all-reduce's. CPU ranks run
/// MPI's collectives instead (the executor's MpiCommunicator): their `tree` is
/// Open MPI's recursive doubling, 2⌈log2⌉ steps at each level. THE one count:
/// the cost model's collective_time and the calibration fit both use it.
struct LatencySteps {
  double intra = 0;
  double inter = 0;
};
[[nodiscard]] LatencySteps latency_steps(Collective k, const GroupPlacement& g, CollectiveAlgo algo = CollectiveAlgo::ring,
                                         DeviceKind device = DeviceKind::gpu);

/// Where the plan's groups sit, ranks ordered tp fastest, then cp, then dp,
/// then pp (Megatron-Core's default order tp-cp-ep-dp-pp, the executor's
/// process_groups.hpp): tp inside a node when it fits, cp next to it. `dp` is
/// the data-parallel group of the weights, the dp × cp ranks that reduce
/// gradients and share ZeRO's partitions (the dp ranks alone without context
/// parallelism).
struct GroupLayout {
  GroupPlacement tp;
  GroupPlacement cp;
  GroupPlacement ulysses;  // DeepSpeed-Ulysses ranks, next to tp like cp (never both: check_plan_shape)
  GroupPlacement dp;
  GroupPlacement pp;
  bool pp_crosses_nodes = false;  // neighbouring stages on different nodes
  // Hybrid sharding (plan.dp_shard): the dp group cut into shard groups of
  // dp_shard consecutive ranks (ZeRO-3's gathers and reduce-scatters) and the
  // replica groups across them, one rank of each shard group (stride
  // tp·dp_shard; the all-reduce of the sharded gradients). Without it shard
  // is dp and replica a single rank.
  GroupPlacement shard;
  GroupPlacement replica;
};
[[nodiscard]] GroupLayout place_groups(const Plan& p, const Cluster& c);

/// GPUs of one node the plan uses: all of them, or fewer when the whole plan is
/// smaller than a node (one V100 of a DGX-2 has the node's host memory, CPU
/// cores and NVMe to itself). Host-side shares divide by this, not by the
/// node's GPU count.
[[nodiscard]] int gpus_per_node_in_use(const Plan& p, const Cluster& c);

}  // namespace ztune
