// CudaBackend against CpuBackend: the same training code (a one-block transformer:
// embedding, layernorm, attention, projection, residual, LM head, cross-entropy,
// backward, AdamW) runs on both through the Backend interface for three steps.
// The CPU backend is the oracle (itself checked against finite differences and an
// independent NumPy GPT-2 elsewhere). fp32 GEMMs must agree to fp32 reordering
// error; bf16 GEMMs (fp32 storage) within bf16 tolerance.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpu_support.hpp"
#include "ztune/executor/cpu_backend.hpp"
#include "ztune/executor/cuda/cuda_backend.hpp"
#include "ztune/kernels/layernorm.hpp"

using namespace ztune::executor;
using ztune::test::mismatches;
using ztune::test::uniform;

namespace {

constexpr int kB = 2, kT = 16, kC = 64, kNH = 2, kV = 101, kN = kB * kT;

struct StepResult {
  std::vector<float> losses;                       // mean loss per step
  std::map<std::string, std::vector<float>> params;  // after the last step
  double grad_sq = 0;                              // Σ g² of the last step
};

std::vector<float> read(Backend& be, const Buffer& b) {
  std::vector<float> h(b.size());
  be.to_host(h.data(), b.data(), b.size());
  return h;
}

// A one-block transformer trained for `steps` AdamW steps; every op goes through `be`.
StepResult train(Backend& be, int steps) {
  struct Param {
    std::string name;
    Buffer w, g, m, v;
  };
  std::vector<Param> params;
  auto param = [&](const std::string& name, std::size_t n, float lo, float hi, std::uint32_t seed) -> Param& {
    Param p{name, be.allocate(n, MemCategory::params), be.allocate(n, MemCategory::grads),
            be.allocate(n, MemCategory::optimizer), be.allocate(n, MemCategory::optimizer)};
    auto init = uniform(n, seed, lo, hi);
    be.from_host(p.w.data(), init.data(), n);
    params.push_back(std::move(p));
    return params.back();
  };
  params.reserve(8);
  float* wte = param("wte", kV * kC, -0.5f, 0.5f, 1).w.data();
  float* g1 = param("ln1.weight", kC, 0.8f, 1.2f, 2).w.data();
  float* b1 = param("ln1.bias", kC, -0.1f, 0.1f, 3).w.data();
  float* wqkv = param("c_attn.weight", kC * 3 * kC, -0.15f, 0.15f, 4).w.data();
  float* bqkv = param("c_attn.bias", 3 * kC, -0.1f, 0.1f, 5).w.data();
  float* wo = param("c_proj.weight", kC * kC, -0.15f, 0.15f, 6).w.data();
  float* bo = param("c_proj.bias", kC, -0.1f, 0.1f, 7).w.data();
  float* wh = param("lm_head.weight", kC * kV, -0.15f, 0.15f, 8).w.data();
  auto grad = [&](int i) { return params[static_cast<std::size_t>(i)].g.data(); };

  std::vector<std::int32_t> ids(kN), targets(kN);
  for (int i = 0; i < kN; ++i) {
    ids[i] = (i * 31 + 7) % kV;
    targets[i] = (i * 17 + 3) % kV;
  }
  auto act = [&](std::size_t n) { return be.allocate(n, MemCategory::activations); };
  Buffer x = act(kN * kC), ln1 = act(kN * kC), mean1 = act(kN), rstd1 = act(kN), qkv = act(kN * 3 * kC),
         att = act(static_cast<std::size_t>(kB) * kNH * kT * kT), ao = act(kN * kC), proj = act(kN * kC),
         x2 = act(kN * kC), logits = act(kN * kV), rmax = act(kN), rsum = act(kN), tl = act(kN), loss = act(kN),
         dloss = act(kN), dlogits = act(kN * kV), dx2 = act(kN * kC), dao = act(kN * kC), dqkv = act(kN * 3 * kC),
         dln1 = act(kN * kC), dx = act(kN * kC);
  std::vector<float> ones(kN, 1.0f / kN);
  be.from_host(dloss.data(), ones.data(), kN);

  StepResult r;
  for (int step = 1; step <= steps; ++step) {
    // Forward.
    be.embedding_forward(x.data(), ids.data(), wte, kN, kC, 0, kV);
    be.layernorm_forward(ln1.data(), mean1.data(), rstd1.data(), x.data(), g1, b1, kN, kC,
                         ztune::kernels::cpu::kLayerNormEps);
    be.matmul_forward(qkv.data(), ln1.data(), wqkv, bqkv, kN, kC, 3 * kC);
    be.attention_forward(ao.data(), att.data(), qkv.data(), kB, kT, kC, kNH, false);
    be.matmul_forward(proj.data(), ao.data(), wo, bo, kN, kC, kC);
    be.add(x2.data(), x.data(), proj.data(), kN * kC);
    be.matmul_forward(logits.data(), x2.data(), wh, nullptr, kN, kC, kV);
    be.ce_row_max(rmax.data(), logits.data(), kN, kV);
    be.ce_row_sumexp(rsum.data(), logits.data(), rmax.data(), kN, kV);
    be.ce_target_logit(tl.data(), logits.data(), targets.data(), kN, kV, 0);
    be.ce_loss(loss.data(), rmax.data(), rsum.data(), tl.data(), kN);
    double mean = 0;
    for (float l : read(be, loss)) mean += l / kN;
    r.losses.push_back(static_cast<float>(mean));
    // Backward (gradients accumulate: zero them first).
    for (auto& p : params) be.zero(p.g.data(), p.g.size());
    for (Buffer* b : {&dlogits, &dx2, &dao, &dqkv, &dln1, &dx}) be.zero(b->data(), b->size());
    be.ce_backward(dlogits.data(), logits.data(), rmax.data(), rsum.data(), targets.data(), dloss.data(), kN, kV, 0);
    be.matmul_backward(dx2.data(), grad(7), nullptr, dlogits.data(), x2.data(), wh, kN, kC, kV);
    be.matmul_backward(dao.data(), grad(5), grad(6), dx2.data(), ao.data(), wo, kN, kC, kC);
    be.attention_backward(dqkv.data(), dao.data(), qkv.data(), ao.data(), att.data(), kB, kT, kC, kNH, false);
    be.matmul_backward(dln1.data(), grad(3), grad(4), dqkv.data(), ln1.data(), wqkv, kN, kC, 3 * kC);
    be.layernorm_backward(dx.data(), grad(1), grad(2), dln1.data(), x.data(), g1, mean1.data(), rstd1.data(), kN,
                          kC);
    be.accumulate(dx.data(), dx2.data(), kN * kC);
    be.embedding_backward(grad(0), dx.data(), ids.data(), kN, kC, 0, kV);
    r.grad_sq = 0;
    for (auto& p : params) r.grad_sq += be.sum_squares(p.g.data(), static_cast<long>(p.g.size()));
    const ztune::kernels::AdamWParams h{1e-2f, 0.9f, 0.95f, 1e-8f, 0.01f, step};
    for (auto& p : params) be.adamw(p.w.data(), p.g.data(), p.m.data(), p.v.data(), static_cast<long>(p.w.size()), h);
  }
  for (auto& p : params) r.params[p.name] = read(be, p.w);
  return r;
}

}  // namespace

TEST_CASE("CUDA backend (fp32 GEMMs) trains a one-block transformer like the CPU backend", "[gpu][backend]") {
  CpuBackend cpu(2);
  cuda::CudaBackend gpu({0, cuda::GemmPrecision::fp32});
  const StepResult ref = train(cpu, 3), got = train(gpu, 3);
  // Reordered fp32 sums over ≤ 192 terms per output: relative ~1e-6; three Adam steps
  // with lr 1e-2 move parameters by ≤ 3e-2, so 1e-5 absolute on parameters.
  CHECK(mismatches("losses", got.losses, ref.losses, 0.0f, 1e-5f) == 0);
  CHECK(got.grad_sq == Approx(ref.grad_sq).epsilon(1e-4));
  for (const auto& [name, values] : ref.params)
    CHECK(mismatches(name, got.params.at(name), values, 1e-5f, 1e-4f) == 0);
  const auto stats = gpu.allocator_stats();
  CHECK(stats.cache_hits > 0);  // scratch buffers are reused across steps
  CHECK(gpu.memory().peak(MemCategory::activations) == cpu.memory().peak(MemCategory::activations));
}

TEST_CASE("CUDA backend with bf16 GEMMs follows the CPU losses within bf16 tolerance", "[gpu][backend]") {
  CpuBackend cpu(2);
  cuda::CudaBackend gpu({0, cuda::GemmPrecision::bf16});
  const StepResult ref = train(cpu, 3), got = train(gpu, 3);
  // bf16 operands (8-bit mantissa) in every GEMM: logits off by ~2^-8 relative,
  // a loss near ln(101) ≈ 4.6 off by a few 1e-2 at most.
  CHECK(mismatches("losses (bf16 GEMMs)", got.losses, ref.losses, 0.0f, 1e-2f) == 0);
}

TEST_CASE("CUDA backend loss-scale helper flags overflow and unscales", "[gpu][backend]") {
  cuda::CudaBackend gpu;
  Buffer g = gpu.allocate(1000, MemCategory::grads);
  std::vector<float> h(1000, 8.0f);
  gpu.from_host(g.data(), h.data(), h.size());
  CHECK_FALSE(gpu.unscale_and_check(g.data(), g.size(), 0.25f));
  CHECK(read(gpu, g)[999] == 2.0f);
  h[500] = INFINITY;
  gpu.from_host(g.data(), h.data(), h.size());
  CHECK(gpu.unscale_and_check(g.data(), g.size(), 0.25f));
}
