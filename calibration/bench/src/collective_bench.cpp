// The shared collective driver (nccl-tests' TimeTest): for each layout and each
// registered test, sizes double from min to max; warm-up and timed rounds per
// size (protocol.hpp), then the data check on freshly initialised buffers.
#include <algorithm>
#include <cmath>

#include "ztune/calibration/benches.hpp"
#include "ztune/calibration/collective_test.hpp"

namespace ztune::calibration {

namespace {

void header(std::FILE* out, const CollectiveTest& t, const GroupLayout& g) {
  if (out == nullptr) return;
  std::fprintf(out, "\n# %s  group %s (%d ranks, %d per node%s)  %s  float%s\n", t.name, g.name.c_str(), g.size,
               g.per_node, g.crosses_nodes ? ", across nodes" : "", t.in_place ? "in place" : "out of place",
               t.kind == Collective::all_reduce || t.kind == Collective::reduce_scatter ? " sum" : "");
  std::fprintf(out, "# %12s %12s %6s %10s %9s %9s %7s\n", "size", "count", "type", "time", "algbw", "busbw",
               "#wrong");
  std::fprintf(out, "# %12s %12s %6s %10s %9s %9s %7s\n", "(B)", "(elements)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

}  // namespace

nlohmann::json bench_collectives(BenchContext& ctx, std::span<GroupLayout> layouts, std::size_t min_bytes,
                                 std::size_t max_bytes, const std::vector<std::string>& only) {
  nlohmann::json rows = nlohmann::json::array();
  for (auto& g : layouts) {
    auto& comm = *g.comm;
    const int n = comm.size(), r = comm.rank();
    for (const CollectiveTest* t : collective_tests()) {
      if (!only.empty() && std::find(only.begin(), only.end(), std::string(t->name)) == only.end()) continue;
      const CollectiveCounts biggest = t->counts(max_bytes, n);
      auto send = ctx.backend.allocate(biggest.send, executor::MemCategory::comm_buckets);
      auto recv = ctx.backend.allocate(std::max<std::size_t>(1, biggest.recv), executor::MemCategory::comm_buckets);
      header(ctx.out, *t, g);
      for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        const CollectiveCounts c = t->counts(bytes, n);
        t->init(send.data(), recv.data(), c, r, n);
        const Timing time = time_op(ctx.world, ctx.protocol, [&] {
          t->run(comm, send.data(), recv.data(), c);
          ctx.backend.fence();
        });
        // Data check, outside the timed region.
        t->init(send.data(), recv.data(), c, r, n);
        t->run(comm, send.data(), recv.data(), c);
        ctx.backend.fence();
        const float* result = t->in_place ? send.data() : recv.data();
        const std::size_t result_n = t->in_place ? c.send : c.recv;
        double wrong = 0;
        for (std::size_t i = 0; i < result_n; ++i)
          if (result[i] != t->expected(i, c, r, n)) wrong += 1;
        ctx.world.all_reduce_doubles(&wrong, 1, executor::ReduceOp::sum);
        ctx.wrong += static_cast<std::int64_t>(wrong);

        const double s = static_cast<double>(c.size_elems) * sizeof(float);  // nccl-tests' S
        const double algbw = s / time.median_s / 1e9;
        const double busbw = algbw * bus_factor(t->kind, n);
        if (ctx.out != nullptr)
          std::fprintf(ctx.out, "  %12.0f %12zu %6s %10.1f %9.3f %9.3f %7.0f\n", s, c.size_elems, "float",
                       time.median_s * 1e6, algbw, busbw, wrong);
        rows.push_back({{"collective", t->name},
                        {"group", g.name},
                        {"ranks", n},
                        {"ranks_per_node", g.per_node},
                        {"crosses_nodes", g.crosses_nodes},
                        {"in_place", t->in_place},
                        {"bytes", s},
                        {"count", c.size_elems},
                        {"type", "float"},
                        {"time_s", time.median_s},
                        {"time_min_s", time.min_s},
                        {"time_max_s", time.max_s},
                        {"iters", time.iters},
                        {"repeats", time.repeats}, {"spread", time.spread},
                        {"algbw_gbps", algbw},
                        {"busbw_gbps", busbw},
                        {"wrong", wrong}});
      }
    }
  }
  return rows;
}

}  // namespace ztune::calibration
