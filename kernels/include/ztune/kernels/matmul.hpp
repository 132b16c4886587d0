#pragma once
// Linear layer in Hugging Face GPT-2's Conv1D layout: weight [C, OC] (in × out), so
// out[N,OC] = inp[N,C] · weight[C,OC] + bias[OC]. See conventions.hpp (backward +=).
namespace ztune::kernels {
class ThreadPool;
namespace cpu {

/// bias may be null.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int n, int c, int oc,
                    ThreadPool* pool);
/// dinp += dout·weightᵀ (dinp may be null); dweight += inpᵀ·dout; dbias += Σ_rows dout (may be null).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int n, int c, int oc, ThreadPool* pool);

}  // namespace cpu
}  // namespace ztune::kernels
