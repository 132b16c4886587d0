// The cost model's group placement (vocab/collective.hpp place_groups) against
// the executor's rank layout (process_groups.hpp coordinates_of), the layout
// the ranks really run: for each plan and node size, every group the executor
// forms - tp, the sequence slot (cp or Ulysses), the weights' dp × cp group,
// pp, and with hybrid sharding the shard and replica groups - has the size
// place_groups says, and at most `per_node` of its ranks share a node (issue
// 22 item 2: one owner of where groups sit; the executor is the truth).
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ztune/executor/process_groups.hpp"
#include "ztune/vocab/collective.hpp"

using ztune::Cluster;
using ztune::GroupPlacement;
using ztune::Plan;
using namespace ztune::executor;

namespace {

struct Layout {
  int tp, cp, ulysses, dp, pp, dp_shard;
};

// Groups as the executor forms them: ranks with the same key. Returns the
// size of every group (all equal) and the most members any node holds.
GroupPlacement measured(const GroupShape& s, int gpn, const std::function<std::vector<int>(const Coordinates&)>& key) {
  std::map<std::vector<int>, std::map<int, int>> per_node;  // group key -> node -> members
  std::map<std::vector<int>, int> size;
  for (int r = 0; r < s.world(); ++r) {
    const auto k = key(coordinates_of(r, s));
    ++size[k];
    ++per_node[k][r / gpn];
  }
  GroupPlacement g{size.begin()->second, 0};
  for (const auto& [k, n] : size) REQUIRE(n == g.size);
  for (const auto& [k, nodes] : per_node)
    for (const auto& [node, members] : nodes) g.per_node = std::max(g.per_node, members);
  return g;
}

void check_layout(const Layout& l, int gpn) {
  Plan p;
  p.tp = l.tp;
  p.cp = l.cp;
  p.ulysses = l.ulysses;
  p.dp = l.dp;
  p.pp = l.pp;
  p.dp_shard = l.dp_shard;
  Cluster c;
  c.node.gpus = gpn;
  c.nodes = std::max(1, p.gpus() / gpn);
  GroupShape s;
  s.dp = l.dp;
  s.tp = l.tp;
  s.pp = l.pp;
  s.cp = l.cp;
  s.ulysses = l.ulysses;
  s.dp_shard = l.dp_shard;
  s.ranks_per_node = gpn;
  const int seq = s.seq();
  // The executor's index of a rank in the weights' dp × seq group.
  auto dp_index = [seq](const Coordinates& x) { return x.dp_rank * seq + x.cp_rank; };
  const int shard = p.shard_group();
  const ztune::GroupLayout want = ztune::place_groups(p, c);
  CAPTURE(l.tp, l.cp, l.ulysses, l.dp, l.pp, l.dp_shard, gpn);
  auto same = [](const GroupPlacement& got, const GroupPlacement& w, const char* what) {
    INFO(what << ": executor " << got.size << " ranks, " << got.per_node << " per node; place_groups " << w.size
              << ", " << w.per_node);
    CHECK(got.size == w.size);
    CHECK(got.per_node == std::min(w.size, w.per_node));
  };
  same(measured(s, gpn, [](const Coordinates& x) { return std::vector{x.dp_rank, x.cp_rank, x.pp_rank}; }), want.tp,
       "tp");
  const GroupPlacement slot =
      measured(s, gpn, [](const Coordinates& x) { return std::vector{x.dp_rank, x.tp_rank, x.pp_rank}; });
  if (l.cp > 1) same(slot, want.cp, "cp");
  if (l.ulysses > 1) same(slot, want.ulysses, "ulysses");
  same(measured(s, gpn, [](const Coordinates& x) { return std::vector{x.tp_rank, x.pp_rank}; }), want.dp, "dp");
  same(measured(s, gpn, [&](const Coordinates& x) { return std::vector{x.tp_rank, dp_index(x)}; }), want.pp, "pp");
  same(measured(s, gpn,
                [&](const Coordinates& x) { return std::vector{x.tp_rank, x.pp_rank, dp_index(x) / shard}; }),
       want.shard, "shard");
  same(measured(s, gpn,
                [&](const Coordinates& x) { return std::vector{x.tp_rank, x.pp_rank, dp_index(x) % shard}; }),
       want.replica, "replica");
}

}  // namespace

TEST_CASE("place_groups sits every group where the executor's ranks are", "[groups][placement]") {
  const std::vector<Layout> layouts{
      {1, 1, 1, 16, 1, 0}, {2, 1, 1, 8, 1, 0},  {8, 1, 1, 2, 1, 0}, {16, 1, 1, 1, 2, 0}, {4, 1, 1, 2, 4, 0},
      {2, 2, 1, 4, 2, 0},  {1, 4, 1, 4, 1, 0},  {2, 1, 2, 4, 1, 0}, {1, 1, 1, 32, 1, 8}, {2, 1, 1, 16, 2, 4},
      {4, 2, 1, 4, 1, 2},  {8, 1, 1, 8, 4, 0},  {1, 1, 1, 8, 8, 0}, {2, 1, 1, 2, 8, 0},
  };
  for (const int gpn : {4, 8, 16})
    for (const auto& l : layouts) check_layout(l, gpn);
}
