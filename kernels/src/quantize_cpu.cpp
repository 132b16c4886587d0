#include "ztune/kernels/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ztune::kernels::cpu {

void quantize_dequantize(float* x, long n, int bits, long group) {
  if (bits < 2 || bits > 16) throw std::invalid_argument("quantize_dequantize: bits must be in [2, 16]");
  if (group <= 0) throw std::invalid_argument("quantize_dequantize: group must be positive");
  const float levels = static_cast<float>((1 << (bits - 1)) - 1);
  for (long begin = 0; begin < n; begin += group) {
    const long end = std::min(n, begin + group);
    float max_abs = 0;
    for (long i = begin; i < end; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
    if (max_abs == 0) continue;
    const float scale = max_abs / levels;
    for (long i = begin; i < end; ++i) x[i] = scale * std::nearbyint(x[i] / scale);
  }
}

}  // namespace ztune::kernels::cpu
