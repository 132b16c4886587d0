#include "ztune/kernels/onebit.hpp"

#include <cmath>

namespace ztune::kernels::cpu {

float onebit_compress(std::uint8_t* bits, float* error, const float* x, long n) {
  if (n <= 0) return 0.0f;
  double sq = 0;
  for (long i = 0; i < n; ++i) {
    const float c = x[i] + error[i];
    error[i] = c;  // holds the compensated value until the scale is known
    sq += static_cast<double>(c) * c;
  }
  const auto scale = static_cast<float>(std::sqrt(sq / static_cast<double>(n)));
  for (long byte = 0; byte < (n + 7) / 8; ++byte) bits[byte] = 0;
  for (long i = 0; i < n; ++i) {
    const float c = error[i];
    const bool positive = c >= 0.0f;
    if (positive) bits[i / 8] = static_cast<std::uint8_t>(bits[i / 8] | (1u << (i % 8)));
    error[i] = c - (positive ? scale : -scale);
  }
  return scale;
}

void onebit_decompress_add(float* out, const std::uint8_t* bits, float scale, float weight, long n) {
  const float v = weight * scale;
  for (long i = 0; i < n; ++i) out[i] += ((bits[i / 8] >> (i % 8)) & 1u) != 0 ? v : -v;
}

}  // namespace ztune::kernels::cpu
