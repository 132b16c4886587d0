#pragma once
// GELU on the device, tanh approximation as kernels/gelu.hpp (GPT-2's gelu_new;
// Hendrycks & Gimpel 2016, eq. 2), fp32 arithmetic on any storage type, plus a
// trailing stream. Forward writes, backward accumulates (+=).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace ztune::kernels::cuda {

template <typename T>
void gelu_forward(T* out, const T* inp, long n, cudaStream_t stream);
/// dinp += gelu'(inp)·dout (dinp must not alias dout).
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, long n, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
