#include "ztune/model/layer_cost_memo.hpp"

namespace ztune {

LayerCostMemo::LayerCostMemo(const Transformer& m, const Cluster& c, const HardwareProfile& hw)
    : m_(&m), c_(&c), hw_(&hw) {}

bool LayerCostMemo::serves(const Transformer& m, const Cluster& c, const HardwareProfile& hw) const {
  return &m == m_ && &c == c_ && &hw == hw_ && c.device_kind == DeviceKind::gpu;
}

std::size_t LayerCostMemo::KeyHash::operator()(const LayerCostKey& k) const {
  // The small integers and enums packed into one word (each field's range
  // fits its bits in any plan check_plan accepts; a collision only costs a
  // comparison).
  std::uint64_t h = static_cast<std::uint64_t>(k.tp);
  h = h * 131 + static_cast<std::uint64_t>(k.cp);
  h = h * 131 + static_cast<std::uint64_t>(k.ulysses);
  h = h * 131 + static_cast<std::uint64_t>(k.micro_batch);
  h = h * 131 + static_cast<std::uint64_t>(k.sparse_block);
  h = h * 8 + static_cast<std::uint64_t>(k.precision);
  h = h * 8 + static_cast<std::uint64_t>(k.attention);
  h = h * 8 + static_cast<std::uint64_t>(k.recompute);
  h = h * 8 + static_cast<std::uint64_t>(k.recompute_policy);
  h = h * 131 + static_cast<std::uint64_t>(k.recompute_every);
  h = h * 8 + static_cast<std::uint64_t>(k.sparse_attention);
  h = h * 8 + (k.sequence_parallel ? 4u : 0u) + (k.tp_comm_overlap ? 2u : 0u) + (k.partition_activations ? 1u : 0u);
  h = h * 4 + static_cast<std::uint64_t>(k.fp8);
  return static_cast<std::size_t>(h ^ (h >> 29));
}

const LayerCostMemo::Costs& LayerCostMemo::costs(const Plan& p) {
  const LayerCostKey key = layer_cost_key(p);
  if (const auto it = entries_.find(key); it != entries_.end()) {
    ++hits_;
    return it->second;
  }
  ++misses_;
  if (entries_.size() >= kMaxEntries) entries_.clear();
  return entries_.emplace(key, Costs{layer_cost(*m_, p, *c_, *hw_), edge_cost(*m_, p, *c_, *hw_)}).first->second;
}

}  // namespace ztune
