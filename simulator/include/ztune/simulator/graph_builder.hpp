#pragma once
// Builds the operation graph of one training iteration of one pipeline replica
// for a plan: compute per micro-batch, stage, model chunk and layer group;
// tensor-parallel collectives; pipeline sends in the schedule's order;
// gradient buckets as the backward produces them; ZeRO-3 gathers with
// prefetch; offload copies; the optimizer step and ZeRO-1/2 parameter gathers.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/simulator/cost_source.hpp"
#include "ztune/simulator/op_graph.hpp"

namespace ztune::sim {

/// Which communication leaves the node. Ranks are ordered tp fastest, then dp,
/// then pp (Megatron's default, as vocab/collective place_groups).
struct Placement {
  bool tp_crosses_nodes = false;
  bool dp_crosses_nodes = false;
  std::vector<bool> boundary_crosses_nodes;  // [s]: stage s → s+1 are on different nodes
  // Hybrid sharding: whether a ZeRO-3 shard group spans nodes (its gathers and
  // reduce-scatters); without hybrid sharding the same as dp_crosses_nodes.
  bool shard_crosses_nodes = false;
};
[[nodiscard]] Placement placement_of(const Plan& p, const Cluster& c);
/// Everything inside one node (for hand-built tests).
[[nodiscard]] Placement single_node_placement(const Plan& p);

/// The most operations the simulator builds for one iteration: about 125 bytes
/// each while it simulates, so about 1 GiB (README.md says so).
inline constexpr std::size_t kMaxSimulatedOps = 8000000;

/// A graph that passed BuildOptions::op_limit while it was built. An InputError
/// (the user asked for a simulation too large); reason() is the why without
/// the plan, for a search's note.
class GraphTooLarge : public InputError {
 public:
  GraphTooLarge(const std::string& plan, std::string reason)
      : InputError("--simulate: plan " + plan + " " + reason + " (use the analytical estimate: no --simulate)"),
        reason_(std::move(reason)) {}
  [[nodiscard]] const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

struct BuildOptions {
  // Layers per compute operation. 0 = automatic: one layer per group unless
  // the graph would exceed max_ops, then the fewest layers per group that fit.
  int layers_per_group = 0;
  std::size_t max_ops = 400000;
  // The most operations built at all: past it build_iteration_graph throws
  // GraphTooLarge rather than grow the graph without bound.
  std::size_t op_limit = kMaxSimulatedOps;
  // A stop request, checked every kStopCheckEvery operations (SimulationStopped).
  const std::atomic<bool>* stop = nullptr;
  // CPU-Adam sub-groups (DeepSpeed's sub_group_size, 1e9 elements), which let
  // NVMe and PCIe transfers of one sub-group overlap the update of another.
  double host_subgroup_params = 1e9;
  int max_host_subgroups = 16;
  // The sender's compute stream waits for each pipeline send to complete, as
  // in Megatron-LM (torch.cuda.synchronize after batch_isend_irecv) and
  // DeepSpeed's pipeline engine; false: sends overlap the sender's compute.
  bool blocking_p2p = true;
};

/// The fewest operations the graph of `plan` can have, however its layers are
/// grouped: a forward and a backward per model chunk and micro-batch.
[[nodiscard]] double fewest_ops(const Plan& plan);

/// The plan must satisfy check_plan() for a model of `layers` layers. Throws
/// GraphTooLarge when the graph would pass options.op_limit operations.
[[nodiscard]] OpGraph build_iteration_graph(int layers, const Plan& plan, const Placement& where,
                                            const CostSource& costs, const BuildOptions& options = {});

}  // namespace ztune::sim
