#pragma once
// Dynamic loss scaling's device half (Micikevicius et al. 2018, §3.2): after the
// backward pass of a loss multiplied by S, gradients are checked for inf/NaN and
// multiplied by 1/S. The host half (when to skip a step, halve or grow S) is
// executor/cuda's DynamicLossScaler (DeepSpeed's rules).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace ztune::kernels::cuda {

/// Sets *found_inf (a device int the caller zeroed) to 1 if any x[i] is inf or NaN.
template <typename T>
void check_finite(int* found_inf, const T* x, long n, cudaStream_t stream);
/// x *= inv_scale in place, and *found_inf = 1 if any x[i] (before scaling) is not finite.
template <typename T>
void unscale_check_finite(T* x, float inv_scale, int* found_inf, long n, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
