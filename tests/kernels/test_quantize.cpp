// ZeRO++'s symmetric group quantization (kernels/quantize.hpp), against values
// worked out by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ztune/kernels/quantize.hpp"

using namespace ztune::kernels;

TEST_CASE("int8 symmetric quantization rounds to max|x|/127 steps per group", "[kernels][zeropp]") {
  // Group 1: max |x| = 1.27 → scale 0.01; 0.504 → 50·0.01 = 0.50 (50.4 rounds down),
  // −0.0151 → −2·0.01 (−1.51 rounds to −2), 1.27 stays. Group 2: all zeros stay zero.
  // Group 3 (the short last one): max 2.54 → scale 0.02; 0.03 → 2·0.02 (1.5 rounds to even 2).
  std::vector<float> x{0.504f, -0.0151f, 1.27f, 0.f, 0.f, 0.f, 0.03f, -2.54f};
  cpu::quantize_dequantize(x.data(), static_cast<long>(x.size()), 8, 3);
  CHECK(x[0] == Approx(0.50f).epsilon(1e-6));
  CHECK(x[1] == Approx(-0.02f).epsilon(1e-6));
  CHECK(x[2] == Approx(1.27f).epsilon(1e-6));
  CHECK((x[3] == 0.f && x[4] == 0.f && x[5] == 0.f));
  CHECK(x[6] == Approx(0.04f).epsilon(1e-6));
  CHECK(x[7] == Approx(-2.54f).epsilon(1e-6));
}

TEST_CASE("int4 quantization has 7 levels each side and errs by at most half a step", "[kernels][zeropp]") {
  // max |x| = 0.7 → scale 0.1: every value lands on a multiple of 0.1 within 0.05.
  std::vector<float> x;
  for (int i = -70; i <= 70; ++i) x.push_back(0.01f * static_cast<float>(i));
  const std::vector<float> original = x;
  cpu::quantize_dequantize(x.data(), static_cast<long>(x.size()), 4, static_cast<long>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float steps = x[i] / 0.1f;
    CHECK(std::fabs(steps - std::round(steps)) < 1e-4f);
    CHECK(std::fabs(steps) <= 7.0f + 1e-4f);
    CHECK(std::fabs(x[i] - original[i]) <= 0.05f + 1e-6f);
  }
  // A second pass changes nothing: the values are on the grid already.
  const std::vector<float> once = x;
  cpu::quantize_dequantize(x.data(), static_cast<long>(x.size()), 4, static_cast<long>(x.size()));
  CHECK(x == once);
  CHECK_THROWS(cpu::quantize_dequantize(x.data(), 4, 1, 4));
  CHECK_THROWS(cpu::quantize_dequantize(x.data(), 4, 8, 0));
}
