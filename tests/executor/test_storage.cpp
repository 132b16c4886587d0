// 16-bit storage (issue 24 item 3): the conversions against IEEE 754's
// closed forms, and the Backend's 16-bit operands against the fp32 kernels run
// on the rounded values (the definition of "load 16 bits, compute in fp32,
// round the result").
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backend_buffers.hpp"
#include "ztune/executor/cpu_backend.hpp"
#include "ztune/kernels/adamw.hpp"
#include "ztune/kernels/matmul.hpp"

using namespace ztune::executor;

TEST_CASE("bf16 rounds fp32 to nearest even on the top 16 bits", "[storage]") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(float_to_bf16(-2.0f) == 0xc000);
  CHECK(float_to_bf16(0.0f) == 0x0000);
  CHECK(float_to_bf16(-0.0f) == 0x8000);
  // 1 + 2⁻⁸ lies halfway between 1 and 1 + 2⁻⁷: ties go to the even 1.0.
  CHECK(float_to_bf16(1.0f + 0x1p-8f) == 0x3f80);
  // 1 + 3·2⁻⁸ lies halfway between 1 + 2⁻⁷ (odd) and 1 + 2⁻⁶ (even): up.
  CHECK(float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
  CHECK(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);  // above half: up
  CHECK(bf16_to_float(0x3f81) == 1.0f + 0x1p-7f);
  CHECK(float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // The largest finite fp32 rounds past bf16's largest finite value: inf.
  CHECK(float_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);
}

TEST_CASE("fp16 rounds to nearest even with subnormals and overflow to inf", "[storage]") {
  CHECK(float_to_fp16(1.0f) == 0x3c00);
  CHECK(float_to_fp16(-2.0f) == 0xc000);
  CHECK(float_to_fp16(65504.0f) == 0x7bff);      // largest finite
  CHECK(float_to_fp16(65519.0f) == 0x7bff);      // below the halfway point to 65536
  CHECK(float_to_fp16(65520.0f) == 0x7c00);      // halfway, ties to even = inf
  CHECK(float_to_fp16(0x1p-14f) == 0x0400);      // smallest normal
  CHECK(float_to_fp16(0x1p-24f) == 0x0001);      // smallest subnormal
  CHECK(float_to_fp16(0x1p-25f) == 0x0000);      // halfway to it: even (zero)
  CHECK(float_to_fp16(0x1.8p-24f) == 0x0002);    // 1.5 units: even (2)
  CHECK(float_to_fp16(0x1p-14f - 0x1p-25f) == 0x0400);  // rounds up into the normals
  CHECK(float_to_fp16(1.0f + 0x1p-11f) == 0x3c00);      // halfway after 1: even
  CHECK(float_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02);  // halfway, odd below: up
  CHECK(fp16_to_float(0x0001) == 0x1p-24f);
  CHECK(fp16_to_float(0x03ff) == 1023 * 0x1p-24f);
  CHECK(fp16_to_float(0xfbff) == -65504.0f);
  CHECK(std::isinf(fp16_to_float(0x7c00)));
  CHECK(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  // Every fp16 value survives fp16 → fp32 → fp16.
  int wrong = 0;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;  // NaNs: payloads differ
    wrong += float_to_fp16(fp16_to_float(static_cast<std::uint16_t>(h))) != h;
  }
  CHECK(wrong == 0);
}

namespace {
std::vector<float> random(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}
std::vector<float> rounded(std::vector<float> v, StorageDtype d) {
  std::vector<std::uint16_t> h(v.size());
  convert_host(h.data(), d, v.data(), StorageDtype::fp32, v.size());
  convert_host(v.data(), StorageDtype::fp32, h.data(), d, v.size());
  return v;
}
using test::download;
using test::upload;
}  // namespace

TEST_CASE("16-bit operands compute in fp32 on the stored values and round the result", "[storage]") {
  const int n = 6, c = 16, oc = 12;
  const auto x = random(n * c, 1), w = random(oc * c, 2), bias = random(oc, 3), dout = random(n * oc, 4);
  const auto dw0 = random(oc * c, 5);
  for (StorageDtype d : {StorageDtype::bf16, StorageDtype::fp16}) {
    CpuBackend be(1);
    Buffer X = upload(be, x, d, MemCategory::activations), W = upload(be, w, d, MemCategory::params);
    Buffer Bi = upload(be, bias, d, MemCategory::params), D = upload(be, dout, d, MemCategory::comm_buckets);
    Buffer DW = upload(be, dw0, d, MemCategory::grads);
    Buffer Y = be.allocate(static_cast<std::size_t>(n * oc), MemCategory::activations, d);
    be.matmul_forward(Y.ref(), X.ref(), W.ref(), Bi.ref(), n, c, oc);
    // The oracle: the fp32 kernel on the rounded operands, its output rounded.
    const auto xr = rounded(x, d), wr = rounded(w, d), br = rounded(bias, d), dr = rounded(dout, d);
    std::vector<float> y(static_cast<std::size_t>(n * oc));
    ztune::kernels::cpu::matmul_forward(y.data(), xr.data(), wr.data(), br.data(), n, c, oc, nullptr);
    CHECK(download(be, Y) == rounded(y, d));
    // Backward accumulates into the stored 16-bit gradient: round(stored + fp32 product).
    be.matmul_backward(nullptr, DW.ref(), nullptr, D.ref(), X.ref(), W.ref(), n, c, oc);
    auto dw = rounded(dw0, d);
    ztune::kernels::cpu::matmul_backward(nullptr, dw.data(), nullptr, dr.data(), xr.data(), wr.data(), n, c, oc, nullptr);
    CHECK(download(be, DW) == rounded(dw, d));
    // The fp32 staging lives only inside the call.
    CHECK(be.memory().current(MemCategory::workspace) == 0);
    CHECK(be.memory().current(MemCategory::activations) == 2u * (x.size() + y.size()));
  }
}

TEST_CASE("copy between storage types rounds, and an in-place op rounds once", "[storage]") {
  CpuBackend be(1);
  const std::vector<float> v{1.0f + 0x1p-8f, 3.0f, -0.5f};
  Buffer h = upload(be, v, StorageDtype::bf16, MemCategory::activations);
  CHECK(download(be, h) == std::vector<float>{1.0f, 3.0f, -0.5f});
  be.scale(h.ref(), 0.25f, 3);
  CHECK(download(be, h) == std::vector<float>{0.25f, 0.75f, -0.125f});
  CHECK(be.sum_squares(h.ref(), 3) == Approx(0.0625 + 0.5625 + 0.015625));
  Buffer f = be.allocate(3, MemCategory::workspace);
  CHECK_THROWS_WITH(h.data(), Catch::Contains("bf16 storage"));
  CHECK_NOTHROW(f.data());
}

TEST_CASE("a step on 16-bit optimizer states is AdamW on their widened values, each state rounded after",
          "[storage][optimizer]") {
  // NeMo's optim.dtype bf16 (bf16 master, moments), Megatron-Core's fp16
  // master with bf16 moments. The oracle: kernels::cpu::adamw_update on the
  // rounded states and gradient in fp32, then every state rounded to its type
  // and the parameter copy rounded from the stored master. The span crosses a
  // staging chunk's end (the states widen chunk by chunk).
  const std::size_t chunk = ztune::staged_adam_chunk(ztune::ExecBackend::cpu);
  const std::size_t n = chunk + 257;
  const auto stored = [](const std::vector<float>& v, StorageDtype d) {
    return d == StorageDtype::fp32 ? v : rounded(v, d);
  };
  const auto p0 = random(n, 11), g0 = random(n, 12), m0 = random(n, 13);
  auto v0 = random(n, 14);
  for (float& x : v0) x = x * x;  // a variance is non-negative
  ztune::kernels::AdamWParams h;
  h.lr = 1e-2f;
  h.weight_decay = 0.1f;
  h.step = 3;
  for (const auto& [master_d, moments_d] : {std::pair{StorageDtype::bf16, StorageDtype::bf16},
                                           std::pair{StorageDtype::fp16, StorageDtype::bf16},
                                           std::pair{StorageDtype::fp32, StorageDtype::fp16}}) {
    CpuBackend be(1);
    Buffer P = be.allocate(n, MemCategory::params, StorageDtype::bf16);
    Buffer G = upload(be, g0, StorageDtype::bf16, MemCategory::grads);
    Buffer M = upload(be, p0, master_d, MemCategory::optimizer);
    Buffer Mo = upload(be, m0, moments_d, MemCategory::optimizer);
    Buffer V = upload(be, v0, moments_d, MemCategory::optimizer);
    const AdamWSpan span{M.raw(), Mo.raw(), V.raw(), G.raw(), P.raw(), static_cast<long>(n)};
    be.adamw_fused(std::span(&span, 1), StorageDtype::bf16, StorageDtype::bf16, h, 0.5f, {master_d, moments_d});
    auto master = stored(p0, master_d), m = stored(m0, moments_d), v = stored(v0, moments_d);
    auto g = rounded(g0, StorageDtype::bf16);
    for (float& x : g) x *= 0.5f;  // the loss scale's 1/S, before the step
    ztune::kernels::cpu::adamw_update(master.data(), g.data(), m.data(), v.data(), static_cast<long>(n), h);
    master = stored(master, master_d);
    CHECK(download(be, M) == master);
    CHECK(download(be, Mo) == stored(m, moments_d));
    CHECK(download(be, V) == stored(v, moments_d));
    CHECK(download(be, P) == rounded(master, StorageDtype::bf16));
    CHECK(be.memory().current(MemCategory::optimizer) ==
          n * (storage_bytes(master_d) + 2 * storage_bytes(moments_d)));
    CHECK(be.memory().current(MemCategory::workspace) == 0);
    // The step's fp32 workspace: the scaled gradient, and one chunk of each 16-bit state.
    const std::size_t states16 = (master_d != StorageDtype::fp32) + 2 * (moments_d != StorageDtype::fp32);
    CHECK(be.memory().peak(MemCategory::workspace) == 4 * (n + states16 * chunk));
  }
}
