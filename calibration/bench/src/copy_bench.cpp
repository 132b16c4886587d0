// Host↔device copies: Backend::from_host (h2d) and to_host (d2h) between a
// device buffer and a host_staging buffer (pinned host memory on CUDA: the
// offload path's PCIe copies; on the CPU backend a memcpy between two host
// buffers). Bytes = the payload, one direction, as PCIe bandwidth is quoted.
#include <vector>

#include "ztune/calibration/benches.hpp"

namespace ztune::calibration {

nlohmann::json bench_copies(BenchContext& ctx, std::size_t max_bytes) {
  nlohmann::json rows = nlohmann::json::array();
  if (ctx.out != nullptr) {
    std::fprintf(ctx.out, "\n# host<->device copies (%s backend%s), per rank, all ranks at once; bytes = payload\n",
                 ctx.backend.name().c_str(), ctx.backend.name() == "cpu" ? ": memcpy between host buffers" : "");
    std::fprintf(ctx.out, "# %-5s %12s %10s %9s %7s\n", "dir", "bytes", "time", "GB/s", "#wrong");
    std::fprintf(ctx.out, "# %-5s %12s %10s %9s %7s\n", "", "(B)", "(us)", "", "");
  }
  const std::size_t max_elems = std::max<std::size_t>(16384, max_bytes / sizeof(float));
  auto device = ctx.backend.allocate(max_elems, executor::MemCategory::workspace);
  auto host = ctx.backend.allocate(max_elems, executor::MemCategory::host_staging);
  std::vector<float> check(max_elems);
  for (const char* dir : {"h2d", "d2h"}) {
    const bool h2d = std::string(dir) == "h2d";
    for (std::size_t n = 16384; n <= max_elems; n *= 4) {
      for (std::size_t i = 0; i < n; ++i) host.data()[i] = static_cast<float>(i % 11);
      if (!h2d) ctx.backend.from_host(device.data(), host.data(), n);
      auto call = [&] {
        if (h2d) ctx.backend.from_host(device.data(), host.data(), n);
        else ctx.backend.to_host(host.data(), device.data(), n);
        ctx.backend.fence();
      };
      const Timing t = time_op(ctx.world, ctx.protocol, call);
      // Data check: poison the destination, copy once, read it back.
      if (h2d) {
        ctx.backend.zero(device.data(), n);
        call();
        ctx.backend.to_host(check.data(), device.data(), n);
      } else {
        std::fill(host.data(), host.data() + n, -1.0f);
        call();
        std::copy(host.data(), host.data() + n, check.begin());
      }
      double wrong = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (check[i] != static_cast<float>(i % 11)) wrong += 1;
      ctx.world.all_reduce_doubles(&wrong, 1, executor::ReduceOp::sum);
      ctx.wrong += static_cast<std::int64_t>(wrong);
      const double bytes = static_cast<double>(n) * sizeof(float);
      if (ctx.out != nullptr)
        std::fprintf(ctx.out, "  %-5s %12.0f %10.1f %9.3f %7.0f\n", dir, bytes, t.median_s * 1e6,
                     bytes / t.median_s / 1e9, wrong);
      rows.push_back({{"direction", dir}, {"bytes", bytes}, {"time_s", t.median_s}, {"time_min_s", t.min_s},
                      {"time_max_s", t.max_s}, {"iters", t.iters}, {"repeats", t.repeats}, {"spread", t.spread},
                      {"gbps", bytes / t.median_s / 1e9}, {"wrong", wrong}});
    }
  }
  return rows;
}

}  // namespace ztune::calibration
