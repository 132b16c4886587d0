#pragma once
// Memory-bound CUDA kernels: residual adds, scaling, bias (and the fused
// bias + residual of a projection's output), bias gradient, Σx², casts.
// Mirrors kernels/elementwise.hpp (CPU) with a storage type T ∈ {float, __half,
// __nv_bfloat16} and a trailing stream; arithmetic is fp32. Convention
// (conventions.hpp): forward kernels write (=), backward kernels accumulate (+=).
// Every launcher: explicit stream, preconditions checked, CEIL_DIV grid, launch, error check.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace ztune::kernels::cuda {

/// out = a + b (out may alias a or b).
template <typename T>
void add(T* out, const T* a, const T* b, long n, cudaStream_t stream);
/// dst += src.
template <typename T>
void accumulate(T* dst, const T* src, long n, cudaStream_t stream);
/// x *= s.
template <typename T>
void scale(T* x, float s, long n, cudaStream_t stream);
/// x[i, j] += bias[j] for x [n, c].
template <typename T>
void add_bias(T* x, const T* bias, int n, int c, cudaStream_t stream);
/// out[i, j] = x[i, j] + bias[j] + residual[i, j]: a projection's bias and the
/// residual add in one pass (out may alias x or residual; bias may be null).
template <typename T>
void bias_residual_forward(T* out, const T* x, const T* bias, const T* residual, int n, int c, cudaStream_t stream);
/// dbias[j] += Σ_i dout[i, j] (fp32 accumulator; row chunks meet in fp32 atomics,
/// so the last bits may differ between runs when n > 256).
template <typename T>
void bias_backward(float* dbias, const T* dout, int n, int c, cudaStream_t stream);
/// *result += Σ x² over n elements; result is one device double (the global norm sums
/// millions of squares, as the CPU reference does in double).
template <typename T>
void sum_squares(double* result, const T* x, long n, cudaStream_t stream);
/// out[i] = (To) in[i], round to nearest even for the 16-bit types. Instantiated for
/// float → {float, __half, __nv_bfloat16} and {__half, __nv_bfloat16} → float.
template <typename From, typename To>
void cast(To* out, const From* in, long n, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
