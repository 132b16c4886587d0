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

double spread_of(std::vector<double> v) {
  if (v.size() < 2) return 0;
  std::sort(v.begin(), v.end());
  auto quantile = [&](double q) {
    const double at = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(at));
    const std::size_t hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (at - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  const double med = quantile(0.5);
  return med > 0 ? (quantile(0.75) - quantile(0.25)) / med : 0;
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

  // Every rank sees the same round times (the slowest rank's), so every rank
  // takes the same decision to time one more round.
  std::vector<double> rounds;
  const int at_least = std::max(kMinRepeats, p.repeats);
  const int at_most = std::max(at_least, p.max_repeats);
  while (static_cast<int>(rounds.size()) < at_most) {
    world.barrier();
    start = now_s();
    for (int i = 0; i < iters; ++i) op();
    rounds.push_back(slowest(world, (now_s() - start) / iters));
    if (static_cast<int>(rounds.size()) >= at_least && spread_of(rounds) <= p.target_spread) break;
  }
  Timing t;
  t.median_s = median_of(rounds);
  t.min_s = *std::min_element(rounds.begin(), rounds.end());
  t.max_s = *std::max_element(rounds.begin(), rounds.end());
  t.iters = iters;
  t.repeats = static_cast<int>(rounds.size());
  t.spread = spread_of(rounds);
  return t;
}

}  // namespace ztune::calibration
