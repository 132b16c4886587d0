// Executor benchmark (not a test): ztune's threaded GEMM against Eigen's own
// product on the tiny and a GPT-2-small-shaped model's GEMM shapes, then the
// CPU attention kernels, standard (T×T probabilities kept) against flash
// (log-sum-exp kept, probabilities recomputed in backward). Protocol
// (STYLE.md #2): check first, warm up, then time back-to-back repetitions.
// Training tokens/s come from ztune-worker's run record (docs/benchmarks.md).
//   bench_executor [threads]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "ztune/kernels/attention.hpp"
#include "ztune/kernels/gemm.hpp"
#include "ztune/kernels/thread_pool.hpp"

using namespace ztune::kernels;

namespace {
double seconds_of(int reps, const auto& f) {
  f();  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}
// Forward + backward of one attention call at GPT-2-small's head size (64)
// and sequence 1024. The checked figure: flash's output equals standard's.
// FLOPs as the cost model counts the standard kernel (4·b·s²·c forward, twice
// that backward) for both, so the rates compare times.
int bench_attention(ThreadPool& pool, std::mt19937& gen) {
  const int b = 2, t = 1024, nh = 4, hd = 64, c = nh * hd;
  std::normal_distribution<float> dist;
  std::vector<float> qkv(static_cast<std::size_t>(b) * t * 3 * c), dout(static_cast<std::size_t>(b) * t * c);
  for (auto& x : qkv) x = dist(gen);
  for (auto& x : dout) x = dist(gen);
  std::vector<float> out_std(dout.size()), out_flash(dout.size()), dqkv(qkv.size());
  std::vector<float> att(static_cast<std::size_t>(b) * nh * t * t), lse(static_cast<std::size_t>(b) * nh * t);
  cpu::attention_forward(out_std.data(), att.data(), qkv.data(), b, t, c, nh, &pool);
  cpu::flash_attention_forward(out_flash.data(), lse.data(), qkv.data(), b, t, c, nh, &pool);
  int wrong = 0;
  for (std::size_t i = 0; i < out_std.size(); ++i)
    if (std::abs(out_std[i] - out_flash[i]) > 1e-5f * (1.0f + std::abs(out_std[i]))) ++wrong;
  const double flops = 3.0 * 4.0 * b * static_cast<double>(t) * t * c;
  const double standard = seconds_of(3, [&] {
    cpu::attention_forward(out_std.data(), att.data(), qkv.data(), b, t, c, nh, &pool);
    cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), b, t, c, nh, &pool);
  });
  const double flash = seconds_of(3, [&] {
    cpu::flash_attention_forward(out_flash.data(), lse.data(), qkv.data(), b, t, c, nh, &pool);
    cpu::flash_attention_backward(dqkv.data(), dout.data(), qkv.data(), out_flash.data(), lse.data(), b, t, c, nh,
                                  &pool);
  });
  std::printf("\n%-36s %12s %12s %14s  (b %d, s %d, %d heads of %d, fp32)\n", "attention forward + backward", "ms",
              "GFLOP/s", "state MiB", b, t, nh, hd);
  std::printf("%-36s %12.1f %12.2f %14.2f\n", "standard (probabilities kept)", standard * 1e3, flops / standard / 1e9,
              static_cast<double>(att.size()) * 4 / 1048576.0);
  std::printf("%-36s %12.1f %12.2f %14.2f\n", "flash (log-sum-exp kept)", flash * 1e3, flops / flash / 1e9,
              static_cast<double>(lse.size()) * 4 / 1048576.0);
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  ThreadPool pool(threads);
  struct Shape {
    const char* what;
    int m, n, k;
  };
  // Forward GEMMs of one micro-batch: rows = B·T, (in, out) of c_attn, c_fc, c_proj.
  const Shape shapes[] = {{"tiny c_attn   (256×64 · 64×192)", 256, 192, 64},
                          {"tiny c_fc     (256×64 · 64×256)", 256, 256, 64},
                          {"124M c_attn (1024×768 · 768×2304)", 1024, 2304, 768},
                          {"124M c_fc   (1024×768 · 768×3072)", 1024, 3072, 768},
                          {"124M c_proj(1024×3072 · 3072×768)", 1024, 768, 3072}};
  std::printf("%-36s %12s %12s %8s  (threads %d, GFLOP/s, fp32)\n", "shape", "ztune", "eigen", "ratio", threads);
  std::mt19937 gen(1);
  std::normal_distribution<float> dist;
  int wrong = 0;
  for (const auto& s : shapes) {
    std::vector<float> a(static_cast<std::size_t>(s.m) * s.k), b(static_cast<std::size_t>(s.k) * s.n);
    std::vector<float> c1(static_cast<std::size_t>(s.m) * s.n), c2(c1.size());
    for (auto& x : a) x = dist(gen);
    for (auto& x : b) x = dist(gen);
    const GemmShape g{false, false, s.m, s.n, s.k, s.k, s.n, s.n};
    cpu::gemm(g, 1.0f, a.data(), b.data(), 0.0f, c1.data(), &pool);
    cpu::gemm_eigen_reference(s.m, s.n, s.k, a.data(), b.data(), c2.data());
    for (std::size_t i = 0; i < c1.size(); ++i)
      if (std::abs(c1[i] - c2[i]) > 1e-3f * (1.0f + std::abs(c2[i]))) ++wrong;
    const double flops = 2.0 * s.m * s.n * s.k;
    const int reps = flops > 1e9 ? 5 : 200;
    const double t1 = seconds_of(reps, [&] { cpu::gemm(g, 1.0f, a.data(), b.data(), 0.0f, c1.data(), &pool); });
    const double t2 = seconds_of(reps, [&] { cpu::gemm_eigen_reference(s.m, s.n, s.k, a.data(), b.data(), c2.data()); });
    std::printf("%-36s %12.2f %12.2f %7.0f%%\n", s.what, flops / t1 / 1e9, flops / t2 / 1e9, 100.0 * t2 / t1);
  }
  wrong += bench_attention(pool, gen);
  std::printf("#wrong %d\n", wrong);
  return wrong == 0 ? 0 : 1;
}
