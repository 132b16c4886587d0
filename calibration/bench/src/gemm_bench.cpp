// GEMM shape sweep through Backend::gemm (Eigen on the CPU backend, cuBLASLt on
// CUDA). Shapes: squares doubling, plus the transformer's own (tokens × h·{1,3,4}
// × h and their dgrad/wgrad transposes) so the efficiency table is fitted where
// the plans run. The data check uses small integers, so the reference dot
// products are exact (|values| ≤ 2, k ≤ 4096: sums far below 2^24).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ztune/calibration/benches.hpp"

namespace ztune::calibration {

namespace {

struct Shape {
  int m, n, k;
  bool ta, tb;
};

std::vector<Shape> shapes(int max_dim) {
  std::vector<Shape> s;
  for (int d = 32; d <= max_dim; d *= 2) s.push_back({d, d, d, false, false});
  // Transformer-shaped: tokens × out × in for hidden h (QKV 3h, FC1 4h, FC2 in 4h),
  // forward (NN as the executor's matmul stores weights [in, out]), dgrad (NT) and wgrad (TN).
  for (int h : {64, 256}) {
    for (int tokens : {128, 1024}) {
      if (static_cast<long>(tokens) * 4 * h > static_cast<long>(max_dim) * max_dim) continue;
      s.push_back({tokens, 3 * h, h, false, false});
      s.push_back({tokens, 4 * h, h, false, false});
      s.push_back({tokens, h, 4 * h, false, false});
      s.push_back({tokens, h, 3 * h, false, true});   // dgrad of QKV: dX = dY·Wᵀ
      s.push_back({h, 3 * h, tokens, true, false});   // wgrad of QKV: dW = Xᵀ·dY
    }
  }
  return s;
}

float small_int(std::size_t i, int salt) { return static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(salt)) % 5) - 2); }

}  // namespace

nlohmann::json bench_gemm(BenchContext& ctx, int max_dim) {
  nlohmann::json rows = nlohmann::json::array();
  if (ctx.out != nullptr) {
    std::fprintf(ctx.out, "\n# gemm  C[m,n] = op(A)[m,k]·op(B)[k,n], fp32, per rank, all ranks at once\n");
    std::fprintf(ctx.out, "# %6s %6s %6s %3s %12s %10s %9s %7s\n", "m", "n", "k", "op", "flops", "time", "GFLOP/s",
                 "#wrong");
    std::fprintf(ctx.out, "# %6s %6s %6s %3s %12s %10s %9s %7s\n", "", "", "", "", "", "(us)", "", "");
  }
  for (const Shape& sh : shapes(max_dim)) {
    const auto m = static_cast<std::size_t>(sh.m), n = static_cast<std::size_t>(sh.n),
               k = static_cast<std::size_t>(sh.k);
    auto a = ctx.backend.allocate(m * k, executor::MemCategory::workspace);
    auto b = ctx.backend.allocate(k * n, executor::MemCategory::workspace);
    auto c = ctx.backend.allocate(m * n, executor::MemCategory::workspace);
    std::vector<float> ha(m * k), hb(k * n), hc(m * n);
    for (std::size_t i = 0; i < ha.size(); ++i) ha[i] = small_int(i, 3);
    for (std::size_t i = 0; i < hb.size(); ++i) hb[i] = small_int(i, 1);
    ctx.backend.from_host(a.data(), ha.data(), ha.size());
    ctx.backend.from_host(b.data(), hb.data(), hb.size());
    kernels::GemmShape g{sh.ta, sh.tb, sh.m, sh.n, sh.k, sh.ta ? sh.m : sh.k, sh.tb ? sh.k : sh.n, sh.n};
    const Timing t = time_op(ctx.world, ctx.protocol, [&] {
      ctx.backend.gemm(g, 1.0f, a.data(), b.data(), 0.0f, c.data());
      ctx.backend.fence();
    });
    // Data check: 64 sampled entries against exact dot products.
    ctx.backend.gemm(g, 1.0f, a.data(), b.data(), 0.0f, c.data());
    ctx.backend.to_host(hc.data(), c.data(), hc.size());
    double wrong = 0;
    for (std::size_t s = 0; s < 64; ++s) {
      const std::size_t i = (s * 2654435761u) % m, j = (s * 40503u + 17) % n;
      double ref = 0;
      for (std::size_t l = 0; l < k; ++l) {
        const double av = sh.ta ? ha[l * m + i] : ha[i * k + l];
        const double bv = sh.tb ? hb[j * k + l] : hb[l * n + j];
        ref += av * bv;
      }
      if (hc[i * n + j] != static_cast<float>(ref)) wrong += 1;
    }
    ctx.world.all_reduce_doubles(&wrong, 1, executor::ReduceOp::sum);
    ctx.wrong += static_cast<std::int64_t>(wrong);
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const char* op = sh.ta ? "TN" : sh.tb ? "NT" : "NN";
    if (ctx.out != nullptr)
      std::fprintf(ctx.out, "  %6d %6d %6d %3s %12.4g %10.1f %9.2f %7.0f\n", sh.m, sh.n, sh.k, op, flops,
                   t.median_s * 1e6, flops / t.median_s / 1e9, wrong);
    rows.push_back({{"m", sh.m}, {"n", sh.n}, {"k", sh.k}, {"op", op}, {"flops", flops},
                    {"time_s", t.median_s}, {"time_min_s", t.min_s}, {"time_max_s", t.max_s},
                    {"iters", t.iters}, {"repeats", t.repeats}, {"spread", t.spread}, {"gflops", flops / t.median_s / 1e9},
                    {"wrong", wrong}});
  }
  return rows;
}

}  // namespace ztune::calibration
