#include "ztune/tuner/prune_reason.hpp"

#include <numeric>

namespace ztune {

std::string prune_reason_name(PruneReason r) {
  const auto i = static_cast<std::uint8_t>(r);
  const auto first = static_cast<std::uint8_t>(PruneReason::engine_first);
  if (i >= first && i < static_cast<std::uint8_t>(PruneReason::memory_gpu))
    return std::string(engine_rule_key(static_cast<EngineRule>(i - first)));
  switch (r) {
    case PruneReason::tp_across_nodes: return "tp must stay inside a node";
    case PruneReason::tp_shape: return "tp must divide heads, kv heads and ffn";
    case PruneReason::pp_layers: return "pp must not exceed the layers";
    case PruneReason::fp8_shape: return "FP8 needs each tp rank's weight dimensions in multiples of 16";
    case PruneReason::layout_other: return "layout rejected by check_plan";
    case PruneReason::unlaunchable: return "the launcher cannot start these ranks with each tp group inside a node";
    case PruneReason::plan_rule: return "plan rejected by check_plan";
    case PruneReason::memory_gpu: return "GPU memory";
    case PruneReason::memory_host: return "host memory";
    case PruneReason::memory_nvme: return "NVMe capacity";
    default: return "?";
  }
}

std::int64_t PruneCounts::total() const { return std::accumulate(n.begin(), n.end(), std::int64_t{0}); }

std::vector<std::pair<std::string, std::int64_t>> PruneCounts::named() const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (std::size_t i = 0; i < n.size(); ++i)
    if (n[i] != 0) out.emplace_back(prune_reason_name(static_cast<PruneReason>(i)), n[i]);
  return out;
}

}  // namespace ztune
