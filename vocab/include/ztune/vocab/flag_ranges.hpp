#pragma once
// The ranges of the numeric flags that `ztune search` and the planner's form
// both take: one owner for the command line's validators (cli/) and the form's
// checks (gui/src/search_inputs.cpp), so that a value one refuses the other
// refuses too, in the same words.
//
// Example: integer_complaint("99999999", kSeqFlag) → "expected a sequence length from 1 to 16777216, got "99999999"".
#include <limits>

#include "ztune/vocab/flag_values.hpp"
#include "ztune/vocab/plan.hpp"

namespace ztune {

/// --gpus, --min-gpus, --max-gpus, --top and other counts an int holds.
inline constexpr IntegerRange kWholeNumberFlag{1, std::numeric_limits<int>::max(), "a whole number"};
/// --seq: a model file's own bound on seq_len (ztune.model/1).
inline constexpr IntegerRange kSeqFlag{1, 1 << 24, "a sequence length"};
/// --global-batch: as a plan file holds it.
inline constexpr IntegerRange kGlobalBatchFlag{1, kMaxGlobalBatch, "a sequence count"};
/// --cp and --max-cp, --ulysses and --max-ulysses, --dp-shard: as a plan file holds them.
inline constexpr IntegerRange kCpFlag{1, kMaxPlanDegree, "a context-parallel degree"};
inline constexpr IntegerRange kUlyssesFlag{1, kMaxPlanDegree, "a Ulysses degree"};
inline constexpr IntegerRange kDpShardFlag{2, kMaxPlanDegree, "a shard group size"};  // a group of 1 shards nothing
/// --tokens and --gpu-hour-price: bounded so that days and cost stay finite
/// numbers to rank by (a price of 1e306 overflowed every cost and ranked a
/// slower plan first): 1e18 tokens is 60,000 times Llama 3's 15T, and no
/// GPU-hour costs a billion.
inline constexpr NumberRange kTokensFlag{0, 1e18, "a token count", false};
inline constexpr NumberRange kGpuHourPriceFlag{0, 1e9, "a price", false};
/// --memory-headroom: the percent of each GPU's memory kept free.
inline constexpr NumberRange kMemoryHeadroomFlag{0, 50, "a percentage", true};

}  // namespace ztune
