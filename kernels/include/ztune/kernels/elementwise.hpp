#pragma once
// Memory-bound helpers: residual adds, scaling, norms. See conventions.hpp.
namespace ztune::kernels::cpu {

/// out = a + b (out may alias a or b).
void add(float* out, const float* a, const float* b, long n);
/// dst += src.
void accumulate(float* dst, const float* src, long n);
/// x[i, j] += bias[j] for x [n, c].
void add_bias(float* x, const float* bias, int n, int c);
/// dbias[j] += Σ_i dout[i, j] (the bias add's backward).
void bias_backward(float* dbias, const float* dout, int n, int c);
/// x *= s.
void scale(float* x, float s, long n);
/// Σ x², accumulated in double (the global gradient norm sums millions of terms).
double sum_squares(const float* x, long n);

}  // namespace ztune::kernels::cpu
