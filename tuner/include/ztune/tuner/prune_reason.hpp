#pragma once
// Why a plan left the search: a layout rule, a plan rule, an engine rule, or
// memory. Counted per reason in a fixed array (no allocation in the hot loop).
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ztune/tuner/engine.hpp"

namespace ztune {

enum class PruneReason : std::uint8_t {
  tp_across_nodes,  // tensor-parallel group would span nodes
  tp_shape,         // tp does not divide heads / kv heads / ffn (check_plan)
  pp_layers,        // more stages than layers (check_plan)
  fp8_shape,        // with FP8, tp leaves weight dimensions that are not multiples of 16 (check_plan)
  layout_other,     // check_plan rejected the layout for another reason
  unlaunchable,     // torchrun / the deepspeed launcher cannot start the ranks with each tp group inside a node
  plan_rule,        // check_plan rejected a generated plan (a generator/model mismatch)
  engine_first,     // engine rules follow, EngineRule order
  memory_gpu = engine_first + static_cast<std::uint8_t>(EngineRule::count),
  memory_host,
  memory_nvme,
  count
};

[[nodiscard]] constexpr PruneReason engine_reason(EngineRule r) {
  return static_cast<PruneReason>(static_cast<std::uint8_t>(PruneReason::engine_first) + static_cast<std::uint8_t>(r));
}

/// The key used in --json "pruned_by" and in --explain.
std::string prune_reason_name(PruneReason r);

struct PruneCounts {
  std::array<std::int64_t, static_cast<std::size_t>(PruneReason::count)> n{};
  void add(PruneReason r, std::int64_t k = 1) { n[static_cast<std::size_t>(r)] += k; }
  void add(const PruneCounts& o) {
    for (std::size_t i = 0; i < n.size(); ++i) n[i] += o.n[i];
  }
  [[nodiscard]] std::int64_t operator[](PruneReason r) const { return n[static_cast<std::size_t>(r)]; }
  [[nodiscard]] std::int64_t total() const;
  /// Non-zero counts as (name, count), in rule order.
  [[nodiscard]] std::vector<std::pair<std::string, std::int64_t>> named() const;
};

}  // namespace ztune
