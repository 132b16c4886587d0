#pragma once
// Activations on the device. GELU, tanh approximation as kernels/gelu.hpp (GPT-2's
// gelu_new; Hendrycks & Gimpel 2016, eq. 2). SwiGLU (Shazeer 2020, eq. 6; Llama's
// MLP): inp [n, 2f] holds the gate projection in columns [0, f) and the up
// projection in [f, 2f); out [n, f] = silu(gate)·up with silu(a) = a·σ(a).
// Forward writes, backward accumulates (+=).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace ztune::kernels::cuda {

template <typename T>
void gelu_forward(T* out, const T* inp, long n, cudaStream_t stream);
/// dinp += gelu'(inp)·dout (dinp must not alias dout).
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, long n, cudaStream_t stream);

template <typename T>
void swiglu_forward(T* out, const T* inp, int n, int f, cudaStream_t stream);
/// dinp[:, :f] += dout·up·silu'(gate), dinp[:, f:] += dout·silu(gate).
template <typename T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int n, int f, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
