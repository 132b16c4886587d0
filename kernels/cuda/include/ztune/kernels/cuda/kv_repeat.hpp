#pragma once
// Grouped-query head repetition on the device; same layout and semantics as
// kernels/kv_repeat.hpp (forward writes, backward accumulates), plus a trailing
// stream.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace ztune::kernels::cuda {

template <typename T>
void kv_repeat_forward(T* out, const T* inp, int n, int nh, int kv, int hd, cudaStream_t stream);
template <typename T>
void kv_repeat_backward(T* dinp, const T* dout, int n, int nh, int kv, int hd, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
