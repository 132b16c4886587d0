// The host halves of issue 24 item 3 that need no device: the chunk table of the
// fused AdamW (worked out by hand), the memory tracker's accounting of 16-bit
// storage for the tiny model (the closed form 2 + 2 + 4 + 8 bytes per parameter,
// DeepSpeed ZeRO paper §3.1's 16Ψ for mixed-precision Adam), and the CPU
// backend's fused AdamW (fp32) against kernels/adamw.hpp's update per tensor.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "ztune/executor/cpu_backend.hpp"
#include "ztune/executor/mixed_precision_params.hpp"
#include "ztune/executor/param_specs.hpp"
#include "ztune/kernels/adamw.hpp"
#include "ztune/kernels/multi_tensor.hpp"
#include "ztune/vocab/catalog.hpp"

using namespace ztune;
using namespace ztune::executor;
using kernels::TensorChunk;

TEST_CASE("the chunk table cuts every tensor into rows of at most `chunk` elements", "[gpu_host][adamw]") {
  const std::vector<std::int64_t> sizes{5, 0, 8, 1, 9};
  const auto t = kernels::build_chunk_table(sizes, 4);
  // 5 = 4 + 1, 0 = none, 8 = 4 + 4, 1 = 1, 9 = 4 + 4 + 1
  const std::vector<TensorChunk> expected{{0, 4, 0}, {0, 1, 4}, {2, 4, 0}, {2, 4, 4}, {3, 1, 0},
                                          {4, 4, 0}, {4, 4, 4}, {4, 1, 8}};
  CHECK(t == expected);
  CHECK(kernels::build_chunk_table(std::vector<std::int64_t>{}, 4).empty());
  CHECK(kernels::build_chunk_table(std::vector<std::int64_t>{16384}, 16384).size() == 1);
  CHECK(kernels::build_chunk_table(std::vector<std::int64_t>{16385}, 16384).size() == 2);
  CHECK_THROWS_WITH(kernels::build_chunk_table(std::vector<std::int64_t>{3, -1}, 4),
                    Catch::Contains("tensor 1 has -1 elements"));
  CHECK_THROWS_WITH(kernels::build_chunk_table(sizes, 0), Catch::Contains("chunk of 0 elements"));
  // 2^31 rows do not fit one grid.
  CHECK_THROWS_WITH(kernels::build_chunk_table(std::vector<std::int64_t>{std::int64_t{1} << 31}, 1),
                    Catch::Contains("one launch's grid"));
}

TEST_CASE("every element of every tensor is in exactly one row", "[gpu_host][adamw]") {
  std::mt19937 rng(7);
  std::vector<std::int64_t> sizes;
  for (int k = 0; k < 200; ++k) sizes.push_back(std::uniform_int_distribution<std::int64_t>(0, 50000)(rng));
  const std::int64_t chunk = 16384;
  const auto t = kernels::build_chunk_table(sizes, chunk);
  std::vector<std::int64_t> covered(sizes.size(), 0);
  for (const auto& r : t) {
    REQUIRE(r.length >= 1);
    REQUIRE(r.length <= chunk);
    REQUIRE(r.begin == covered[static_cast<std::size_t>(r.tensor)]);  // in order, no gap or overlap
    covered[static_cast<std::size_t>(r.tensor)] += r.length;
  }
  CHECK(covered == sizes);
}

namespace {
// GPT-2 parameters from its shapes (Radford et al. 2019; tied wte): wte V·C, wpe T·C,
// per layer 2 layernorms (4C), c_attn C·3C + 3C, attn c_proj C·C + C, c_fc C·F + F,
// mlp c_proj F·C + C; final layernorm 2C.
std::int64_t gpt2_params(std::int64_t v, std::int64_t t, std::int64_t c, std::int64_t f, std::int64_t l) {
  return v * c + t * c + l * (4 * c + 3 * c * c + 3 * c + c * c + c + c * f + f + f * c + c) + 2 * c;
}
std::vector<std::int64_t> tiny_sizes() {
  const Transformer m = load_transformer("tiny");
  std::vector<std::int64_t> sizes;
  for (const auto& p : param_specs(m, GroupShape{1, 1, 1, 1}, {0, 0, 0}))
    sizes.push_back(static_cast<std::int64_t>(p.shard.numel()));
  return sizes;
}
}  // namespace

TEST_CASE("16-bit storage is counted as 2 + 2 bytes of copies and 4 + 8 of fp32 optimizer state",
          "[gpu_host][memory]") {
  const std::vector<std::int64_t> sizes = tiny_sizes();
  const std::int64_t n = gpt2_params(256, 64, 64, 256, 4);  // tiny.json
  std::int64_t total = 0;
  for (auto s : sizes) total += s;
  REQUIRE(total == n);
  const auto un = static_cast<std::size_t>(n);

  // 16-bit buffers are counted at their element size.
  for (StorageDtype d : {StorageDtype::bf16, StorageDtype::fp16}) {
    CpuBackend be(1);
    {
      MixedPrecisionParams mp(be, sizes, d);
      CHECK(be.memory().current(MemCategory::params) == 2 * un);
      CHECK(be.memory().current(MemCategory::grads) == 2 * un);
      CHECK(be.memory().current(MemCategory::optimizer) == (4 + 8) * un);  // master + m + v
      CHECK(mp.params().bytes() == 2 * un);
      CHECK(mp.spans().size() == sizes.size());
      CHECK(mp.spans().front().param != nullptr);
    }
    CHECK(be.memory().current(MemCategory::params) == 0);  // freed with their element size
    CHECK(be.memory().current(MemCategory::optimizer) == 0);
    CHECK(be.memory().peak_device_total() == 16 * un);
  }
  CpuBackend be(1);
  MixedPrecisionParams mp(be, sizes, StorageDtype::fp32);  // the parameters are the masters
  CHECK(be.memory().current(MemCategory::params) == 4 * un);
  CHECK(be.memory().current(MemCategory::grads) == 4 * un);
  CHECK(be.memory().current(MemCategory::optimizer) == 8 * un);
  CHECK(mp.spans().front().param == nullptr);
}

TEST_CASE("the CPU's 16-bit fused step is AdamW on the rounded gradients, copies the rounded masters",
          "[gpu_host][adamw]") {
  const std::vector<std::int64_t> sizes{8, 0, 300};
  for (StorageDtype d : {StorageDtype::bf16, StorageDtype::fp16}) {
    CpuBackend be(1);
    MixedPrecisionParams mp(be, sizes, d);
    const std::size_t n = mp.numel();
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> master(n), g(n);
    for (std::size_t i = 0; i < n; ++i) {
      master[i] = u(rng);
      g[i] = 4 * u(rng);
    }
    std::vector<std::uint16_t> g16(n);
    convert_host(g16.data(), d, g.data(), StorageDtype::fp32, n);
    convert_host(g.data(), StorageDtype::fp32, g16.data(), d, n);  // the gradient as stored
    be.from_host(mp.master(), master.data(), n);
    be.from_host(mp.grads().ref(), g16.data(), n);
    // ε = 0.1 against gradients of order 1: Adam sees the grad_scale (with a
    // tiny ε its update would be the same for any constant factor).
    const kernels::AdamWParams h{1e-3f, 0.9f, 0.999f, 0.1f, 0.01f, 1};
    mp.step(h, 0.5f);
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    for (auto& x : g) x *= 0.5f;
    kernels::cpu::adamw_update(master.data(), g.data(), m.data(), v.data(), static_cast<long>(n), h);
    std::vector<float> got(n);
    be.to_host(got.data(), mp.master(), n);
    CHECK(got == master);
    std::vector<std::uint16_t> copy(n), want(n);
    be.to_host(copy.data(), mp.params().ref(), n);
    convert_host(want.data(), d, master.data(), StorageDtype::fp32, n);
    CHECK(copy == want);
  }
  CHECK(parse_storage_dtype("bf16") == StorageDtype::bf16);
  CHECK(!parse_storage_dtype("bfloat16").has_value());
}

TEST_CASE("the fused fp32 step equals kernels/adamw.hpp's update tensor by tensor", "[gpu_host][adamw]") {
  const std::vector<std::int64_t> sizes{37, 0, 1000, 5};
  CpuBackend be(1);
  MixedPrecisionParams mp(be, sizes, StorageDtype::fp32);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  const std::size_t n = mp.numel();
  std::vector<float> p(n), g(n), m(n), v(n);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = u(rng);
    g[i] = 8 * u(rng);
    m[i] = 0.01f * u(rng);
    v[i] = 1e-4f * (u(rng) + 1);
  }
  be.from_host(mp.params().data(), p.data(), n);
  be.from_host(mp.grads().data(), g.data(), n);
  be.from_host(mp.m().data(), m.data(), n);
  be.from_host(mp.v().data(), v.data(), n);
  const kernels::AdamWParams h{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 4};
  mp.step(h, 0.125f);
  for (auto& x : g) x *= 0.125f;  // a power of two: exact
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::size_t o = mp.offset(k);
    kernels::cpu::adamw_update(p.data() + o, g.data() + o, m.data() + o, v.data() + o, static_cast<long>(sizes[k]), h);
  }
  std::vector<float> got(n);
  be.to_host(got.data(), mp.master(), n);
  CHECK(got == p);
  be.to_host(got.data(), mp.v().data(), n);
  CHECK(got == v);
}
