// Memory-bound kernels through the Backend: the bytes each moves per element
// (read + write, fp32) are the minimum traffic, as nccl-tests counts bytes and
// the cost model's memory_bound_time() expects. Every check is closed form.
#include <cmath>
#include <functional>
#include <vector>

#include "ztune/calibration/benches.hpp"
#include "ztune/kernels/layernorm.hpp"

namespace ztune::calibration {

namespace {

constexpr int kNormWidth = 256;  // LayerNorm row width (rows = n / width)

struct Kernel {
  const char* name;
  double bytes_per_elem;  // minimum traffic per element, fp32
  int kernels;            // kernel launches per call
};

double gelu_ref(double x) {
  // GPT-2's tanh approximation (Hendrycks & Gimpel 2016, eq. in §2).
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

}  // namespace

nlohmann::json bench_memory_bound(BenchContext& ctx, std::size_t max_bytes) {
  const Kernel kernels[] = {{"copy", 8, 1},      {"add", 12, 1},       {"scale", 8, 1},
                            {"gelu_forward", 8, 1}, {"layernorm_forward", 8, 1}, {"adamw", 28, 1}};
  nlohmann::json rows = nlohmann::json::array();
  if (ctx.out != nullptr) {
    std::fprintf(ctx.out, "\n# memory-bound kernels, fp32, per rank, all ranks at once; bytes = minimum read + write traffic\n");
    std::fprintf(ctx.out, "# %-18s %12s %12s %10s %9s %7s\n", "kernel", "elements", "bytes", "time", "GB/s", "#wrong");
    std::fprintf(ctx.out, "# %-18s %12s %12s %10s %9s %7s\n", "", "", "(B)", "(us)", "", "");
  }
  const std::size_t max_elems = std::max<std::size_t>(16384, max_bytes / sizeof(float));
  auto x = ctx.backend.allocate(max_elems, executor::MemCategory::workspace);
  auto y = ctx.backend.allocate(max_elems, executor::MemCategory::workspace);
  auto z = ctx.backend.allocate(max_elems, executor::MemCategory::workspace);
  auto w = ctx.backend.allocate(max_elems, executor::MemCategory::workspace);
  auto stats = ctx.backend.allocate(2 * (max_elems / kNormWidth + 1), executor::MemCategory::workspace);
  std::vector<float> host(max_elems);
  for (const Kernel& kn : kernels) {
    for (std::size_t n = 16384; n <= max_elems; n *= 4) {
      const std::string name = kn.name;
      const auto ln = static_cast<long>(n);
      const int rows_n = static_cast<int>(n / kNormWidth);
      kernels::AdamWParams h;
      h.lr = 1e-3f;
      h.weight_decay = 0.0f;
      h.step = 1;
      // Inputs for timing and for the check (re-initialised after timing).
      auto init = [&] {
        for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 7);
        if (name == "gelu_forward") for (std::size_t i = 0; i < n; ++i) host[i] = 0.5f * (static_cast<float>(i % 9) - 4.0f);
        if (name == "layernorm_forward") for (std::size_t i = 0; i < n; ++i) host[i] = i % 2 == 0 ? 1.0f : -1.0f;
        if (name == "adamw") std::fill(host.begin(), host.begin() + static_cast<long>(n), 1.0f);
        ctx.backend.from_host(x.data(), host.data(), n);
        for (std::size_t i = 0; i < n; ++i) host[i] = name == "adamw" ? 0.5f : 1.0f;
        ctx.backend.from_host(y.data(), host.data(), n);  // b of add, LayerNorm weight, AdamW grad
        ctx.backend.zero(z.data(), n);                    // out, LayerNorm bias, AdamW m
        ctx.backend.zero(w.data(), n);                    // AdamW v
      };
      auto call = [&] {
        if (name == "copy") ctx.backend.copy(z.data(), x.data(), n);
        else if (name == "add") ctx.backend.add(z.data(), x.data(), y.data(), ln);
        else if (name == "scale") ctx.backend.scale(x.data(), 2.0f, ln);
        else if (name == "gelu_forward") ctx.backend.gelu_forward(z.data(), x.data(), ln);
        else if (name == "layernorm_forward")
          ctx.backend.layernorm_forward(w.data(), stats.data(), stats.data() + rows_n, x.data(), y.data(), z.data(),
                                        rows_n, kNormWidth, kernels::cpu::kLayerNormEps);
        else ctx.backend.adamw(x.data(), y.data(), z.data(), w.data(), ln, h);
      };
      init();
      const Timing t = time_op(ctx.world, ctx.protocol, [&] {
        call();
        ctx.backend.fence();
      });
      init();
      call();
      const float* result = name == "copy" || name == "add" || name == "gelu_forward" ? z.data()
                            : name == "layernorm_forward"                              ? w.data()
                                                                                       : x.data();
      ctx.backend.to_host(host.data(), result, n);
      double wrong = 0;
      for (std::size_t i = 0; i < n; ++i) {
        double ref = 0, tol = 0;
        const double v = static_cast<double>(i % 7);
        if (name == "copy") ref = v;
        else if (name == "add") ref = v + 1.0;
        else if (name == "scale") ref = 2.0 * v;
        else if (name == "gelu_forward") ref = gelu_ref(0.5 * (static_cast<double>(i % 9) - 4.0)), tol = 1e-5;
        else if (name == "layernorm_forward")
          ref = (i % 2 == 0 ? 1.0 : -1.0) / std::sqrt(1.0 + kernels::cpu::kLayerNormEps), tol = 1e-4;
        else ref = 1.0 - 1e-3, tol = 1e-6;  // AdamW step 1: m̂/√v̂ = 1, p ← p − lr
        if (std::abs(host[i] - ref) > tol) wrong += 1;
      }
      ctx.world.all_reduce_doubles(&wrong, 1, executor::ReduceOp::sum);
      ctx.wrong += static_cast<std::int64_t>(wrong);
      const double bytes = kn.bytes_per_elem * static_cast<double>(n);
      if (ctx.out != nullptr)
        std::fprintf(ctx.out, "  %-18s %12zu %12.0f %10.1f %9.3f %7.0f\n", kn.name, n, bytes, t.median_s * 1e6,
                     bytes / t.median_s / 1e9, wrong);
      rows.push_back({{"kernel", kn.name}, {"elements", n}, {"bytes", bytes}, {"kernels", kn.kernels},
                      {"time_s", t.median_s}, {"time_min_s", t.min_s}, {"time_max_s", t.max_s},
                      {"iters", t.iters}, {"repeats", t.repeats}, {"spread", t.spread}, {"gbps", bytes / t.median_s / 1e9},
                      {"wrong", wrong}});
    }
  }
  return rows;
}

}  // namespace ztune::calibration
