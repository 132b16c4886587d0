// ZeRO++'s symmetric group quantize-dequantize on the device against
// kernels/quantize.hpp's CPU reference: int8 and int4, groups of 2048 with a
// ragged last group, a group of zeros, a group of tiny values. Both sides
// compute the same fp32 scale and round half to even (nearbyint / rintf), so
// they agree to fp32 rounding (rtol 1e-6).
#include <catch2/catch.hpp>

#include <vector>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/quantize.hpp"
#include "ztune/kernels/quantize.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

TEST_CASE("group quantize-dequantize matches the CPU reference", "[gpu][zeropp]") {
  const long group = 2048, n = 5 * group + 777;
  for (int bits : {8, 4}) {
    INFO("bits " << bits);
    std::vector<float> x = uniform(static_cast<std::size_t>(n), 31 + static_cast<std::uint32_t>(bits), -3.0f, 3.0f);
    for (long i = group; i < 2 * group; ++i) x[static_cast<std::size_t>(i)] = 0.0f;           // a zero group
    for (long i = 2 * group; i < 3 * group; ++i) x[static_cast<std::size_t>(i)] *= 1e-4f;     // a tiny group
    DeviceArray<float> d(x);
    std::vector<float> ref = x;
    cpu::quantize_dequantize(ref.data(), n, bits, group);
    cuda::quantize_dequantize(d.get(), n, bits, group, nullptr);
    CHECK(mismatches("quantize_dequantize", d.download(), ref, 0.0f, 1e-6f) == 0);
  }
}
