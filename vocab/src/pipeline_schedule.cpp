#include "ztune/vocab/pipeline_schedule.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ztune {

namespace {

std::vector<PipeAction> interleaved(int p, int s, int m, int v) {
  if (m % p != 0)
    throw std::invalid_argument("interleaved 1F1B needs micro-batches (" + std::to_string(m) +
                                ") divisible by the pipeline stages (" + std::to_string(p) + ")");
  const int total = m * v;
  auto pass = [&](int k, bool forward) {
    const int in_group = k % (p * v);
    const int chunk = in_group / p;
    return PipeAction{forward, (k / (p * v)) * p + k % p, forward ? chunk : v - 1 - chunk};
  };
  const int warmup = m == p ? total : std::min((p - s - 1) * 2 + (v - 1) * p, total);
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
      if (m == p) return static_cast<int>(total);
      const long warmup = std::min(static_cast<long>(p - stage - 1) * 2 + static_cast<long>(chunks - 1) * p, total);
      return static_cast<int>(std::min(warmup + 1, total));
    }
  }
  return 1;
}

}  // namespace ztune
