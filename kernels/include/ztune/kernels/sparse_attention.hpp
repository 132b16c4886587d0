#pragma once
// Block-sparse causal multi-head self-attention (DeepSpeed Sparse Attention,
// 2020: SDD QKᵀ, block-sparse softmax, DSD ·V), the CPU reference. Same
// tensors as attention.hpp — qkv[B,T,3C] (Q | K | V), out[B,T,C] — but only the
// layout's blocks of the T×T scores exist: att[B,NH,nnz,blk,blk] keeps the
// probabilities of each non-zero block in the layout's CSR order. Inside a
// block the causal mask applies element by element (key j attends only when
// j <= query i); a row's softmax runs over all of its blocks' unmasked
// entries. With BlockPattern::dense this is exactly attention.hpp's causal
// attention. See conventions.hpp (backward +=).
#include "ztune/kernels/block_sparse_layout.hpp"

namespace ztune::kernels {
class ThreadPool;
namespace cpu {

void sparse_attention_forward(float* out, float* att, const float* qkv, int b, int t, int c, int nh,
                              const BlockLayout& layout, ThreadPool* pool);
/// dqkv += ∂L/∂qkv given dout and the saved block probabilities att.
void sparse_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int b, int t,
                               int c, int nh, const BlockLayout& layout, ThreadPool* pool);

}  // namespace cpu
}  // namespace ztune::kernels
