// Process groups on 4 ranks as dp2×tp2 and as pp2×tp2: coordinates follow the
// Megatron layout, and a sum over each group adds exactly the expected ranks.
#include <catch2/catch.hpp>

#include "ztune/executor/mpi_communicator.hpp"
#include "ztune/executor/process_groups.hpp"
#include "ztune/vocab/plan.hpp"

#include <array>
#include <vector>

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

// The plan's rank-to-stage rule (vocab Plan::stage_of_rank, which `ztune run`
// uses to set each rank's peak beside its stage's prediction) is the executor's
// layout: every world rank of every shape lands on its coordinates' stage.
TEST_CASE("Plan::stage_of_rank is the executor's pipeline coordinate", "[groups]") {
  for (const auto& [dp, tp, pp, cp, ulysses] :
       std::vector<std::array<int, 5>>{{2, 4, 3, 1, 1}, {3, 2, 4, 2, 1}, {2, 2, 2, 1, 2}, {1, 8, 5, 1, 1}}) {
    GroupShape s{dp, tp, pp};
    s.cp = cp;
    s.ulysses = ulysses;
    ztune::Plan plan;
    plan.dp = dp;
    plan.tp = tp;
    plan.pp = pp;
    plan.cp = cp;
    plan.ulysses = ulysses;
    for (int r = 0; r < s.world(); ++r) {
      INFO("dp " << dp << " tp " << tp << " pp " << pp << " cp " << cp << " ulysses " << ulysses << " rank " << r);
      CHECK(plan.stage_of_rank(r) == coordinates_of(r, s).pp_rank);
    }
  }
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

// Context parallelism: Megatron-Core's tp-cp-dp-pp order, cp ranks next to tp.
TEST_CASE("coordinates round-trip with context parallelism", "[groups][cp]") {
  GroupShape s{2, 2, 3};
  s.cp = 2;
  CHECK(s.world() == 24);
  for (int r = 0; r < s.world(); ++r) CHECK(world_rank_of(coordinates_of(r, s), s) == r);
  auto c = coordinates_of(23, s);  // 23 = ((2·2 + 1)·2 + 1)·2 + 1
  CHECK(c.pp_rank == 2);
  CHECK(c.dp_rank == 1);
  CHECK(c.cp_rank == 1);
  CHECK(c.tp_rank == 1);
  c = coordinates_of(2, s);  // the first cp neighbour of rank 0 is tp ranks away
  CHECK(c.cp_rank == 1);
  CHECK(c.tp_rank == 0);
  CHECK(c.dp_rank == 0);
}

TEST_CASE("dp2×cp2 and cp2×tp2 groups: the weights' dp group spans dp × cp", "[mpi][groups][cp]") {
  auto world = MpiCommunicator::world();
  REQUIRE(world->size() == 4);
  const int me = world->rank();
  {
    GroupShape s{2, 1, 1};
    s.cp = 2;  // ranks: cp fastest, then dp
    auto g = make_process_groups(*world, s);
    CHECK(g.coords.cp_rank == me % 2);
    CHECK(g.coords.dp_rank == me / 2);
    // cp pairs {0,1},{2,3}; the weights' dp group is all four (rank dp·cp + cp = world rank).
    CHECK(sum_of_world_ranks(*g.cp, me) == static_cast<float>(me / 2 == 0 ? 1 : 5));
    CHECK(g.dp->size() == 4);
    CHECK(g.dp->rank() == me);
    CHECK(sum_of_world_ranks(*g.dp, me) == 6.0f);
    CHECK(g.tp->size() == 1);
  }
  {
    GroupShape s{1, 2, 1};
    s.cp = 2;  // tp fastest, then cp
    auto g = make_process_groups(*world, s);
    CHECK(sum_of_world_ranks(*g.tp, me) == static_cast<float>(me / 2 == 0 ? 1 : 5));
    CHECK(sum_of_world_ranks(*g.cp, me) == static_cast<float>(me % 2 == 0 ? 2 : 4));
    CHECK(sum_of_world_ranks(*g.dp, me) == static_cast<float>(me % 2 == 0 ? 2 : 4));
  }
}

// DeepSpeed-Ulysses takes cp's place (contiguous after tp); the weights' dp
// group spans dp × ulysses.
TEST_CASE("dp2×ulysses2 groups: Ulysses pairs next to tp, the weights' dp group over dp × ulysses",
          "[mpi][groups][ulysses]") {
  auto world = MpiCommunicator::world();
  REQUIRE(world->size() == 4);
  const int me = world->rank();
  GroupShape s{2, 1, 1};
  s.ulysses = 2;
  CHECK(s.world() == 4);
  for (int r = 0; r < s.world(); ++r) CHECK(world_rank_of(coordinates_of(r, s), s) == r);
  auto g = make_process_groups(*world, s);
  CHECK(g.coords.ulysses_rank == me % 2);
  CHECK(g.coords.dp_rank == me / 2);
  REQUIRE(g.ulysses != nullptr);
  CHECK(g.ulysses->size() == 2);
  CHECK(g.ulysses->name() == "ulysses");
  // Ulysses pairs {0,1},{2,3}; the weights' dp group is all four.
  CHECK(sum_of_world_ranks(*g.ulysses, me) == static_cast<float>(me / 2 == 0 ? 1 : 5));
  CHECK(g.dp->size() == 4);
  CHECK(sum_of_world_ranks(*g.dp, me) == 6.0f);
  // Without Ulysses there is no such group.
  auto plain = make_process_groups(*world, GroupShape{4, 1, 1});
  CHECK(plain.ulysses == nullptr);
}

TEST_CASE("hybrid sharding dp4, dp_shard 2: shard groups of consecutive dp ranks, replicas across them",
          "[mpi][groups][hsdp]") {
  auto world = MpiCommunicator::world();
  REQUIRE(world->size() == 4);
  const int me = world->rank();
  GroupShape s{4, 1, 1};
  s.dp_shard = 2;
  auto g = make_process_groups(*world, s);
  CHECK(g.coords.dp_rank == me);
  // Shard groups {0,1} and {2,3} (ZeRO-3's partitions), replicas {0,2} and {1,3}.
  REQUIRE(g.dp->size() == 2);
  CHECK(g.dp->rank() == me % 2);
  CHECK(sum_of_world_ranks(*g.dp, me) == static_cast<float>(me / 2 == 0 ? 1 : 5));
  REQUIRE(g.replica != nullptr);
  CHECK(g.replica->size() == 2);
  CHECK(g.replica->rank() == me / 2);
  CHECK(sum_of_world_ranks(*g.replica, me) == static_cast<float>(me % 2 == 0 ? 2 : 4));
  // Without it there is no replica group and dp is all four.
  GroupShape plain{4, 1, 1};
  auto h = make_process_groups(*world, plain);
  CHECK(h.replica == nullptr);
  CHECK(h.dp->size() == 4);
}
