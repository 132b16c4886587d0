#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "grad_check.hpp"
#include "ztune/kernels/attention.hpp"
#include "ztune/kernels/thread_pool.hpp"

using namespace ztune::kernels;

TEST_CASE("attention with equal keys averages the visible values (causal mask)", "[kernels][attention]") {
  const int b = 1, t = 4, c = 4, nh = 2;
  std::vector<float> qkv(b * t * 3 * c);
  auto rnd = ztune::test::random_vector(qkv.size(), 1);
  for (int i = 0; i < t; ++i) {
    for (int j = 0; j < c; ++j) {
      qkv[i * 3 * c + j] = rnd[i * 3 * c + j];  // any query
      qkv[i * 3 * c + c + j] = 0.5f;            // equal keys → uniform weights
      qkv[i * 3 * c + 2 * c + j] = static_cast<float>(i + 10 * j);
    }
  }
  std::vector<float> out(b * t * c), att(b * nh * t * t);
  cpu::attention_forward(out.data(), att.data(), qkv.data(), b, t, c, nh, nullptr);
  for (int i = 0; i < t; ++i)
    for (int j = 0; j < c; ++j) CHECK(out[i * c + j] == Approx(i / 2.0 + 10.0 * j));  // mean of 0..i
  // Probabilities: rows sum to 1, zero above the diagonal.
  for (int h = 0; h < nh; ++h)
    for (int i = 0; i < t; ++i) {
      double s = 0;
      for (int j = 0; j < t; ++j) {
        s += att[(h * t + i) * t + j];
        if (j > i) CHECK(att[(h * t + i) * t + j] == 0.0f);
      }
      CHECK(s == Approx(1.0));
    }
}

TEST_CASE("attention backward matches finite differences, the pool gives the same result",
          "[kernels][attention]") {
  const int b = 2, t = 5, c = 6, nh = 2;
  auto qkv = ztune::test::random_vector(b * t * 3 * c, 1);
  auto dout = ztune::test::random_vector(b * t * c, 2);
  std::vector<float> out(b * t * c), att(b * nh * t * t), dqkv(qkv.size(), 0.0f), dqkv2(qkv.size(), 0.0f);
  auto loss = [&] {
    cpu::attention_forward(out.data(), att.data(), qkv.data(), b, t, c, nh, nullptr);
    return ztune::test::weighted_sum(out, dout);
  };
  loss();
  cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), b, t, c, nh, nullptr);
  ThreadPool pool(2);
  cpu::attention_backward(dqkv2.data(), dout.data(), qkv.data(), att.data(), b, t, c, nh, &pool);
  CHECK(dqkv == dqkv2);
  ztune::test::check_gradient(qkv, loss, dqkv, "dqkv", 1e-3f);
}

// A sliding window of w (Mistral): with equal keys, row i averages the values
// of rows max(0, i − w + 1)..i, worked by hand; the flash kernel gives the same
// out, and its lse is that of the window's uniform scores.
TEST_CASE("sliding-window attention with equal keys averages the window's values", "[kernels][attention][window]") {
  const int b = 1, t = 6, c = 4, nh = 2, w = 3;
  std::vector<float> qkv(b * t * 3 * c);
  auto rnd = ztune::test::random_vector(qkv.size(), 2);
  for (int i = 0; i < t; ++i) {
    for (int j = 0; j < c; ++j) {
      qkv[i * 3 * c + j] = rnd[i * 3 * c + j];
      qkv[i * 3 * c + c + j] = 0.5f;
      qkv[i * 3 * c + 2 * c + j] = static_cast<float>(i + 10 * j);
    }
  }
  std::vector<float> out(b * t * c), att(b * nh * t * t), flash_out(b * t * c), lse(b * nh * t);
  cpu::attention_forward(out.data(), att.data(), qkv.data(), b, t, c, nh, nullptr, w);
  cpu::flash_attention_forward(flash_out.data(), lse.data(), qkv.data(), b, t, c, nh, nullptr, w);
  for (int i = 0; i < t; ++i) {
    const int first = std::max(0, i - w + 1);
    for (int j = 0; j < c; ++j) {
      CHECK(out[i * c + j] == Approx((first + i) / 2.0 + 10.0 * j));  // mean of first..i
      CHECK(flash_out[i * c + j] == Approx(out[i * c + j]));
    }
    for (int h = 0; h < nh; ++h)
      for (int j = 0; j < t; ++j)
        if (j < first || j > i) CHECK(att[(h * t + i) * t + j] == 0.0f);
  }
  // A window as long as the sequence is plain causal attention, bit for bit.
  std::vector<float> causal(b * t * c), wide(b * t * c);
  cpu::attention_forward(causal.data(), att.data(), qkv.data(), b, t, c, nh, nullptr);
  cpu::attention_forward(wide.data(), att.data(), qkv.data(), b, t, c, nh, nullptr, t);
  CHECK(causal == wide);
}
