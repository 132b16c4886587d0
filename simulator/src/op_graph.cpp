#include "ztune/simulator/op_graph.hpp"

#include <cassert>

namespace ztune::sim {

void add_stage_resources(OpGraph& g, int stages) {
  g.resources.clear();
  g.resources.reserve(static_cast<std::size_t>(stages) * static_cast<std::size_t>(ResourceKind::count));
  for (int s = 0; s < stages; ++s)
    for (int k = 0; k < static_cast<int>(ResourceKind::count); ++k)
      g.resources.push_back({static_cast<ResourceKind>(k), s});
}

OpId add_op(OpGraph& g, const Op& op) {
  assert(op.resource >= 0 && static_cast<std::size_t>(op.resource) < g.resources.size());
  assert(op.duration_s >= 0);
  return boost::add_vertex(op, g.dag());
}

void add_dependency(OpGraph& g, OpId before, OpId after) {
  assert(before != after);
  boost::add_edge(before, after, g.dag());
}

}  // namespace ztune::sim
