// The attention core through Backend::attention_forward (QKᵀ, causal softmax,
// PV). FLOPs are counted as the cost model counts them (op_costs.cpp: two
// batched GEMMs over the full s×s square, 4·b·s²·c), so the fitted attention
// factor is relative to the same count. Data check in closed form: with Q = K = 0
// every causal score is equal, so out[t] is the mean of V[0..t]; with V[j] = j
// that is t/2.
#include <cmath>
#include <vector>

#include "ztune/calibration/benches.hpp"

namespace ztune::calibration {

nlohmann::json bench_attention(BenchContext& ctx) {
  struct Shape {
    int b, t, c, nh;
  };
  const Shape shapes[] = {{4, 64, 64, 4},   {8, 64, 64, 4},   {2, 128, 64, 4},  {4, 128, 128, 4},
                          {2, 256, 128, 4}, {1, 256, 256, 8}, {2, 512, 256, 8}, {1, 512, 512, 8}};
  nlohmann::json rows = nlohmann::json::array();
  if (ctx.out != nullptr) {
    std::fprintf(ctx.out, "\n# attention  causal softmax(QKᵀ/√d)·V, fp32, flops = 4·b·s²·c (full square, as the cost model counts)\n");
    std::fprintf(ctx.out, "# %4s %6s %6s %4s %12s %10s %9s %7s\n", "b", "s", "c", "nh", "flops", "time", "GFLOP/s",
                 "#wrong");
    std::fprintf(ctx.out, "# %4s %6s %6s %4s %12s %10s %9s %7s\n", "", "", "", "", "", "(us)", "", "");
  }
  for (const Shape& s : shapes) {
    const auto b = static_cast<std::size_t>(s.b), t = static_cast<std::size_t>(s.t),
               c = static_cast<std::size_t>(s.c);
    auto qkv = ctx.backend.allocate(b * t * 3 * c, executor::MemCategory::activations);
    auto out = ctx.backend.allocate(b * t * c, executor::MemCategory::activations);
    auto att = ctx.backend.allocate(executor::Backend::attention_state_elems(s.b, s.t, s.nh, false),
                                    executor::MemCategory::activations);
    std::vector<float> h(b * t * 3 * c);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
    ctx.backend.from_host(qkv.data(), h.data(), h.size());
    const Timing tm = time_op(ctx.world, ctx.protocol, [&] {
      ctx.backend.attention_forward(out.data(), att.data(), qkv.data(), s.b, s.t, s.c, s.nh, false);
      ctx.backend.fence();
    });
    // Data check: Q = K = 0, V[b, j, :] = j.
    for (std::size_t bi = 0; bi < b; ++bi)
      for (std::size_t j = 0; j < t; ++j)
        for (std::size_t ch = 0; ch < 3 * c; ++ch)
          h[(bi * t + j) * 3 * c + ch] = ch < 2 * c ? 0.0f : static_cast<float>(j);
    ctx.backend.from_host(qkv.data(), h.data(), h.size());
    ctx.backend.attention_forward(out.data(), att.data(), qkv.data(), s.b, s.t, s.c, s.nh, false);
    std::vector<float> ho(b * t * c);
    ctx.backend.to_host(ho.data(), out.data(), ho.size());
    double wrong = 0;
    for (std::size_t i = 0; i < ho.size(); ++i) {
      const double ref = static_cast<double>((i / c) % t) / 2.0;
      if (std::abs(ho[i] - ref) > 1e-4 + 1e-5 * ref) wrong += 1;
    }
    ctx.world.all_reduce_doubles(&wrong, 1, executor::ReduceOp::sum);
    ctx.wrong += static_cast<std::int64_t>(wrong);
    const double flops = 4.0 * static_cast<double>(b) * static_cast<double>(t) * static_cast<double>(t) *
                         static_cast<double>(c);
    if (ctx.out != nullptr)
      std::fprintf(ctx.out, "  %4d %6d %6d %4d %12.4g %10.1f %9.2f %7.0f\n", s.b, s.t, s.c, s.nh, flops,
                   tm.median_s * 1e6, flops / tm.median_s / 1e9, wrong);
    rows.push_back({{"b", s.b}, {"s", s.t}, {"c", s.c}, {"heads", s.nh}, {"flops", flops},
                    {"time_s", tm.median_s}, {"time_min_s", tm.min_s}, {"time_max_s", tm.max_s},
                    {"iters", tm.iters}, {"repeats", tm.repeats}, {"spread", tm.spread}, {"gflops", flops / tm.median_s / 1e9},
                    {"wrong", wrong}});
  }
  return rows;
}

}  // namespace ztune::calibration
