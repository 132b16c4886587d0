#pragma once
// Causal multi-head self-attention (Vaswani et al. 2017), softmax in fp32.
// qkv[B,T,3C] holds Q | K | V blocks of C = NH·hd channels each (GPT-2's c_attn
// output; a tensor-parallel rank passes its local heads: C = C/tp, NH = NH/tp).
// out[B,T,C] = softmax(QKᵀ/√hd + causal mask)·V per head; att[B,NH,T,T] keeps the
// probabilities for backward (zero above the diagonal). Selective recomputation
// drops att and calls attention_forward again before backward (Korthikanti 2022).
// `window` > 0: sliding-window attention (Mistral): query i attends keys
// max(0, i − window + 1) .. i only; 0 = the whole causal prefix.
// See conventions.hpp (backward +=).
namespace ztune::kernels {
class ThreadPool;
namespace cpu {

void attention_forward(float* out, float* att, const float* qkv, int b, int t, int c, int nh, ThreadPool* pool,
                       int window = 0);
/// dqkv += ∂L/∂qkv given dout and the saved probabilities att.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int b, int t, int c,
                        int nh, ThreadPool* pool, int window = 0);

/// FlashAttention's memory contract (Dao et al. 2022, Alg. 1-2; Dao 2023 §3): forward keeps only
/// lse[B,NH,T] (log Σ_j≤i exp(q_i·k_j/√hd)); backward recomputes the probabilities from q, k and lse
/// and uses D_i = dO_i·O_i for the softmax gradient, so nothing T×T is stored between the passes.
/// lse has the layout and meaning of cuda::flash_attention_forward's (natural log of the scaled
/// scores' exponential sum, row i of head h of batch bi at lse[(bi·NH + h)·T + i]).
/// Extra memory: one scratch of 64×T floats per thread while it works on a head (attention_flash_cpu.cpp).
/// Example: flash_attention_forward(out, lse, qkv, 2, 1024, 256, 4, &pool);
void flash_attention_forward(float* out, float* lse, const float* qkv, int b, int t, int c, int nh, ThreadPool* pool,
                             int window = 0);
/// dqkv += ∂L/∂qkv from dout, the forward's out and lse.
void flash_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                              int b, int t, int c, int nh, ThreadPool* pool, int window = 0);

}  // namespace cpu
}  // namespace ztune::kernels
