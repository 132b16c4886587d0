#pragma once
// Rotary position embedding on the device; same layout and semantics as
// kernels/rope.hpp (fp32 angles and arithmetic on any storage type), plus a
// trailing stream.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ztune::kernels::cuda {

/// positions is a device array of n positions; rot_dims as kernels/rope.hpp (0 = hd).
template <typename T>
void rope_forward(T* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd, float theta,
                  int rot_dims, cudaStream_t stream);
template <typename T>
void rope_backward(T* dx, const std::int32_t* positions, int n, int row_stride, int heads, int hd, float theta,
                   int rot_dims, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
