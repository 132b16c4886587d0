#include "ztune/executor/process_groups.hpp"

#include <cassert>

namespace ztune::executor {

Coordinates coordinates_of(int world_rank, const GroupShape& s) {
  Coordinates c;
  c.tp_rank = world_rank % s.tp;
  c.cp_rank = (world_rank / s.tp) % s.seq();
  c.ulysses_rank = s.ulysses > 1 ? c.cp_rank : 0;
  c.dp_rank = (world_rank / (s.tp * s.seq())) % s.dp;
  c.pp_rank = world_rank / (s.tp * s.seq() * s.dp);
  return c;
}

int world_rank_of(const Coordinates& c, const GroupShape& s) {
  return ((c.pp_rank * s.dp + c.dp_rank) * s.seq() + c.cp_rank) * s.tp + c.tp_rank;
}

ProcessGroups make_process_groups(Communicator& world, const GroupShape& shape, bool tied_embeddings) {
  assert(world.size() == shape.world());
  ProcessGroups g;
  g.shape = shape;
  g.world = &world;
  g.coords = coordinates_of(world.rank(), shape);
  const auto& c = g.coords;
  // The weights' data-parallel rank: dp and cp ranks together (cp fastest).
  const int wdp = c.dp_rank * shape.seq() + c.cp_rank, wdp_size = shape.dp * shape.seq();
  const int dcp = wdp;  // index of the (dp, cp) pair, for the groups that span neither
  if (shape.hybrid()) {
    // Shard groups of dp_shard consecutive weights' dp ranks (ZeRO-3 gathers
    // and reduce-scatters), replica groups across them (gradient all-reduce).
    const int replicas = wdp_size / shape.dp_shard;
    const int line = c.pp_rank * shape.tp + c.tp_rank;
    // Named "dp": it is the store's data-parallel group (the run record's key).
    g.dp = world.split(line * replicas + wdp / shape.dp_shard, wdp % shape.dp_shard, "dp");
    g.replica = world.split(line * shape.dp_shard + wdp % shape.dp_shard, wdp / shape.dp_shard, "dp_replica");
  } else {
    g.dp = world.split(c.pp_rank * shape.tp + c.tp_rank, wdp, "dp");
  }
  g.cp = world.split((c.pp_rank * shape.dp + c.dp_rank) * shape.tp + c.tp_rank, c.cp_rank,
                     shape.ulysses > 1 ? "ulysses" : "cp");
  if (shape.ulysses > 1) g.ulysses = g.cp.get();
  g.tp = world.split(c.pp_rank * wdp_size + dcp, c.tp_rank, "tp");
  g.pp = world.split(dcp * shape.tp + c.tp_rank, c.pp_rank, "pp");
  const bool ends = tied_embeddings && shape.pp > 1 && (g.first_stage() || g.last_stage());
  g.embed = world.split(ends ? dcp * shape.tp + c.tp_rank : -1, c.pp_rank, "embed");
  if (shape.ranks_per_node > 0 && wdp_size > 1 && !shape.hybrid()) {
    const int node = world.rank() / shape.ranks_per_node;
    auto intra = g.dp->split(node, wdp, "dp_intra");
    auto inter = g.dp->split(intra->rank(), wdp, "dp_inter");
    // Node-major dp ranks (whole tp groups per node) make dp rank = n·g + l;
    // a placement that does not is refused where the plan is checked.
    if (inter->size() > 1 && intra->size() * inter->size() == wdp_size &&
        wdp == inter->rank() * intra->size() + intra->rank()) {
      g.dp_intra = std::move(intra);
      g.dp_inter = std::move(inter);
    }
  }
  return g;
}

}  // namespace ztune::executor
