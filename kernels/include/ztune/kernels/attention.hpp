#pragma once
// Causal multi-head self-attention (Vaswani et al. 2017), softmax in fp32.
// qkv[B,T,3C] holds Q | K | V blocks of C = NH·hd channels each (GPT-2's c_attn
// output; a tensor-parallel rank passes its local heads: C = C/tp, NH = NH/tp).
// out[B,T,C] = softmax(QKᵀ/√hd + causal mask)·V per head; att[B,NH,T,T] keeps the
// probabilities for backward (zero above the diagonal). Selective recomputation
// drops att and calls attention_forward again before backward (Korthikanti 2022).
// See conventions.hpp (backward +=).
namespace ztune::kernels {
class ThreadPool;
namespace cpu {

void attention_forward(float* out, float* att, const float* qkv, int b, int t, int c, int nh, ThreadPool* pool);
/// dqkv += ∂L/∂qkv given dout and the saved probabilities att.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int b, int t, int c,
                        int nh, ThreadPool* pool);

}  // namespace cpu
}  // namespace ztune::kernels
