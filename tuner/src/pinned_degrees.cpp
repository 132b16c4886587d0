#include "ztune/tuner/pinned_degrees.hpp"

#include <algorithm>

#include "ztune/vocab/plan.hpp"

namespace ztune {

std::optional<std::string> pinned_degree_refusal(const SpaceOptions& o, const Transformer& m) {
  Plan p;
  p.tp = std::max(1, o.tp.value_or(1));
  p.pp = std::max(1, o.pp.value_or(1));
  p.cp = std::max(1, o.cp.value_or(1));
  p.ulysses = std::max(1, o.ulysses.value_or(1));
  p.dp = 1;
  p.micro_batch = 1;
  p.grad_accum = 8 * p.pp;  // enough micro-batches for any schedule's rule
  p.global_batch = p.grad_accum;
  const auto why = check_plan_shape(p, m);
  if (!why) return std::nullopt;
  for (const char* field : {"tp", "pp", "cp", "ulysses"}) {
    const std::string prefix = std::string("$.") + field + ": ";
    if (why->starts_with(prefix)) return std::string("--") + field + ": " + why->substr(prefix.size());
  }
  return std::nullopt;  // a rule of the probe's other fields, not of a pin: the search says what it finds
}

}  // namespace ztune
