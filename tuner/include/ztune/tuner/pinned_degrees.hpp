#pragma once
// A search's pinned degrees (--tp, --pp, --cp, --ulysses) checked against the
// model before the search: one rule for `ztune search` and the planner's form.
//
// Example: pinned_degree_refusal(o, m) with o.cp = 3 on 1024-token sequences →
// "--cp: 3 context-parallel ranks cut the sequence into 2·cp = 6 load-balanced chunks, ...".
#include <optional>
#include <string>

#include "ztune/vocab/transformer.hpp"
#include "ztune/tuner/search_options.hpp"

namespace ztune {

/// A pinned degree the model cannot take (--tp 3 on 32 heads, --pp past the
/// layers, a --cp whose 2·cp chunks do not divide the sequence), said as
/// `ztune predict` says it, by check_plan_shape's own rule, under the search's
/// flag, rather than searched into "nothing fits even on N nodes"; nullopt
/// when the pins are fine.
[[nodiscard]] std::optional<std::string> pinned_degree_refusal(const SpaceOptions& o, const Transformer& m);

}  // namespace ztune
