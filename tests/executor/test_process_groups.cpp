// Process groups on 4 ranks as dp2×tp2 and as pp2×tp2: coordinates follow the
// Megatron layout, and a sum over each group adds exactly the expected ranks.
#include <catch2/catch.hpp>

#include "ztune/executor/mpi_communicator.hpp"
#include "ztune/executor/process_groups.hpp"

using namespace ztune::executor;

namespace {
// Σ over the group of the members' world ranks.
float sum_of_world_ranks(Communicator& group, int world_rank) {
  float v = static_cast<float>(world_rank);
  group.all_reduce(&v, 1);
  return v;
}
}  // namespace

TEST_CASE("coordinates round-trip", "[groups]") {
  GroupShape s{2, 4, 3};
  for (int r = 0; r < s.world(); ++r) CHECK(world_rank_of(coordinates_of(r, s), s) == r);
  auto c = coordinates_of(13, s);  // 13 = (1·2 + 1)·4 + 1
  CHECK(c.pp_rank == 1);
  CHECK(c.dp_rank == 1);
  CHECK(c.tp_rank == 1);
}

TEST_CASE("dp2×tp2 and pp2×tp2 groups hold the expected ranks", "[mpi][groups]") {
  auto world = MpiCommunicator::world();
  REQUIRE(world->size() == 4);
  const int me = world->rank();
  {
    auto g = make_process_groups(*world, {2, 2, 1});
    // tp pairs {0,1},{2,3}; dp pairs {0,2},{1,3}.
    CHECK(sum_of_world_ranks(*g.tp, me) == static_cast<float>(me / 2 == 0 ? 1 : 5));
    CHECK(sum_of_world_ranks(*g.dp, me) == static_cast<float>(me % 2 == 0 ? 2 : 4));
    CHECK(g.pp->size() == 1);
    CHECK(g.embed == nullptr);
  }
  {
    auto g = make_process_groups(*world, {1, 2, 2});
    CHECK(g.coords.pp_rank == me / 2);
    CHECK(sum_of_world_ranks(*g.pp, me) == static_cast<float>(me % 2 == 0 ? 2 : 4));
    REQUIRE(g.embed != nullptr);  // both stages are first or last
    CHECK(sum_of_world_ranks(*g.embed, me) == static_cast<float>(me % 2 == 0 ? 2 : 4));
  }
}
