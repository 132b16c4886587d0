#pragma once
// GELU, tanh approximation as GPT-2 ("gelu_new"; Hendrycks & Gimpel 2016, eq. 2):
// gelu(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³))). See conventions.hpp (backward +=).
namespace ztune::kernels::cpu {

void gelu_forward(float* out, const float* inp, long n);
/// dinp += gelu'(inp)·dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, long n);

}  // namespace ztune::kernels::cpu
