#pragma once
// SwiGLU (Shazeer 2020, eq. 6; Llama's MLP). inp [n, 2f] holds the gate
// projection in columns [0, f) and the up projection in [f, 2f) (one fused GEMM
// produces both; a tensor-parallel rank holds its f/tp columns of each);
// out [n, f] = silu(gate)·up with silu(a) = a·σ(a). See conventions.hpp (backward +=).
namespace ztune::kernels::cpu {

void swiglu_forward(float* out, const float* inp, int n, int f);
/// dinp[:, :f] += dout·up·silu'(gate), dinp[:, f:] += dout·silu(gate).
void swiglu_backward(float* dinp, const float* inp, const float* dout, int n, int f);

}  // namespace ztune::kernels::cpu
