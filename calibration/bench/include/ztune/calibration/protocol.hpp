#pragma once
// The one timing protocol of every calibration microbenchmark (STYLE.md #2,
// nccl-tests common.cu BenchTime): warm up first, then time back-to-back calls
// in rounds; a round's time per call is combined across ranks by taking the
// slowest rank (nccl-tests reports the max over ranks), and the median round is
// reported with its spread (interquartile range / median). The round count is
// adaptive (issue 21): at least 5, and more, up to max_repeats, while the
// spread is wider than target_spread (a busy machine's descheduled rounds);
// the fit drops a point still too wide and names it. Data checks happen outside: the caller re-initialises its buffers,
// runs the operation once more and compares with the closed-form answer.
//
// Example: Timing t = time_op(world, protocol, [&] { comm.all_reduce(buf, n); });
#include <functional>
#include <vector>

#include "ztune/executor/communicator.hpp"

namespace ztune::calibration {

struct Protocol {
  int warmup_iters = 3;         // untimed calls before the rounds
  int iters = 20;               // at most this many back-to-back calls per round
  int repeats = 5;              // rounds at least (never fewer than kMinRepeats); the median round is reported
  int max_repeats = 15;         // rounds at most, while the spread is above target_spread
  double target_spread = 0.05;  // interquartile range / median that ends the rounds early
  double round_budget_s = 0.04; // a round's calls shrink (to >= 1) so a round takes about this long
};

/// No point is reported from fewer rounds than this.
inline constexpr int kMinRepeats = 5;

struct Timing {
  double median_s = 0;  // per call, median round, slowest rank
  double min_s = 0;     // fastest round
  double max_s = 0;     // slowest round
  int iters = 0;        // calls per round actually used
  int repeats = 0;      // rounds actually timed (adaptive)
  double spread = 0;    // (75th − 25th percentile round) / median round
};

/// (p75 − p25) / median of the rounds (linear-interpolated quantiles); 0 for fewer than two.
double spread_of(std::vector<double> rounds);

/// Times `op` over all ranks of `world` (every rank calls it the same number of
/// times: the call count is agreed on through `world`). Collective over `world`.
Timing time_op(executor::Communicator& world, const Protocol& p, const std::function<void()>& op);

/// Median of a small sample (copied; the input is untouched). 0 for an empty one.
double median_of(std::vector<double> v);

}  // namespace ztune::calibration
