#include "ztune/kernels/elementwise.hpp"

namespace ztune::kernels::cpu {

void add(float* out, const float* a, const float* b, long n) {
  for (long i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void accumulate(float* dst, const float* src, long n) {
  for (long i = 0; i < n; ++i) dst[i] += src[i];
}

void add_bias(float* x, const float* bias, int n, int c) {
  for (int i = 0; i < n; ++i) {
    float* row = x + static_cast<long>(i) * c;
    for (int j = 0; j < c; ++j) row[j] += bias[j];
  }
}

void bias_backward(float* dbias, const float* dout, int n, int c) {
  for (int i = 0; i < n; ++i) {
    const float* row = dout + static_cast<long>(i) * c;
    for (int j = 0; j < c; ++j) dbias[j] += row[j];
  }
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
