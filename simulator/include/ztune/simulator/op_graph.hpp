#pragma once
// The operation graph of one training iteration of one pipeline replica: a DAG
// (Boost.Graph adjacency_list) whose vertices are operations and whose edges
// say "must finish before". Data-parallel replicas are identical, so one
// replica stands for all of them (collective times already account for the
// whole data-parallel group).
#include <cstddef>
#include <memory>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "ztune/simulator/op.hpp"
#include "ztune/simulator/resource.hpp"

namespace ztune::sim {

// vecS/vecS: vertex descriptors are dense indices 0..n-1, the order in which
// the builder added the operations; that order is the engine's tie-break.
using OpDag = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, Op>;
using OpId = std::size_t;

struct OpGraph {
  // Boost 1.74's adjacency_list has no move constructor and its swap copies,
  // so the DAG lives behind a pointer: an OpGraph moves in O(1).
  std::unique_ptr<OpDag> storage = std::make_unique<OpDag>();
  std::vector<Resource> resources;
  int stages = 1;       // pipeline stages simulated (one GPU each)
  int chunks = 1;       // model chunks per stage (virtual stages)
  int microbatches = 1;

  [[nodiscard]] OpDag& dag() { return *storage; }
  [[nodiscard]] const OpDag& dag() const { return *storage; }
  [[nodiscard]] std::size_t size() const { return boost::num_vertices(*storage); }
  [[nodiscard]] const Op& op(OpId id) const { return (*storage)[id]; }
  /// Index of the resource of `kind` on `stage` (resources are stored stage-major).
  [[nodiscard]] int resource_index(int stage, ResourceKind kind) const {
    return stage * static_cast<int>(ResourceKind::count) + static_cast<int>(kind);
  }
};

/// Adds every resource kind for each of `stages` GPUs, in resource_index order.
void add_stage_resources(OpGraph& g, int stages);
/// Adds an operation and returns its id.
OpId add_op(OpGraph& g, const Op& op);
/// `before` must finish before `after` starts.
void add_dependency(OpGraph& g, OpId before, OpId after);

}  // namespace ztune::sim
