#include "ztune/vocab/pipeline_schedule.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ztune {

namespace {

// The chunk interleaved pass k runs: forward (k mod p·v) div p, backward the
// chunks in reverse.
int interleaved_chunk(long k, int p, int v, bool forward) {
  const int chunk = static_cast<int>((k % (static_cast<long>(p) * v)) / p);
  return forward ? chunk : v - 1 - chunk;
}

// Interleaved 1F1B's warm-up forwards on stage s (all m·v when m = p).
long interleaved_warmup(int p, int s, int m, int v) {
  const long total = static_cast<long>(m) * v;
  return m == p ? total : std::min(static_cast<long>(p - s - 1) * 2 + static_cast<long>(v - 1) * p, total);
}

std::vector<PipeAction> interleaved(int p, int s, int m, int v) {
  if (m % p != 0)
    throw std::invalid_argument("interleaved 1F1B needs micro-batches (" + std::to_string(m) +
                                ") divisible by the pipeline stages (" + std::to_string(p) + ")");
  const int total = m * v;
  auto pass = [&](int k, bool forward) {
    return PipeAction{forward, (k / (p * v)) * p + k % p, interleaved_chunk(k, p, v, forward)};
  };
  const int warmup = static_cast<int>(interleaved_warmup(p, s, m, v));
  std::vector<PipeAction> out;
  out.reserve(static_cast<std::size_t>(2 * total));
  for (int k = 0; k < warmup; ++k) out.push_back(pass(k, true));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(pass(warmup + k, true));
    out.push_back(pass(k, false));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(pass(k, false));
  return out;
}

}  // namespace

std::vector<PipeAction> pipeline_schedule(Schedule kind, int stages, int stage, int m, int chunks) {
  if (stages < 1 || stage < 0 || stage >= stages || m < 1 || chunks < 1)
    throw std::invalid_argument("pipeline schedule: stage " + std::to_string(stage) + " of " +
                                std::to_string(stages) + ", " + std::to_string(m) + " micro-batches, " +
                                std::to_string(chunks) + " chunks: expected 0 <= stage < stages and counts >= 1");
  if (kind == Schedule::interleaved) return interleaved(stages, stage, m, chunks);
  std::vector<PipeAction> out;
  out.reserve(static_cast<std::size_t>(2 * m));
  if (kind == Schedule::gpipe) {
    for (int i = 0; i < m; ++i) out.push_back({true, i, 0});
    for (int i = 0; i < m; ++i) out.push_back({false, i, 0});
    return out;
  }
  const int warmup = std::min(stages - stage - 1, m);
  for (int i = 0; i < warmup; ++i) out.push_back({true, i, 0});
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back({true, warmup + i, 0});
    out.push_back({false, i, 0});
  }
  for (int i = m - warmup; i < m; ++i) out.push_back({false, i, 0});
  return out;
}

int chunks_in_flight(Schedule kind, int stages, int stage, int micro_batches, int chunks) {
  const int p = stages, m = micro_batches;
  if (p <= 1) return 1;
  switch (kind) {
    case Schedule::gpipe: return m;
    case Schedule::one_f_one_b: return std::min(p - stage, m);
    case Schedule::interleaved: {
      const long total = static_cast<long>(m) * chunks;
      return static_cast<int>(std::min(interleaved_warmup(p, stage, m, chunks) + 1, total));
    }
  }
  return 1;
}

double interleaved_peak_layers(int stages, int stage, int micro_batches, std::span<const int> chunk_layers) {
  const int p = stages, v = static_cast<int>(chunk_layers.size()) / stages;
  auto layers = [&](int chunk) {
    return static_cast<double>(chunk_layers[static_cast<std::size_t>(chunk) * static_cast<std::size_t>(p) +
                                            static_cast<std::size_t>(stage)]);
  };
  const long warm = chunks_in_flight(Schedule::interleaved, p, stage, micro_batches, v);
  // Whole rounds of the warm-up hold p passes of each chunk, the rest the
  // first chunks'. A stage of equal chunks holds `warm` of them, whatever the order.
  const long round = static_cast<long>(p) * v, q = warm / round, r = warm % round;
  double held = 0;
  bool equal = true;
  for (int chunk = 0; chunk < v; ++chunk) {
    held += static_cast<double>(q * p + std::clamp(r - static_cast<long>(chunk) * p, 0L, static_cast<long>(p))) *
            layers(chunk);
    equal = equal && layers(chunk) == layers(0);
  }
  if (equal) return held;
  // Steady step i adds forward warm − 1 + i and frees backward i − 1. Both
  // chunks stay the same for runs of up to p steps, over which the count moves
  // linearly: its largest value is at a run's first or last step. Both orders
  // repeat every p·v steps, so one period finds the peak: at most 2v + 1 runs
  // (the memory model's hot path).
  const long steady = std::min(static_cast<long>(micro_batches) * v - warm, round);
  double peak = held;
  for (long i = 1; i <= steady;) {
    const long f = warm - 1 + i, b = i - 1;
    const long run = std::min({p - f % p, p - b % p, steady - i + 1});
    const double step = layers(interleaved_chunk(f, p, v, true)) - layers(interleaved_chunk(b, p, v, false));
    peak = std::max({peak, held + step, held + static_cast<double>(run) * step});
    held += static_cast<double>(run) * step;
    i += run;
  }
  return peak;
}

}  // namespace ztune
