#pragma once
// The search passes (rules, memory prune, analytical rank) run through
// run_pass(): it names the pass, skips it when disabled, times it and counts
// what went in and what came out (STYLE.md #15, after DuckDB's RunOptimizer).
// Passes work on batches so the clock is read per batch, not per plan. The
// simulate pass fills the same PassStats itself (simulate_pass.cpp): it walks
// the ranked plans in order and stops at the first it cannot simulate, which
// a batch body cannot say.
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace ztune {

struct PassStats {
  PassStats() = default;
  explicit PassStats(std::string pass_name, bool on = true) : name(std::move(pass_name)), enabled(on) {}

  std::string name;       // "rules", "prune", "rank", "simulate"
  bool enabled = true;
  std::int64_t in = 0;    // plans given to the pass
  std::int64_t out = 0;   // plans it passed on
  double seconds = 0;     // CPU-seconds summed over workers
  std::string note;       // e.g. "simulator not available"

  void add(const PassStats& o) {
    in += o.in;
    out += o.out;
    seconds += o.seconds;
  }
};

/// Runs `body(n)` on a batch of n plans; body returns how many it kept. A
/// disabled pass keeps everything and costs nothing.
template <class Body>
std::int64_t run_pass(PassStats& stats, std::int64_t n, Body&& body) {
  stats.in += n;
  if (!stats.enabled) {
    stats.out += n;
    return n;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t kept = std::forward<Body>(body)(n);
  stats.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.out += kept;
  return kept;
}

}  // namespace ztune
