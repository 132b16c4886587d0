#pragma once
// The operation graph of one training iteration of one pipeline replica: a DAG
// whose vertices are operations and whose edges say "must finish before".
// Data-parallel replicas are identical, so one replica stands for all of them
// (collective times already account for the whole data-parallel group).
//
// The structure is a Boost.Graph compressed_sparse_row_graph built once from
// the builder's edge list (finalize_graph); the operations are its exterior
// vertex properties (ops[v]). A 1T-parameter interleaved iteration has ~80k
// operations: an adjacency_list allocates per vertex and alone took longer
// than the whole 20 ms simulation budget; the CSR graph is two arrays.
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include <boost/graph/compressed_sparse_row_graph.hpp>

#include "ztune/simulator/op.hpp"
#include "ztune/simulator/resource.hpp"

namespace ztune::sim {

/// A stop request reached the simulation (SimOptions::stop): the builder and
/// the event loop check it every kStopCheckEvery operations, so that a large
/// graph (millions of operations, seconds) ends at once.
struct SimulationStopped : std::runtime_error {
  SimulationStopped() : std::runtime_error("the simulation was stopped") {}
};
inline constexpr std::size_t kStopCheckEvery = 65536;
/// Throws SimulationStopped when `stop` is set (null: never).
inline void throw_if_stopped(const std::atomic<bool>* stop) {
  if (stop != nullptr && stop->load(std::memory_order_relaxed)) throw SimulationStopped();
}


using OpDag = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, boost::no_property,
                                                 boost::no_property, std::uint32_t, std::uint32_t>;
// Vertex ids are dense indices 0..n-1 in the order the builder added the
// operations; that order is the event loop's tie-break.
using OpId = std::size_t;

struct OpGraph {
  std::vector<Op> ops;  // vertex properties, indexed by OpId
  std::vector<Resource> resources;
  int stages = 1;       // pipeline stages simulated (one GPU each)
  int chunks = 1;       // model chunks per stage (virtual stages)
  int microbatches = 1;
  // Edges staged by add_dependency until finalize_graph builds the DAG.
  std::vector<std::uint32_t> edge_sources;
  std::vector<std::uint32_t> edge_targets;
  std::unique_ptr<OpDag> structure;  // null until finalize_graph

  [[nodiscard]] std::size_t size() const { return ops.size(); }
  [[nodiscard]] const Op& op(OpId id) const { return ops[id]; }
  [[nodiscard]] bool finalized() const { return structure != nullptr; }
  [[nodiscard]] const OpDag& dag() const {
    assert(finalized());
    return *structure;
  }
  /// Index of the resource of `kind` on `stage` (resources are stored stage-major).
  [[nodiscard]] int resource_index(int stage, ResourceKind kind) const {
    return stage * static_cast<int>(ResourceKind::count) + static_cast<int>(kind);
  }
};

/// Adds every resource kind for each of `stages` GPUs, in resource_index order.
void add_stage_resources(OpGraph& g, int stages);
/// Adds an operation and returns its id (before finalize_graph only).
OpId add_op(OpGraph& g, const Op& op);
/// `before` must finish before `after` starts (before finalize_graph only).
void add_dependency(OpGraph& g, OpId before, OpId after);
/// Builds the DAG from the staged edges; the graph is read-only afterwards.
void finalize_graph(OpGraph& g);

}  // namespace ztune::sim
