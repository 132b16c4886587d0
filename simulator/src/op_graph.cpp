#include "ztune/simulator/op_graph.hpp"

#include <limits>
#include <utility>

namespace ztune::sim {

void add_stage_resources(OpGraph& g, int stages) {
  g.resources.clear();
  g.resources.reserve(static_cast<std::size_t>(stages) * static_cast<std::size_t>(ResourceKind::count));
  for (int s = 0; s < stages; ++s)
    for (int k = 0; k < static_cast<int>(ResourceKind::count); ++k)
      g.resources.push_back({static_cast<ResourceKind>(k), s});
}

OpId add_op(OpGraph& g, const Op& op) {
  assert(!g.finalized());
  assert(op.resource >= 0 && static_cast<std::size_t>(op.resource) < g.resources.size());
  // NaN and inf come from input figures (5e-324 GB/s; 0 bytes × inf s/byte):
  // run_event_loop refuses them as an InputError, so only a negative time is a bug.
  assert(!(op.duration_s < 0));
  assert(g.ops.size() < std::numeric_limits<std::uint32_t>::max());
  g.ops.push_back(op);
  return g.ops.size() - 1;
}

void add_dependency(OpGraph& g, OpId before, OpId after) {
  assert(!g.finalized());
  assert(before != after && before < g.ops.size() && after < g.ops.size());
  g.edge_sources.push_back(static_cast<std::uint32_t>(before));
  g.edge_targets.push_back(static_cast<std::uint32_t>(after));
}

void finalize_graph(OpGraph& g) {
  assert(!g.finalized());
  // Counting sort of the staged edges by source (stable: each op keeps its
  // successors in the order they were added), then the CSR from sorted edges.
  const std::size_t n = g.ops.size();
  const std::size_t m = g.edge_sources.size();
  std::vector<std::uint32_t> start(n + 1, 0);
  for (const std::uint32_t s : g.edge_sources) ++start[s + 1];
  for (std::size_t v = 0; v < n; ++v) start[v + 1] += start[v];
  std::vector<std::pair<std::uint32_t, std::uint32_t>> sorted(m);
  for (std::size_t i = 0; i < m; ++i) {
    const std::uint32_t s = g.edge_sources[i];
    sorted[start[s]++] = {s, g.edge_targets[i]};
  }
  g.structure = std::make_unique<OpDag>(boost::edges_are_sorted, sorted.begin(), sorted.end(),
                                        static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(m));
  std::vector<std::uint32_t>().swap(g.edge_sources);
  std::vector<std::uint32_t>().swap(g.edge_targets);
}

}  // namespace ztune::sim
