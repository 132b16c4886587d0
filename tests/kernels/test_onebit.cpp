// 1-bit compression with error feedback against closed forms: a two-element
// vector by hand, the bit packing of an odd length, and the error-feedback
// identity Σ_t decompressed_t = Σ_t x_t − error_T (what the compression drops
// is carried, never lost; Seide et al. 2014, Tang et al. 2021 Algorithm 1).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "grad_check.hpp"
#include "ztune/kernels/onebit.hpp"

using namespace ztune::kernels;

TEST_CASE("1-bit compression of [3, -4]: scale ‖x‖/√n, signs, error x − scale·sign", "[kernels][onebit]") {
  const std::vector<float> x{3.0f, -4.0f};
  std::vector<float> err{0.0f, 0.0f};
  std::uint8_t bits = 0xff;
  const float scale = cpu::onebit_compress(&bits, err.data(), x.data(), 2);
  CHECK(scale == Approx(std::sqrt(12.5)));
  CHECK(bits == 0x01);
  CHECK(err[0] == Approx(3.0 - std::sqrt(12.5)));
  CHECK(err[1] == Approx(-4.0 + std::sqrt(12.5)));
  std::vector<float> out{1.0f, 1.0f};
  cpu::onebit_decompress_add(out.data(), &bits, scale, 0.5f, 2);
  CHECK(out[0] == Approx(1.0 + 0.5 * std::sqrt(12.5)));
  CHECK(out[1] == Approx(1.0 - 0.5 * std::sqrt(12.5)));
}

TEST_CASE("1-bit compression packs element i into bit i mod 8 of byte i/8, zero counts as +1", "[kernels][onebit]") {
  std::vector<float> x(13, -1.0f);
  x[0] = 0.0f;
  x[9] = 2.0f;
  x[12] = 5.0f;
  std::vector<float> err(13, 0.0f);
  std::vector<std::uint8_t> bits(2, 0xAA);
  cpu::onebit_compress(bits.data(), err.data(), x.data(), 13);
  CHECK(bits[0] == 0x01);
  CHECK(bits[1] == ((1u << 1) | (1u << 4)));
}

TEST_CASE("error feedback: the decompressed sum tracks the input sum exactly up to the final error",
          "[kernels][onebit]") {
  const long n = 1000;
  std::vector<float> err(n, 0.0f);
  std::vector<double> sent(n, 0.0), received(n, 0.0);
  std::vector<std::uint8_t> bits((n + 7) / 8);
  for (std::uint32_t t = 0; t < 50; ++t) {
    auto x = ztune::test::random_vector(static_cast<std::size_t>(n), t + 1);
    for (long i = 0; i < n; ++i) sent[static_cast<std::size_t>(i)] += x[static_cast<std::size_t>(i)];
    const float scale = cpu::onebit_compress(bits.data(), err.data(), x.data(), n);
    std::vector<float> out(n, 0.0f);
    cpu::onebit_decompress_add(out.data(), bits.data(), scale, 1.0f, n);
    for (long i = 0; i < n; ++i) received[static_cast<std::size_t>(i)] += out[static_cast<std::size_t>(i)];
  }
  // fp32 rounding accumulates over 50 rounds: |Δ| ≤ 1e-4 per element.
  for (long i = 0; i < n; i += 37)
    CHECK(received[static_cast<std::size_t>(i)] + err[static_cast<std::size_t>(i)] ==
          Approx(sent[static_cast<std::size_t>(i)]).margin(1e-4));
  // The error stays bounded (it does not accumulate the inputs).
  double sq = 0;
  for (float e : err) sq += static_cast<double>(e) * e;
  CHECK(std::sqrt(sq / n) < 3.0);
}
