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

#include "../executor/backend_buffers.hpp"
#include "backend_support.hpp"
#include "gpu_support.hpp"
#include "ztune/executor/cpu_backend.hpp"
#include "ztune/executor/cuda/cuda_backend.hpp"
#include "ztune/kernels/layernorm.hpp"

using namespace ztune::executor;
using ztune::executor::test::gemms_in;
using ztune::executor::test::storage_of;
using ztune::executor::test::download;
using ztune::executor::test::upload;
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

// 16-bit storage (issue 24): CudaBackend's native GEMMs and flash attention on
// bf16/fp16 buffers against the CPU backend's staged path on the same stored
// values (convert to fp32, the fp32 kernel, round back), which
// tests/executor/test_storage.cpp checks against the definition. Products of
// 16-bit values are exact in fp32 on both; the sums differ in order, and a
// result near a rounding boundary may round to the neighbouring 16-bit value:
// one unit in the last place (eps_of) relative, plus a small absolute floor.

TEMPLATE_TEST_CASE("CUDA backend's 16-bit GEMMs on stored values agree with the CPU's staged path", "[gpu][backend][mixed]",
                   __nv_bfloat16, __half) {
  using H = TestType;
  const StorageDtype d = storage_of<H>();
  const float ulp = ztune::test::eps_of<H>();
  const int n = 48, c = 64, oc = 96;
  const auto x = uniform(n * c, 21), w = uniform(oc * c, 22, -0.2f, 0.2f), bias = uniform(oc, 23, -0.1f, 0.1f);
  const auto dout = uniform(n * oc, 24), dw0 = uniform(oc * c, 25, -0.01f, 0.01f), dx0 = uniform(n * c, 26, -0.01f, 0.01f);
  CpuBackend cpu(2);
  cuda::CudaBackend gpu(gemms_in(d));
  std::map<std::string, std::vector<float>> got, ref;
  for (Backend* be : {static_cast<Backend*>(&cpu), static_cast<Backend*>(&gpu)}) {
    auto& out = be == &cpu ? ref : got;
    const MemCategory act = MemCategory::activations;
    Buffer X = upload(*be, x, d, act), W = upload(*be, w, d, MemCategory::params), B = upload(*be, bias, d, act);
    Buffer D = upload(*be, dout, d, act), DX = upload(*be, dx0, d, act);
    Buffer DW16 = upload(*be, dw0, d, MemCategory::grads);
    Buffer DW32 = be->allocate(dw0.size(), MemCategory::grads);
    be->from_host(DW32.data(), dw0.data(), dw0.size());
    Buffer Y = be->allocate(static_cast<std::size_t>(n * oc), MemCategory::activations, d);
    be->matmul_forward(Y.ref(), X.ref(), W.ref(), B.ref(), n, c, oc);
    // Backward into a 16-bit weight gradient, then into an fp32 one (fp32 gradients beside 16-bit parameters).
    be->matmul_backward(DX.ref(), DW16.ref(), nullptr, D.ref(), X.ref(), W.ref(), n, c, oc);
    be->matmul_backward(nullptr, DW32.data(), nullptr, D.ref(), X.ref(), W.ref(), n, c, oc);
    out["y"] = download(*be, Y);
    out["dx"] = download(*be, DX);
    out["dw16"] = download(*be, DW16);
    be->fence();
    out["dw32"].resize(dw0.size());
    be->to_host(out["dw32"].data(), DW32.data(), dw0.size());
  }
  CHECK(mismatches("y", got["y"], ref["y"], 1e-3f, ulp) == 0);
  CHECK(mismatches("dx", got["dx"], ref["dx"], 1e-3f, ulp) == 0);
  CHECK(mismatches("dw (16-bit)", got["dw16"], ref["dw16"], 1e-3f, ulp) == 0);
  CHECK(mismatches("dw (fp32)", got["dw32"], ref["dw32"], 1e-4f, 1e-5f) == 0);
  // The native path stages nothing: no workspace beyond the uploads' fp32 copies, freed.
  CHECK(gpu.memory().current(MemCategory::workspace) == 0);
}

TEMPLATE_TEST_CASE("CUDA backend's 16-bit flash attention agrees with the CPU's staged flash kernel",
                   "[gpu][backend][mixed]", __nv_bfloat16, __half) {
  using H = TestType;
  const StorageDtype d = storage_of<H>();
  const float ulp = ztune::test::eps_of<H>();
  const int b = 2, t = 77, nh = 2, c = nh * 64;  // head size 64, a sequence no tile divides
  const auto qkv = uniform(static_cast<std::size_t>(b) * t * 3 * c, 31);
  const auto dout = uniform(static_cast<std::size_t>(b) * t * c, 32);
  const std::size_t lse_n = Backend::attention_state_elems(b, t, nh, true);
  CpuBackend cpu(2);
  cuda::CudaBackend gpu(gemms_in(d));
  std::map<std::string, std::vector<float>> got, ref;
  for (Backend* be : {static_cast<Backend*>(&cpu), static_cast<Backend*>(&gpu)}) {
    auto& out = be == &cpu ? ref : got;
    Buffer QKV = upload(*be, qkv, d, MemCategory::activations), D = upload(*be, dout, d, MemCategory::activations);
    Buffer O = be->allocate(static_cast<std::size_t>(b) * t * c, MemCategory::activations, d);
    Buffer DQKV = be->allocate(qkv.size(), MemCategory::workspace, d);
    Buffer LSE = be->allocate(lse_n, MemCategory::activations);
    be->attention_forward(O.ref(), LSE.data(), QKV.ref(), b, t, c, nh, true);
    be->attention_backward(DQKV.ref(), D.ref(), QKV.ref(), O.ref(), LSE.data(), b, t, c, nh, true);
    out["out"] = download(*be, O);
    out["dqkv"] = download(*be, DQKV);
    be->fence();
    out["lse"].resize(lse_n);
    be->to_host(out["lse"].data(), LSE.data(), lse_n);
  }
  // cuDNN's kernels (or the flash kernels' 16-bit instances) keep P in 16 bits
  // between their two products where the CPU's fp32 kernel does not: a few ulp.
  CHECK(mismatches("out", got["out"], ref["out"], 2e-3f, 4 * ulp) == 0);
  CHECK(mismatches("lse", got["lse"], ref["lse"], 2e-3f, 4 * ulp) == 0);
  CHECK(mismatches("dqkv", got["dqkv"], ref["dqkv"], 5e-3f, 8 * ulp) == 0);
}
