#include "ztune/kernels/elementwise.hpp"

namespace ztune::kernels::cpu {

void add(float* out, const float* a, const float* b, long n) {
  for (long i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void accumulate(float* dst, const float* src, long n) {
  for (long i = 0; i < n; ++i) dst[i] += src[i];
}

void scale(float* x, float s, long n) {
  for (long i = 0; i < n; ++i) x[i] *= s;
}

double sum_squares(const float* x, long n) {
  double s = 0.0;
  for (long i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

}  // namespace ztune::kernels::cpu
