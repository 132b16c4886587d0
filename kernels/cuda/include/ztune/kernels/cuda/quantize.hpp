#pragma once
// Symmetric group quantize-dequantize on the device (ZeRO++'s qwZ int8 weights
// and qgZ int4 gradients): the CPU reference kernels/quantize.hpp, one thread
// block per group, in place on x[n] (a device pointer).
#include <cuda_runtime_api.h>

namespace ztune::kernels::cuda {

void quantize_dequantize(float* x, long n, int bits, long group, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
