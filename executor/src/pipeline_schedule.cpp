#include "ztune/executor/pipeline_schedule.hpp"

#include <algorithm>

namespace ztune::executor {

std::vector<PipeAction> pipeline_schedule(Schedule kind, int stages, int stage, int m) {
  std::vector<PipeAction> out;
  if (kind == Schedule::gpipe) {
    for (int i = 0; i < m; ++i) out.push_back({true, i});
    for (int i = 0; i < m; ++i) out.push_back({false, i});
    return out;
  }
  const int warmup = std::min(stages - stage - 1, m);
  for (int i = 0; i < warmup; ++i) out.push_back({true, i});
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back({true, warmup + i});
    out.push_back({false, i});
  }
  for (int i = m - warmup; i < m; ++i) out.push_back({false, i});
  return out;
}

}  // namespace ztune::executor
