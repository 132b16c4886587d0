#pragma once
// The group layouts collectives are measured on: the shapes the plans' process
// groups take (DESIGN.md "Collectives on a hierarchy"). Inside a node: groups
// of k adjacent ranks (tensor-parallel groups; Megatron's rank order), every
// group communicating at once, for k = 2, 4, ... up to the ranks of a node.
// Across nodes: one rank per node (the data-parallel rings of rail-optimised
// clusters) and the whole job (the slowest level bounds it). Which ranks share
// a node is what MPI says (MPI_Comm_split_type SHARED), not what a file claims.
#include <memory>
#include <string>
#include <vector>

#include "ztune/executor/mpi_communicator.hpp"

namespace ztune::calibration {

struct GroupLayout {
  std::string name;     // "intra:2", "inter:2", "world:16"
  int size = 1;         // ranks per group
  int per_node = 1;     // ranks of one group that share a node
  bool crosses_nodes = false;
  std::unique_ptr<executor::Communicator> comm;  // this rank's group
};

struct NodeInfo {
  int nodes = 1;           // distinct nodes in the job
  int ranks_per_node = 1;  // ranks on this rank's node (the layouts need it equal on all)
  bool uniform = true;     // every node holds the same number of ranks, contiguous in rank order
};

/// Which ranks share a node. Collective over `world`.
NodeInfo discover_nodes(executor::MpiCommunicator& world);

/// The layouts to measure. `notes` receives one line per level not measured
/// and why (e.g. a single-node job cannot measure the inter-node fabric).
/// Collective over `world`.
std::vector<GroupLayout> make_group_layouts(executor::Communicator& world, const NodeInfo& nodes,
                                            std::vector<std::string>& notes);

}  // namespace ztune::calibration
