#include "ztune/vocab/collective.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "ztune/vocab/name_table.hpp"

namespace ztune {

namespace {

// The run-record keys, in the enum's order.
constexpr const char* kNames[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast",
                                  "reduce",     "send",           "recv",       "barrier"};
static_assert(std::size(kNames) == kCollectiveKinds);

}  // namespace

const char* to_string(Collective k) { return name_in(kNames, k); }

std::optional<Collective> collective_named(std::string_view name) { return value_in<Collective>(kNames, name); }

const std::array<Collective, kCollectiveKinds>& all_collectives() {
  static const auto kAll = [] {
    std::array<Collective, kCollectiveKinds> a{};
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<Collective>(i);
    return a;
  }();
  return kAll;
}

double bus_factor(Collective k, int n) {
  if (k == Collective::barrier || k == Collective::count) return 0.0;
  // One rank moves nothing, but nccl-tests still reports a broadcast's and a
  // point-to-point transfer's busbw as their algbw (factor 1).
  const bool one_to_one = k == Collective::send || k == Collective::recv || k == Collective::broadcast;
  if (n <= 1) return one_to_one ? 1.0 : 0.0;
  const double nn = n;
  switch (k) {
    case Collective::all_reduce: return 2.0 * (nn - 1) / nn;
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all: return (nn - 1) / nn;
    default: return 1.0;  // broadcast, reduce, send, recv
  }
}

LatencySteps latency_steps(Collective k, const GroupPlacement& g, CollectiveAlgo algo, DeviceKind device) {
  const double n = g.size;
  const double nodes = g.nodes();
  const double ppn = std::min(g.size, g.per_node);
  // A ring's steps, of which `inter` cross nodes.
  auto ring = [](double steps, double inter) { return LatencySteps{steps - inter, inter}; };
  switch (k) {
    case Collective::all_reduce:
    case Collective::barrier:
      if (algo == CollectiveAlgo::tree && device == DeviceKind::cpu)
        return {2.0 * std::ceil(std::log2(ppn)), 2.0 * std::ceil(std::log2(nodes))};
      if (algo == CollectiveAlgo::tree) return {2.0 * (ppn - 1.0), 2.0 * std::ceil(std::log2(nodes))};
      return ring(2.0 * (n - 1.0), 2.0 * (nodes - 1.0));
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::broadcast:
    case Collective::reduce: return ring(n - 1.0, nodes - 1.0);
    case Collective::all_to_all: return {ppn - 1.0, n - ppn};
    case Collective::send:
    case Collective::recv: return g.crosses_nodes() ? LatencySteps{0, 1} : LatencySteps{1, 0};
    case Collective::count: break;
  }
  return {1, 0};
}

int gpus_per_node_in_use(const Plan& p, const Cluster& c) {
  return std::max(1, std::min(c.node.gpus, p.gpus()));
}

GroupLayout place_groups(const Plan& p, const Cluster& c) {
  const int gpn = std::max(1, c.node.gpus);
  GroupLayout l;
  l.tp = {p.tp, std::min(p.tp, gpn)};
  const int tp_nodes_fill = p.tp >= gpn ? 1 : gpn / p.tp;  // tp groups per node
  // cp ranks sit next to tp (stride tp), then dp (stride tp·cp): the weights'
  // data-parallel group, dp × cp ranks of stride tp, fills a node as dp did.
  l.cp = {p.cp, std::max(1, std::min(p.cp, tp_nodes_fill))};
  // Ulysses ranks sit where cp's would (stride tp; Megatron-DeepSpeed's
  // sequence-parallel group is made of consecutive ranks after tp).
  l.ulysses = {p.ulysses, std::max(1, std::min(p.ulysses, tp_nodes_fill))};
  l.dp = {p.dp_cp(), std::max(1, std::min(p.dp_cp(), tp_nodes_fill))};
  const int tpdp = p.tp * p.dp_cp();
  const int pp_fill = tpdp >= gpn ? 1 : gpn / tpdp;
  l.pp = {p.pp, std::max(1, std::min(p.pp, pp_fill))};
  l.pp_crosses_nodes = p.pp > 1 && l.pp.crosses_nodes();
  // Hybrid sharding: shard groups of dp_shard consecutive dp ranks (so a node
  // holds whole shard groups when dp_shard divides its dp ranks), replicas of
  // stride dp_shard: as many share a node as it holds shard groups.
  const int shard = p.shard_group();
  const int replicas = p.shard_replicas();
  l.shard = {shard, std::max(1, std::min(shard, tp_nodes_fill))};
  l.replica = {replicas, std::max(1, std::min(replicas, tp_nodes_fill / shard))};
  return l;
}

}  // namespace ztune
