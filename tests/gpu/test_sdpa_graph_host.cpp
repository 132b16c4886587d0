// The device-free half of the cuDNN attention path (kernels/sdpa_graph.hpp): which
// path runs and why, the strides of the packed qkv [B, T, 3C] views worked out by
// hand, the graphs' consistency (every node's shapes, inputs before use), and the
// plan cache's key. The GPU test (test_gpu_cudnn_attention.cpp) checks the numbers
// against the flash kernels on a device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ztune/kernels/sdpa_graph.hpp"

using namespace ztune::kernels::sdpa;

namespace {
const Tensor& named(const Graph& g, const std::string& name) {
  for (const auto& t : g.tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  return g.tensors.front();
}
int count(const Graph& g, Op op) {
  int n = 0;
  for (const auto& x : g.nodes) n += x.op == op ? 1 : 0;
  return n;
}
}  // namespace

TEST_CASE("the fallback is chosen for fp32, windows, odd head sizes, old cuDNN and pre-Ampere devices",
          "[gpu_host][attention]") {
  const Problem ok{2, 1024, 16, 64, Dtype::bf16, 0};
  CHECK(choose(ok, 91900, 90).path == Path::cudnn);
  CHECK(choose(ok, 90000, 80).path == Path::cudnn);
  Problem p = ok;
  p.dtype = Dtype::fp32;
  CHECK(choose(p, 91900, 90).reason.find("fp32") != std::string::npos);
  p = ok;
  p.window = 256;
  CHECK(choose(p, 91900, 90).reason.find("sliding-window") != std::string::npos);
  for (int hd : {4, 60, 160}) {
    p = ok;
    p.hd = hd;
    CHECK(choose(p, 91900, 90).path == Path::fallback);
    CHECK(choose(p, 91900, 90).reason.find("head size " + std::to_string(hd)) != std::string::npos);
  }
  p = ok;
  p.hd = 128;
  CHECK(choose(p, 91900, 90).path == Path::cudnn);
  CHECK(choose(ok, 0, 90).reason == "cuDNN not loaded");
  CHECK(choose(ok, 8907, 90).reason.find("need 9.0") != std::string::npos);
  CHECK(choose(ok, 91900, 75).reason.find("sm_75") != std::string::npos);
}

TEST_CASE("the forward graph views qkv [B, T, 3C] with the strides of the packed layout", "[gpu_host][attention]") {
  // B 2, T 5, NH 3, HD 8: C = 24, a token row of qkv holds 72 elements.
  const Problem p{2, 5, 3, 8, Dtype::fp16, 0};
  const Graph g = forward_graph(p);
  CHECK(validate(g).empty());
  const Tensor& q = named(g, "Q");
  CHECK(q.dims == std::array<std::int64_t, 4>{2, 3, 5, 8});
  CHECK(q.strides == std::array<std::int64_t, 4>{5 * 72, 8, 72, 1});  // batch, head, token, channel
  CHECK((q.bind == Bind::qkv && q.offset == 0 && q.dtype == Dtype::fp16));
  const Tensor& kt = named(g, "K^T");
  CHECK(kt.dims == std::array<std::int64_t, 4>{2, 3, 8, 5});
  CHECK(kt.strides == std::array<std::int64_t, 4>{5 * 72, 8, 1, 72});  // transposed by strides
  CHECK(kt.offset == 24);
  CHECK(named(g, "V").offset == 48);
  const Tensor& o = named(g, "O");
  CHECK(o.strides == std::array<std::int64_t, 4>{5 * 24, 8, 24, 1});
  CHECK(o.bind == Bind::out);
  const Tensor& stats = named(g, "Stats");  // the flash kernels' lse [B, NH, T]
  CHECK(stats.dims == std::array<std::int64_t, 4>{2, 3, 5, 1});
  CHECK(stats.strides == std::array<std::int64_t, 4>{15, 5, 1, 1});
  CHECK(stats.dtype == Dtype::fp32);
  CHECK(named(g, "scale").by_value);
  CHECK(named(g, "scale").value == Approx(1 / std::sqrt(8.0f)));
  CHECK(std::isinf(named(g, "-inf").value));
  // S = Q·Kᵀ, O = P·V; one max and one sum reduction; the causal mask from two index generators.
  CHECK(count(g, Op::matmul) == 2);
  CHECK(count(g, Op::reduce_max) == 1);
  CHECK(count(g, Op::reduce_sum) == 1);
  CHECK(count(g, Op::gen_index) == 2);
  CHECK(count(g, Op::select) == 1);
  CHECK(g.bound().size() == 5);  // Q, Kᵀ, V over qkv; O; Stats
  CHECK(named(g, "P").dtype == Dtype::fp16);  // cast to the storage type for the second product
}

TEST_CASE("the backward graphs write dQ, dK, dV into a [B, T, 3C] buffer and are consistent",
          "[gpu_host][attention]") {
  const Problem p{1, 7, 2, 16, Dtype::bf16, 0};
  const Graph d = backward_delta_graph(p);
  CHECK(validate(d).empty());
  CHECK(named(d, "D").bind == Bind::delta);
  const Graph g = backward_graph(p);
  CHECK(validate(g) == "");
  const std::int64_t row = 3 * 32;
  for (auto [name, off] : {std::pair{"dQ", 0}, std::pair{"dK", 32}, std::pair{"dV", 64}}) {
    const Tensor& t = named(g, name);
    CHECK(t.bind == Bind::dqkv);
    CHECK(t.offset == off);
    CHECK(t.strides == std::array<std::int64_t, 4>{7 * row, 16, row, 1});
  }
  CHECK(named(g, "Stats^T").dims == std::array<std::int64_t, 4>{1, 2, 1, 7});  // broadcast along rows
  CHECK(named(g, "D^T").strides[3] == 1);
  CHECK(count(g, Op::matmul) == 7);  // S, Sᵀ, dV, dP, dQ, dPᵀ, dK
  CHECK(count(g, Op::gen_index) == 4);
}

TEST_CASE("validate names the first inconsistent node", "[gpu_host][attention]") {
  Graph g = forward_graph(Problem{1, 4, 1, 8, Dtype::bf16, 0});
  // O = P·V with V's token count changed: inner dims disagree.
  for (auto& t : g.tensors)
    if (t.name == "V") t.dims[2] = 3;
  CHECK_THAT(validate(g), Catch::Contains("matmul") && Catch::Contains("inner dims 4 vs 3"));
  Graph h = forward_graph(Problem{1, 4, 1, 8, Dtype::bf16, 0});
  std::swap(h.nodes[0], h.nodes[1]);  // the scale before the product it scales
  CHECK_THAT(validate(h), Catch::Contains("used before it is produced"));
  CHECK_THROWS_WITH(forward_graph(Problem{1, 0, 1, 8, Dtype::bf16, 0}), Catch::Contains("must be >= 1"));
}

TEST_CASE("the plan cache key separates shapes, dtypes and graphs", "[gpu_host][attention]") {
  const Problem a{2, 1024, 16, 64, Dtype::bf16, 0};
  Problem b = a;
  b.dtype = Dtype::fp16;
  CHECK(cache_key(a, "fwd") == "fwd:bf16:b2:t1024:nh16:hd64");
  CHECK(cache_key(a, "fwd") != cache_key(b, "fwd"));
  CHECK(cache_key(a, "fwd") != cache_key(a, "bwd"));
}

TEST_CASE("cudnn_frontend's views address the elements the flash kernels index", "[gpu_host][attention]") {
  // The oracle is the flash kernels' own indexing (kernels/cuda/src/attention_flash.cu):
  // Q[b, h, t, d] at b·T·3C + t·3C + h·HD + d of qkv, K at +C, V at +2C; O at
  // b·T·C + t·C + h·HD + d; the log-sum-exp at (b·NH + h)·T + t. Every element is
  // reached once (no two index tuples meet).
  const Problem p{2, 5, 3, 8, Dtype::bf16, 0};
  const std::int64_t T = p.t, NH = p.nh, HD = p.hd, C = NH * HD;
  const PackedViews v = packed_views(p);
  auto at = [](const View& x, std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    return x.offset + i0 * x.strides[0] + i1 * x.strides[1] + i2 * x.strides[2] + i3 * x.strides[3];
  };
  for (const View* x : {&v.q, &v.k, &v.v, &v.o}) CHECK(x->dims == std::array<std::int64_t, 4>{2, 3, 5, 8});
  CHECK(v.stats.dims == std::array<std::int64_t, 4>{2, 3, 5, 1});
  std::vector<int> qkv_hits(static_cast<std::size_t>(p.b * T * 3 * C)), out_hits(static_cast<std::size_t>(p.b * T * C));
  bool all_match = true;
  for (std::int64_t b = 0; b < p.b; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        all_match &= at(v.stats, b, h, t, 0) == (b * NH + h) * T + t;
        for (std::int64_t d = 0; d < HD; ++d) {
          const std::int64_t row = b * T * 3 * C + t * 3 * C + h * HD + d;
          all_match &= at(v.q, b, h, t, d) == row && at(v.k, b, h, t, d) == row + C && at(v.v, b, h, t, d) == row + 2 * C;
          all_match &= at(v.o, b, h, t, d) == b * T * C + t * C + h * HD + d;
          for (const View* x : {&v.q, &v.k, &v.v}) ++qkv_hits[static_cast<std::size_t>(at(*x, b, h, t, d))];
          ++out_hits[static_cast<std::size_t>(at(v.o, b, h, t, d))];
        }
      }
  CHECK(all_match);
  CHECK(std::all_of(qkv_hits.begin(), qkv_hits.end(), [](int n) { return n == 1; }));
  CHECK(std::all_of(out_hits.begin(), out_hits.end(), [](int n) { return n == 1; }));
}
