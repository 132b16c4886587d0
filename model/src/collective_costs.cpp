// The time of one collective or point-to-point transfer on a group placed on a
// cluster: the bus-bandwidth term (nccl-tests' busbw, bus_factor) plus the
// latency of the algorithm's steps on each level (vocab/collective.hpp
// latency_steps). Part of op_costs.hpp's API.
#include <algorithm>

#include "ztune/model/op_costs.hpp"

namespace ztune {

namespace {

// The busbw efficiency of each level: the cluster file's measured one, else the profile's.
double intra_efficiency(const Cluster& c, const HardwareProfile& hw) {
  return c.intra_node.collective_efficiency.value_or(hw.intra_node.busbw_efficiency);
}
double inter_efficiency(const Cluster& c, const HardwareProfile& hw) {
  return c.inter_node.collective_efficiency.value_or(hw.inter_node.busbw_efficiency);
}

}  // namespace

double group_link_figure(const GroupPlacement& g, const Cluster& c) {
  if (!g.crosses_nodes()) return c.intra_node.bandwidth_gbps * 1e9;
  // The node's NICs are shared by the gpus/per_node groups that communicate at
  // once; this group gets per_node GPUs' worth of them (rail-optimised rings).
  return c.inter_node_gbps_per_gpu() * 1e9 * g.per_node;
}

double group_bus_bandwidth(const GroupPlacement& g, const Cluster& c, const HardwareProfile& hw) {
  const double intra = c.intra_node.bandwidth_gbps * 1e9 * intra_efficiency(c, hw);
  if (!g.crosses_nodes()) return intra;
  const double inter = group_link_figure(g, c) * inter_efficiency(c, hw);
  return g.per_node > 1 ? std::min(intra, inter) : inter;
}

double level_latency(bool inter_node, const Cluster& c, const HardwareProfile& hw) {
  if (inter_node) return c.inter_node.latency_us * 1e-6 + hw.inter_node.latency_s;
  return c.intra_node.latency_us * 1e-6 + hw.intra_node.latency_s;
}

double collective_time(Collective k, double bytes, const GroupPlacement& g, const Cluster& c,
                       const HardwareProfile& hw, CollectiveAlgo algo) {
  const int n = g.size;
  if (n <= 1 && k != Collective::send && k != Collective::recv) return 0;
  if (bytes <= 0) return 0;
  const double bw_term = bytes * bus_factor(k, n) / group_bus_bandwidth(g, c, hw);
  const double base = (g.crosses_nodes() ? hw.inter_node : hw.intra_node).base_latency_s;
  return base + latency_time(k, g, c, hw, algo) + bw_term;
}

double latency_time(Collective k, const GroupPlacement& g, const Cluster& c, const HardwareProfile& hw,
                    CollectiveAlgo algo) {
  const double intra = level_latency(false, c, hw);
  const double inter = level_latency(true, c, hw);
  auto cost = [&](CollectiveAlgo a) {
    const LatencySteps st = latency_steps(k, g, a, c.device_kind);
    return st.intra * intra + st.inter * inter;
  };
  if (k != Collective::all_reduce || algo == CollectiveAlgo::ring) return cost(CollectiveAlgo::ring);
  if (algo == CollectiveAlgo::tree) return cost(CollectiveAlgo::tree);
  return std::min(cost(CollectiveAlgo::ring), cost(CollectiveAlgo::tree));
}

double p2p_time(double bytes, bool crosses_nodes, const Cluster& c, const HardwareProfile& hw) {
  if (bytes <= 0) return 0;
  GroupPlacement g{2, crosses_nodes ? 1 : 2};
  return collective_time(Collective::send, bytes, g, c, hw);
}

}  // namespace ztune
