#include "ztune/calibration/group_layouts.hpp"

#include <mpi.h>

namespace ztune::calibration {

NodeInfo discover_nodes(executor::MpiCommunicator& world) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  // The node's lowest world rank identifies it.
  int leader = world.rank();
  MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);

  double counts[4] = {local_rank == 0 ? 1.0 : 0.0, static_cast<double>(local_size), -static_cast<double>(local_size),
                      // contiguous: this rank sits at leader + local_rank
                      world.rank() == leader + local_rank ? 0.0 : 1.0};
  world.all_reduce_doubles(&counts[0], 1, executor::ReduceOp::sum);  // node leaders = nodes
  world.all_reduce_doubles(&counts[1], 3, executor::ReduceOp::max);
  NodeInfo info;
  info.nodes = static_cast<int>(counts[0]);
  info.ranks_per_node = local_size;
  info.uniform = counts[1] == -counts[2] && counts[3] == 0;
  return info;
}

std::vector<GroupLayout> make_group_layouts(executor::Communicator& world, const NodeInfo& nodes,
                                            std::vector<std::string>& notes) {
  std::vector<GroupLayout> out;
  const int n = world.size();
  const int rank = world.rank();
  if (n < 2) {
    notes.push_back("collectives: not measured (one rank; pass --np 2 or more)");
    return out;
  }
  if (!nodes.uniform) {
    notes.push_back("collectives: nodes hold different numbers of ranks (or ranks are not contiguous per node); "
                    "only the whole job is measured");
    GroupLayout g{"world:" + std::to_string(n), n, 1, nodes.nodes > 1, world.split(0, rank, "calib-world")};
    out.push_back(std::move(g));
    return out;
  }
  const int rpn = nodes.ranks_per_node;
  // Inside a node: adjacent groups of k ranks, all at once.
  for (int k = 2; k <= rpn; k *= 2) {
    if (rpn % k != 0) continue;
    GroupLayout g;
    g.name = "intra:" + std::to_string(k);
    g.size = k;
    g.per_node = k;
    g.comm = world.split(rank / k, rank, "calib-" + g.name);
    out.push_back(std::move(g));
  }
  if (rpn > 1 && (rpn & (rpn - 1)) != 0) {
    GroupLayout g{"intra:" + std::to_string(rpn), rpn, rpn, false, world.split(rank / rpn, rank, "calib-node")};
    out.push_back(std::move(g));
  }
  if (nodes.nodes < 2) {
    notes.push_back("inter-node fabric: not measured (all " + std::to_string(n) +
                    " ranks run on one node; launch across nodes with --hosts or inside a Slurm allocation)");
    return out;
  }
  // Across nodes: one rank per node (same local rank), then the whole job.
  {
    GroupLayout g;
    g.name = "inter:" + std::to_string(nodes.nodes);
    g.size = nodes.nodes;
    g.per_node = 1;
    g.crosses_nodes = true;
    g.comm = world.split(rank % rpn, rank, "calib-" + g.name);
    out.push_back(std::move(g));
  }
  if (rpn > 1) {
    GroupLayout g{"world:" + std::to_string(n), n, rpn, true, world.split(0, rank, "calib-world")};
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace ztune::calibration
