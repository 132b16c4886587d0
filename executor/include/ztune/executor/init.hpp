#pragma once
// Deterministic initialisation that does not depend on how the model is split:
// element i of full tensor `name` is drawn from a counter-based generator keyed on
// (seed, name, i) (SplitMix64 → two uniforms → Box–Muller), so every shard of every
// plan gets exactly the values the single-rank run gets.
#include <cstdint>
#include <string_view>

#include "ztune/executor/param_specs.hpp"

namespace ztune::executor {

/// Standard normal sample for (seed, tensor name, full index).
float normal_sample(std::uint64_t seed, std::string_view name, std::uint64_t index);
/// Fills this rank's shard of `spec` (numel = spec.shard.numel()).
void init_param(float* out, const ParamSpec& spec, std::uint64_t seed);

}  // namespace ztune::executor
