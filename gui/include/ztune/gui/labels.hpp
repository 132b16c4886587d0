#pragma once
// Human labels for the cost model's fixed enums and for a plan's attributes.
// The enums are iterated by index up to their `count`, so a line the cost model
// adds appears in every chart (under its raw name until it gets a label here).
//
// Example: mem_line_label(0) == "Parameters"; layout_label(plan) == "dp16 · tp8 · pp2".
#include <cstdint>
#include <cstddef>

#include <QString>

#include "ztune/vocab/plan.hpp"

namespace ztune::gui {

/// Label of MemLine #i ("Parameters", "Activations", ...).
QString mem_line_label(std::size_t i);
/// Label of TimePart #i ("Forward", "DP communication", ...).
QString time_part_label(std::size_t i);
/// "dp16 · tp8 · pp2" (" · cp2" after tp with context parallelism, " · u4" with
/// DeepSpeed-Ulysses; + " · v2" with
/// virtual stages, " · SP" with sequence parallelism; " · stages 15-16" where
/// the stages are uneven: stated ones, or with the model's `layers` given, the
/// balanced partition of layers pp does not divide).
QString layout_label(const Plan& p, int layers = 0);
/// "—", "optimizer → CPU", "params → CPU", "opt → NVMe, params → CPU", "opt + params → NVMe".
QString offload_label(const Plan& p);
/// "2 × 8" (micro-batch × gradient accumulation steps).
QString batching_label(const Plan& p);
/// "standard", "flash", or "sparse fixed/64"; "… · unfused bias" without
/// Megatron's bias fusions (plan.bias_fusion false).
QString attention_label(const Plan& p);
/// "none", "selective", "full".
QString recompute_label(const Plan& p);
/// "1F1B", "GPipe", "interleaved 1F1B".
QString schedule_label(const Plan& p);
/// "bf16", "fp16", "fp32"; with 16-bit optimizer states "bf16, Adam bf16/bf16".
QString precision_label(const Plan& p);
/// "ZeRO-3" or "—" for stage 0.
QString zero_label(const Plan& p);

/// The plans table's count: `shown` pass the filters of the `kept` plans the
/// table holds, of `feasible` that fit in the search ("312 of 1,055 plans that
/// fit"; "the best 50 of 1,055 plans that fit" for a search reopened from
/// history, which stores its best plans only).
QString plan_count_text(int shown, int kept, std::int64_t feasible, bool interrupted = false);

}  // namespace ztune::gui
