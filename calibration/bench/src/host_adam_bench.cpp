// The host Adam rate: executor::host_adamw (ZeRO-Offload's CPU Adam, Ren et
// al. 2021 §4.2) on every rank at once, as an offloaded step runs it. The
// cluster file's cpu_adam_gparams_per_s is a node's rate: the ranks of a node
// share its cores, so the node rate is the sum over its ranks.
#include <cmath>
#include <vector>

#include "ztune/calibration/benches.hpp"
#include "ztune/executor/host_adam.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::calibration {

nlohmann::json bench_host_adam(BenchContext& ctx, int threads, int ranks_per_node) {
  constexpr std::size_t kParams = std::size_t{1} << 22;  // 4 Mi parameters per rank (64 MiB of states)
  kernels::ThreadPool pool(threads);
  auto p = ctx.backend.allocate(kParams, executor::MemCategory::host_optimizer);
  auto g = ctx.backend.allocate(kParams, executor::MemCategory::host_staging);
  auto m = ctx.backend.allocate(kParams, executor::MemCategory::host_optimizer);
  auto v = ctx.backend.allocate(kParams, executor::MemCategory::host_optimizer);
  kernels::AdamWParams h;
  h.lr = 1e-3f;
  h.weight_decay = 0.0f;
  h.step = 1;
  auto init = [&] {
    std::fill(p.data(), p.data() + kParams, 1.0f);
    std::fill(g.data(), g.data() + kParams, 0.5f);
    std::fill(m.data(), m.data() + kParams, 0.0f);
    std::fill(v.data(), v.data() + kParams, 0.0f);
  };
  init();
  const Timing t = time_op(ctx.world, ctx.protocol,
                           [&] { executor::host_adamw(p.data(), g.data(), m.data(), v.data(), kParams, h, pool); });
  init();
  executor::host_adamw(p.data(), g.data(), m.data(), v.data(), kParams, h, pool);
  double wrong = 0;
  for (std::size_t i = 0; i < kParams; ++i)
    if (std::abs(p.data()[i] - (1.0 - 1e-3)) > 1e-6) wrong += 1;  // step 1: m̂/√v̂ = 1, p ← p − lr
  ctx.world.all_reduce_doubles(&wrong, 1, executor::ReduceOp::sum);
  ctx.wrong += static_cast<std::int64_t>(wrong);
  const double per_rank = static_cast<double>(kParams) / t.median_s;
  const double node = per_rank * ranks_per_node;
  if (ctx.out != nullptr) {
    std::fprintf(ctx.out, "\n# host AdamW (offload optimizer), %d thread(s) per rank, %d rank(s) per node at once\n",
                 threads, ranks_per_node);
    std::fprintf(ctx.out, "# %12s %10s %16s %16s %7s\n", "params", "time", "Gparams/s/rank", "Gparams/s/node",
                 "#wrong");
    std::fprintf(ctx.out, "  %12zu %10.1f %16.4f %16.4f %7.0f\n", kParams, t.median_s * 1e6, per_rank / 1e9,
                 node / 1e9, wrong);
  }
  return {{"params", kParams},           {"threads_per_rank", threads}, {"ranks_per_node", ranks_per_node},
          {"time_s", t.median_s},        {"time_min_s", t.min_s},       {"time_max_s", t.max_s},
          {"iters", t.iters},            {"repeats", t.repeats}, {"spread", t.spread},        {"params_per_s_per_rank", per_rank},
          {"node_params_per_s", node},   {"wrong", wrong}};
}

}  // namespace ztune::calibration
