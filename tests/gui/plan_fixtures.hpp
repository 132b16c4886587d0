#pragma once
// Hand-made candidates whose table order and filters are obvious by eye
// (STYLE.md #20): the numbers are chosen, not computed by the cost model.
#include <vector>

#include "ztune/tuner/candidate.hpp"

namespace ztune::gui::test {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// A candidate with the given layout, ZeRO stage, offload, GPU memory (GiB) and tokens/s.
inline Candidate candidate(int dp, int tp, int pp, int zero, bool offload, double mem_gib, double tokens_per_s) {
  Candidate c;
  c.plan.dp = dp;
  c.plan.tp = tp;
  c.plan.pp = pp;
  c.plan.zero_stage = zero;
  c.plan.offload_optimizer = offload ? OffloadTarget::cpu : OffloadTarget::none;
  c.plan.global_batch = dp * 4;
  c.plan.micro_batch = 1;
  c.plan.grad_accum = 4;
  c.prediction.memory.gpu_total_bytes = mem_gib * kGiB;
  c.prediction.memory.gpu[static_cast<std::size_t>(MemLine::params)] = mem_gib * kGiB;
  c.prediction.memory.gpu_capacity_bytes = 32 * kGiB;
  c.prediction.memory.fits_gpu = mem_gib <= 32;  // a search's plans fit; the closest ones do not
  c.prediction.memory.fits_host = c.prediction.memory.fits_nvme = true;
  c.prediction.time.tokens_per_s = tokens_per_s;
  c.prediction.time.iteration_s = 1000.0 / tokens_per_s;
  c.prediction.time.parts[static_cast<std::size_t>(TimePart::forward)] = c.prediction.time.iteration_s;
  c.prediction.time.mfu = tokens_per_s / 1e5;
  c.timed = true;
  return c;
}

/// Four plans, best throughput first: memory 10.1, 9.5, 30, 2 GiB (as text "10.1 GiB" sorts before "9.5 GiB").
inline std::vector<Candidate> four_plans() {
  return {candidate(8, 2, 1, 3, false, 10.1, 40000), candidate(16, 1, 1, 1, false, 9.5, 30000),
          candidate(4, 2, 2, 3, true, 30.0, 20000), candidate(16, 1, 1, 3, true, 2.0, 10000)};
}

}  // namespace ztune::gui::test
