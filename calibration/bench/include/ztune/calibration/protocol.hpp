#pragma once
// The one timing protocol of every calibration microbenchmark (STYLE.md #2,
// nccl-tests common.cu BenchTime): warm up first, then time back-to-back calls
// in rounds; a round's time per call is combined across ranks by taking the
// slowest rank (nccl-tests reports the max over ranks), and the median round is
// reported. Data checks happen outside: the caller re-initialises its buffers,
// runs the operation once more and compares with the closed-form answer.
//
// Example: Timing t = time_op(world, protocol, [&] { comm.all_reduce(buf, n); });
#include <functional>

#include "ztune/executor/communicator.hpp"

namespace ztune::calibration {

struct Protocol {
  int warmup_iters = 3;         // untimed calls before the rounds
  int iters = 20;               // at most this many back-to-back calls per round
  int repeats = 5;              // rounds; the median round is reported
  double round_budget_s = 0.04; // a round's calls shrink (to >= 1) so a round takes about this long
};

struct Timing {
  double median_s = 0;  // per call, median round, slowest rank
  double min_s = 0;     // fastest round
  double max_s = 0;     // slowest round
  int iters = 0;        // calls per round actually used
  int repeats = 0;
};

/// Times `op` over all ranks of `world` (every rank calls it the same number of
/// times: the call count is agreed on through `world`). Collective over `world`.
Timing time_op(executor::Communicator& world, const Protocol& p, const std::function<void()>& op);

/// Median of a small sample (copied; the input is untouched). 0 for an empty one.
double median_of(std::vector<double> v);

}  // namespace ztune::calibration
