#pragma once
// LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) over the last
// dimension, one warp per row, fp32 statistics. Mirrors kernels/layernorm.hpp
// (eps = the model's norm_eps; GPT-2's is kLayerNormEps): y = (x − μ)·rstd·w + b; RMSNorm:
// y = x·rstd·w with rstd = 1/sqrt(mean(x²) + eps). mean/rstd [n] are saved for
// backward. Backward accumulates (+=) into dinp and into the fp32 dweight/dbias.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace ztune::kernels::cuda {

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int n, int c,
                       float eps, cudaStream_t stream);
/// dinp += ∂L/∂x; dweight += Σ_rows dout·x̂; dbias += Σ_rows dout.
template <typename T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int n, int c, cudaStream_t stream);

template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int n, int c, float eps, cudaStream_t stream);
/// dinp += rstd·(dx̂ − x̂·mean(dx̂·x̂)) with dx̂ = dout·w; dweight += Σ_rows dout·x̂.
template <typename T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int n,
                      int c, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
