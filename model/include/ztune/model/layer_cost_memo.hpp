// LayerCostMemo: the layer and edge costs of a search's plans, remembered by
// what they read of the plan (op_costs.hpp LayerCostKey). A search prices
// thousands of plans that differ only in what a layer does not see — the
// data-parallel degree, pipeline stages, ZeRO stage, offload, accumulation —
// and layer_cost is about two fifths of a prediction (docs/benchmarks.md,
// session 21). Owned by one thread; bound to one model, cluster and profile.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "ztune/model/op_costs.hpp"

namespace ztune {

class LayerCostMemo {
 public:
  struct Costs {
    LayerCost layer;
    EdgeCost edge;
  };

  /// Bound to these three, which must outlive it and not change.
  LayerCostMemo(const Transformer& m, const Cluster& c, const HardwareProfile& hw);

  /// Whether it prices plans of this model, cluster and profile: the same
  /// objects it was made with, on GPU ranks (op_costs.hpp LayerCostKey).
  [[nodiscard]] bool serves(const Transformer& m, const Cluster& c, const HardwareProfile& hw) const;

  /// layer_cost and edge_cost of plan p, computed on the first plan with its
  /// key and remembered. The reference holds until the next call.
  const Costs& costs(const Plan& p);

  [[nodiscard]] std::int64_t hits() const { return hits_; }
  [[nodiscard]] std::int64_t misses() const { return misses_; }

 private:
  struct KeyHash {
    std::size_t operator()(const LayerCostKey& k) const;
  };
  // Beyond this many distinct layers the memo starts again (a search's space
  // holds a few hundred: tp × cp × Ulysses × micro-batch × kernel × recompute).
  static constexpr std::size_t kMaxEntries = 4096;

  const Transformer* m_;
  const Cluster* c_;
  const HardwareProfile* hw_;
  std::unordered_map<LayerCostKey, Costs, KeyHash> entries_;
  std::int64_t hits_ = 0;
  std::int64_t misses_ = 0;
};

}  // namespace ztune
