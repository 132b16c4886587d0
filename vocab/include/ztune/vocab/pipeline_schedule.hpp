#pragma once
// The order in which one pipeline stage runs the forward and backward passes of a
// step's micro-batches: one definition, which the executor trains by and the
// simulator builds its operation graph from (so the simulator simulates what the
// executor runs; issue 22).
//
// GPipe (Huang et al. 2019): all forwards, then all backwards. 1F1B (Narayanan
// et al. 2021 §2.2, PipeDream-Flush; Megatron-LM's
// forward_backward_pipelining_without_interleaving): stage s runs
// min(p − s − 1, m) warm-up forwards, then alternates one forward and one
// backward, then drains the remaining backwards; at most p − s micro-batches
// are in flight. Backwards run in micro-batch order in both, so gradient sums
// add up in the same order on every stage (the simulator once ran GPipe's
// backwards in reverse; with identical micro-batches the iteration time is the
// same either way, and the executor's order is the one trained).
//
// Interleaved 1F1B (Narayanan et al. 2021, §2.2.2; Megatron-LM's
// forward_backward_pipelining_with_interleaving, get_model_chunk_id /
// get_microbatch_id_in_model_chunk): the stage holds v model chunks and runs
// m·v passes each way. Pass k belongs to micro-batch (k div p·v)·p + k mod p
// and, forward, to chunk (k mod p·v) div p (backward: the chunks in reverse):
// micro-batches go through in groups of p, one chunk at a time. Warm-up:
// (p − s − 1)·2 + (v − 1)·p forwards (all m·v when m = p), then 1F1B, then the
// remaining backwards. Needs m divisible by p.
//
// The order depends only on the counts, not on how many layers each stage
// holds: uneven stages (stage_layers) run the same schedule.
#include <span>
#include <vector>

#include "ztune/vocab/plan.hpp"

namespace ztune {

struct PipeAction {
  bool forward = true;
  int microbatch = 0;
  int chunk = 0;  // the stage's model chunk (interleaved 1F1B; 0 otherwise); virtual stage = chunk·p + stage
  bool operator==(const PipeAction&) const = default;
};

/// Stage `stage` (0-based) of `stages`, `micro_batches` per step; `chunks` > 1
/// only with Schedule::interleaved. Throws std::invalid_argument when the
/// counts are out of range or, interleaving, `micro_batches` is not a multiple
/// of `stages`.
[[nodiscard]] std::vector<PipeAction> pipeline_schedule(Schedule kind, int stages, int stage, int micro_batches,
                                                        int chunks = 1);

/// The most (micro-batch, chunk) forwards stage `stage` holds activations of
/// at once under that schedule, in closed form (the memory model's hot path):
/// GPipe m; 1F1B min(p − s, m); interleaved min(warm-up + 1, m·v) with the
/// warm-up above (m·v when m = p). Divided by v it is the stage's layers'
/// worth of micro-batches; at stage 0 of interleaving, Korthikanti et al.
/// 2022 §4.2.3's p·(1 + (p − 1)/(p·v)).
[[nodiscard]] int chunks_in_flight(Schedule kind, int stages, int stage, int micro_batches, int chunks = 1);

/// The most transformer layers stage `stage` holds activations of at once
/// under interleaved 1F1B with chunks of the given layers (Plan::chunk_layers:
/// stages × chunks entries, chunk c of stage r at c·stages + r). Its chunks
/// differing in size, the peak may come after the warm-up: a stage whose last
/// chunk is empty frees nothing on its first backwards. Equal chunks: their
/// layers × chunks_in_flight. O(chunks).
[[nodiscard]] double interleaved_peak_layers(int stages, int stage, int micro_batches,
                                             std::span<const int> chunk_layers);

}  // namespace ztune
