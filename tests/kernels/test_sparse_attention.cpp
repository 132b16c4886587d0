// Block-sparse attention against independent references: the dense causal
// kernel (attention.hpp) for the all-blocks layout, a naive masked softmax
// attention written here (double precision, element mask = layout block
// present and key <= query) for the sparse layouts, finite differences for the
// backward, and the cost model's closed-form block counts for the layouts.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "grad_check.hpp"
#include "ztune/kernels/attention.hpp"
#include "ztune/kernels/sparse_attention.hpp"
#include "ztune/kernels/thread_pool.hpp"
#include "ztune/model/sparse_attention.hpp"

using namespace ztune::kernels;

namespace {

// out[B,T,C] of softmax(QKᵀ/√hd, masked)·V, the mask built from the layout.
std::vector<double> naive_masked_attention(const std::vector<float>& qkv, int b, int t, int c, int nh,
                                           const BlockLayout& l) {
  const int hd = c / nh;
  std::vector<double> out(static_cast<std::size_t>(b) * t * c, 0.0);
  auto at = [&](int bi, int i, int part, int h, int d) {
    return static_cast<double>(qkv[static_cast<std::size_t>((bi * t + i) * 3 * c + part * c + h * hd + d)]);
  };
  for (int bi = 0; bi < b; ++bi)
    for (int h = 0; h < nh; ++h)
      for (int i = 0; i < t; ++i) {
        std::vector<double> s(static_cast<std::size_t>(t), -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = 0; j <= i; ++j) {
          if (!l.has(i / l.block, j / l.block)) continue;
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += at(bi, i, 0, h, d) * at(bi, j, 1, h, d);
          s[static_cast<std::size_t>(j)] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[static_cast<std::size_t>(j)]);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j)
          if (std::isfinite(s[static_cast<std::size_t>(j)])) sum += std::exp(s[static_cast<std::size_t>(j)] - mx);
        for (int j = 0; j <= i; ++j) {
          if (!std::isfinite(s[static_cast<std::size_t>(j)])) continue;
          const double p = std::exp(s[static_cast<std::size_t>(j)] - mx) / sum;
          for (int d = 0; d < hd; ++d) out[static_cast<std::size_t>((bi * t + i) * c + h * hd + d)] += p * at(bi, j, 2, h, d);
        }
      }
  return out;
}

std::size_t att_size(int b, int nh, const BlockLayout& l) {
  return static_cast<std::size_t>(b) * nh * l.nnz() * l.block * l.block;
}

}  // namespace

TEST_CASE("sparse attention with every causal block equals dense causal attention, forward and backward",
          "[kernels][sparse]") {
  const int b = 2, t = 16, c = 8, nh = 2;
  const BlockLayout l = make_block_layout(BlockPattern::dense, t, 4);
  CHECK(l.nnz() == 4 * 5 / 2);
  auto qkv = ztune::test::random_vector(static_cast<std::size_t>(b) * t * 3 * c, 3);
  auto dout = ztune::test::random_vector(static_cast<std::size_t>(b) * t * c, 4);
  std::vector<float> out(dout.size()), ref(dout.size()), att(att_size(b, nh, l)),
      dense_att(static_cast<std::size_t>(b) * nh * t * t);
  cpu::sparse_attention_forward(out.data(), att.data(), qkv.data(), b, t, c, nh, l, nullptr);
  cpu::attention_forward(ref.data(), dense_att.data(), qkv.data(), b, t, c, nh, nullptr);
  for (std::size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(ref[i]).margin(1e-6));
  std::vector<float> dqkv(qkv.size(), 0.0f), dref(qkv.size(), 0.0f);
  cpu::sparse_attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), b, t, c, nh, l, nullptr);
  cpu::attention_backward(dref.data(), dout.data(), qkv.data(), dense_att.data(), b, t, c, nh, nullptr);
  for (std::size_t i = 0; i < dqkv.size(); ++i) CHECK(dqkv[i] == Approx(dref[i]).margin(1e-5));
}

TEST_CASE("sparse attention equals dense attention under the layout's element mask", "[kernels][sparse]") {
  const int b = 2, t = 64, c = 16, nh = 2;
  auto qkv = ztune::test::random_vector(static_cast<std::size_t>(b) * t * 3 * c, 5);
  for (BlockPattern pattern : {BlockPattern::fixed, BlockPattern::bigbird, BlockPattern::longformer,
                               BlockPattern::variable}) {
    INFO("pattern " << static_cast<int>(pattern));
    const BlockLayout l = make_block_layout(pattern, t, 4, 7);
    CHECK(l.nnz() < 16 * 17 / 2);  // genuinely sparse
    std::vector<float> out(static_cast<std::size_t>(b) * t * c), att(att_size(b, nh, l));
    ThreadPool pool(2);
    cpu::sparse_attention_forward(out.data(), att.data(), qkv.data(), b, t, c, nh, l, &pool);
    const auto ref = naive_masked_attention(qkv, b, t, c, nh, l);
    // fp32 against fp64: |Δ| within 1e-5 + 1e-5·|ref| (softmax of O(1) scores).
    int wrong = 0;
    for (std::size_t i = 0; i < out.size() && wrong < 10; ++i)
      if (std::abs(out[i] - ref[i]) > 1e-5 + 1e-5 * std::abs(ref[i])) {
        ++wrong;
        FAIL_CHECK("out[" << i << "] = " << out[i] << ", reference " << ref[i]);
      }
  }
}

TEST_CASE("sparse attention backward matches finite differences", "[kernels][sparse]") {
  const int b = 1, t = 16, c = 4, nh = 2;
  const BlockLayout l = make_block_layout(BlockPattern::longformer, t, 2);
  auto qkv = ztune::test::random_vector(static_cast<std::size_t>(b) * t * 3 * c, 8);
  auto dout = ztune::test::random_vector(static_cast<std::size_t>(b) * t * c, 9);
  std::vector<float> out(dout.size()), att(att_size(b, nh, l)), dqkv(qkv.size(), 0.0f), dqkv2(qkv.size(), 0.0f);
  auto loss = [&] {
    cpu::sparse_attention_forward(out.data(), att.data(), qkv.data(), b, t, c, nh, l, nullptr);
    return ztune::test::weighted_sum(out, dout);
  };
  loss();
  cpu::sparse_attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), b, t, c, nh, l, nullptr);
  ThreadPool pool(2);
  cpu::sparse_attention_backward(dqkv2.data(), dout.data(), qkv.data(), att.data(), b, t, c, nh, l, &pool);
  CHECK(dqkv == dqkv2);
  ztune::test::check_gradient(qkv, loss, dqkv, "dqkv", 1e-3f);
}

TEST_CASE("the kernels' layouts have the cost model's block counts", "[kernels][sparse]") {
  using ztune::SparseLayout;
  for (int nb : {1, 3, 4, 7, 8, 64, 129}) {
    INFO("nb = " << nb);
    CHECK(make_block_layout(BlockPattern::fixed, nb * 16, 16).nnz() ==
          ztune::sparse_layout_blocks(SparseLayout::fixed, nb));
    CHECK(make_block_layout(BlockPattern::longformer, nb * 16, 16).nnz() ==
          ztune::sparse_layout_blocks(SparseLayout::longformer, nb));
    CHECK(make_block_layout(BlockPattern::variable, nb * 16, 16).nnz() ==
          ztune::sparse_layout_blocks(SparseLayout::variable, nb));
  }
  // BigBird's random block: the cost model counts its expectation.
  double sum = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) sum += make_block_layout(BlockPattern::bigbird, 64 * 16, 16, seed).nnz();
  CHECK(sum / 200 == Approx(ztune::sparse_layout_blocks(SparseLayout::bigbird, 64)).margin(0.5));
  CHECK(make_block_layout(BlockPattern::bigbird, 1024, 16, 3).cols == make_block_layout(BlockPattern::bigbird, 1024, 16, 3).cols);
}
