#include "ztune/calibration/protocol.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace ztune::calibration {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double slowest(executor::Communicator& world, double seconds) {
  world.all_reduce_doubles(&seconds, 1, executor::ReduceOp::max);
  return seconds;
}
}  // namespace

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Timing time_op(executor::Communicator& world, const Protocol& p, const std::function<void()>& op) {
  // Warm-up (also the estimate that sizes the rounds): the slowest rank's
  // per-call time, so every rank agrees on the call count.
  world.barrier();
  double start = now_s();
  const int warm = std::max(1, p.warmup_iters);
  for (int i = 0; i < warm; ++i) op();
  const double estimate = slowest(world, (now_s() - start) / warm);
  int iters = p.iters;
  if (estimate > 0) iters = static_cast<int>(std::min<double>(p.iters, std::floor(p.round_budget_s / estimate)));
  iters = std::max(1, iters);

  std::vector<double> rounds;
  for (int r = 0; r < std::max(1, p.repeats); ++r) {
    world.barrier();
    start = now_s();
    for (int i = 0; i < iters; ++i) op();
    rounds.push_back(slowest(world, (now_s() - start) / iters));
  }
  Timing t;
  t.median_s = median_of(rounds);
  t.min_s = *std::min_element(rounds.begin(), rounds.end());
  t.max_s = *std::max_element(rounds.begin(), rounds.end());
  t.iters = iters;
  t.repeats = static_cast<int>(rounds.size());
  return t;
}

}  // namespace ztune::calibration
