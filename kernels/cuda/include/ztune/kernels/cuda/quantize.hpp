#pragma once
// Symmetric group quantize-dequantize on the device (ZeRO++'s qwZ int8 weights
// and qgZ int4 gradients): the CPU reference kernels/quantize.hpp, one thread
// block per group, in place on x[n] (a device pointer) of any storage type T ∈
// {float, __half, __nv_bfloat16}: the group's scale and the rounding to its
// grid in fp32 on the widened values, the result rounded to T.
#include <cuda_runtime_api.h>

namespace ztune::kernels::cuda {

template <typename T>
void quantize_dequantize(T* x, long n, int bits, long group, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
