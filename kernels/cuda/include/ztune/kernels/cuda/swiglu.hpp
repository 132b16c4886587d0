#pragma once
// SwiGLU on the device (Shazeer 2020, eq. 6; Llama's MLP), as kernels/swiglu.hpp:
// inp [n, 2f] holds the gate projection in columns [0, f) and the up projection in
// [f, 2f); out [n, f] = silu(gate)·up with silu(a) = a·σ(a). Forward writes,
// backward accumulates (+=).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace ztune::kernels::cuda {

template <typename T>
void swiglu_forward(T* out, const T* inp, int n, int f, cudaStream_t stream);
/// dinp[:, :f] += dout·up·silu'(gate), dinp[:, f:] += dout·silu(gate).
template <typename T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int n, int f, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
