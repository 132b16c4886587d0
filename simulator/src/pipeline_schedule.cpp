#include "ztune/simulator/pipeline_schedule.hpp"

#include <algorithm>
#include <cassert>

namespace ztune::sim {
namespace {

std::vector<ScheduleStep> gpipe(int microbatches) {
  std::vector<ScheduleStep> steps;
  steps.reserve(static_cast<std::size_t>(2 * microbatches));
  for (int mb = 0; mb < microbatches; ++mb) steps.push_back({Pass::forward, mb, 0});
  for (int mb = microbatches - 1; mb >= 0; --mb) steps.push_back({Pass::backward, mb, 0});
  return steps;
}

std::vector<ScheduleStep> one_f_one_b(int stage, int stages, int microbatches) {
  std::vector<ScheduleStep> steps;
  steps.reserve(static_cast<std::size_t>(2 * microbatches));
  const int warmup = std::min(stages - stage - 1, microbatches);
  int next_fwd = 0;
  int next_bwd = 0;
  for (int i = 0; i < warmup; ++i) steps.push_back({Pass::forward, next_fwd++, 0});
  for (int i = 0; i < microbatches - warmup; ++i) {
    steps.push_back({Pass::forward, next_fwd++, 0});
    steps.push_back({Pass::backward, next_bwd++, 0});
  }
  while (next_bwd < microbatches) steps.push_back({Pass::backward, next_bwd++, 0});
  return steps;
}

// Megatron-LM schedules.py, get_model_chunk_id / get_microbatch_id_in_model_chunk:
// virtual micro-batch k runs chunk (k mod p·v) div p (reversed for backward) on
// micro-batch (k div p·v)·p + k mod p.
ScheduleStep interleaved_step(Pass pass, int k, int stages, int chunks) {
  const int in_group = k % (stages * chunks);
  int chunk = in_group / stages;
  if (pass == Pass::backward) chunk = chunks - chunk - 1;
  const int microbatch = (k / (stages * chunks)) * stages + k % stages;
  return {pass, microbatch, chunk};
}

std::vector<ScheduleStep> interleaved(int stage, int stages, int chunks, int microbatches) {
  assert(microbatches % stages == 0);
  const int total = microbatches * chunks;
  int warmup = 0;
  if (microbatches == stages) {
    warmup = total;  // Megatron: all forwards first when m == p
  } else {
    warmup = std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
  }
  std::vector<ScheduleStep> steps;
  steps.reserve(static_cast<std::size_t>(2 * total));
  for (int k = 0; k < warmup; ++k) steps.push_back(interleaved_step(Pass::forward, k, stages, chunks));
  const int remaining = total - warmup;
  for (int i = 0; i < remaining; ++i) {
    steps.push_back(interleaved_step(Pass::forward, warmup + i, stages, chunks));
    steps.push_back(interleaved_step(Pass::backward, i, stages, chunks));
  }
  for (int k = remaining; k < total; ++k) steps.push_back(interleaved_step(Pass::backward, k, stages, chunks));
  return steps;
}

}  // namespace

std::vector<ScheduleStep> stage_schedule(Schedule schedule, int stage, int stages, int chunks, int microbatches) {
  assert(stage >= 0 && stage < stages && microbatches > 0);
  switch (schedule) {
    case Schedule::gpipe: return gpipe(microbatches);
    case Schedule::one_f_one_b: return one_f_one_b(stage, stages, microbatches);
    case Schedule::interleaved: return interleaved(stage, stages, chunks, microbatches);
  }
  return {};
}

}  // namespace ztune::sim
