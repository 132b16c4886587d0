#pragma once
// The data-, tensor-, context- and pipeline-parallel groups of a job as
// communicator splits. Rank layout (Megatron-Core's tp-cp-dp-pp): tensor-parallel
// ranks are adjacent (so they share a node), then context-parallel, then
// data-parallel, then pipeline stages:
//   world_rank = ((pp_rank · dp + dp_rank) · cp + cp_rank) · tp + tp_rank.
// Context-parallel ranks hold the same weights, so the data-parallel group of
// the weights (`dp`: gradient reduction, ZeRO partitions) is their dp × cp
// ranks, its rank dp_rank · cp + cp_rank; `cp` rings the attention's K/V.
// DeepSpeed-Ulysses ranks (never with cp > 1: check_plan_shape) take cp's
// place in this order, contiguous after tp: the slot's size is cp × ulysses
// (seq()), cp_rank is the rank in it, and with ulysses > 1 `ulysses` points at
// that group (the all-to-all over heads) and ulysses_rank repeats cp_rank.
#include <memory>
#include <vector>

#include "ztune/executor/communicator.hpp"

namespace ztune::executor {

struct GroupShape {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int chunks = 1;  // model chunks per pipeline stage: interleaved 1F1B's virtual stages (no extra ranks)
  int ranks_per_node = 0;  // consecutive world ranks per node; 0 = all on one node
  std::vector<int> stage_layers{};  // blocks per pipeline stage (the plan's); empty = balanced (plan.hpp)
  int cp = 1;  // context-parallel ranks per sequence (ring attention); last, so older initialisers stay valid
  int ulysses = 1;  // DeepSpeed-Ulysses ranks per sequence (all-to-all over heads); never with cp > 1
  // Hybrid sharding: ZeRO's partitions over groups of dp_shard consecutive
  // ranks of the weights' dp × seq() group, replicated across them; 0 = one group.
  int dp_shard = 0;
  std::vector<int> chunk_layers{};  // blocks per model chunk (the plan's); empty = each stage's chunks equal
  /// Ranks of the sequence slot: cp or ulysses ranks.
  [[nodiscard]] int seq() const { return cp * ulysses; }
  [[nodiscard]] int world() const { return dp * tp * seq() * pp; }
  [[nodiscard]] bool hybrid() const { return dp_shard > 0 && dp_shard < dp * seq(); }
};

struct Coordinates {
  int dp_rank = 0;
  int tp_rank = 0;
  int pp_rank = 0;
  int cp_rank = 0;       // rank in the sequence slot (cp or Ulysses ranks)
  int ulysses_rank = 0;  // = cp_rank when the slot holds Ulysses ranks, else 0
};

/// (dp, tp, pp, cp) coordinates of a world rank.
Coordinates coordinates_of(int world_rank, const GroupShape& shape);
int world_rank_of(const Coordinates& c, const GroupShape& shape);

struct ProcessGroups {
  GroupShape shape;
  Coordinates coords;
  Communicator* world = nullptr;         // not owned
  std::unique_ptr<Communicator> dp;      // same tp and pp coordinates: the dp × cp ranks of the weights
                                         // (with hybrid sharding: the dp_shard ranks of this one's shard group)
  std::unique_ptr<Communicator> replica; // hybrid sharding: the ranks holding the same partition (one per
                                         // shard group, rank = shard group index); nullptr without it
  std::unique_ptr<Communicator> cp;      // same dp, tp and pp coordinates (rank = cp rank): the attention ring
  Communicator* ulysses = nullptr;       // cp.get() when the slot holds Ulysses ranks (all-to-all), else nullptr
  std::unique_ptr<Communicator> tp;      // same dp and pp coordinates
  std::unique_ptr<Communicator> pp;      // same dp and tp coordinates (rank = stage)
  std::unique_ptr<Communicator> embed;   // first and last stage of one pipeline (tied
                                         // embeddings), nullptr elsewhere, when pp = 1,
                                         // or when the model's embeddings are untied
  // When the dp group spans nodes (ranks_per_node): its ranks on this node, and
  // the ranks with this one's local index on every node (dp rank = inter rank ·
  // intra size + intra rank). nullptr on one node.
  std::unique_ptr<Communicator> dp_intra;
  std::unique_ptr<Communicator> dp_inter;
  [[nodiscard]] bool first_stage() const { return coords.pp_rank == 0; }
  [[nodiscard]] bool last_stage() const { return coords.pp_rank == shape.pp - 1; }
};

/// Splits `world` (whose size must be shape.world()); collective over world.
/// `tied_embeddings`: whether the first and last stage share wte (the embed group).
ProcessGroups make_process_groups(Communicator& world, const GroupShape& shape, bool tied_embeddings = true);

}  // namespace ztune::executor
