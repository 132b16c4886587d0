#pragma once
// Block-sparse causal multi-head self-attention on the device (issue 10): the CPU
// reference kernels/sparse_attention.hpp (DeepSpeed Sparse Attention: SDD QKᵀ,
// block-sparse softmax, DSD ·V) with the same tensors — qkv [B,T,3C], out [B,T,C]
// in T ∈ {float, __half, __nv_bfloat16} — and the same saved probabilities
// att [B,NH,nnz,blk,blk] in the layout's CSR order, kept in fp32 for every T.
// A simple kernel, not a tuned one: one thread block per (batch, head, query
// block) that visits only the layout's blocks of its row, fp32 arithmetic
// (global-memory operands, no tensor cores). The causal mask applies element by
// element inside a block, as on the CPU. Forward writes; backward accumulates
// (+=) into dqkv.
//
// The layout (make_block_layout) lives on the device as DeviceBlockLayout: the
// caller copies row_ptr [nb+1] and cols [nnz] once and keeps them alive.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace ztune::kernels::cuda {

/// A BlockLayout whose CSR arrays are device pointers.
struct DeviceBlockLayout {
  const int* row_ptr = nullptr;  // [blocks + 1]
  const int* cols = nullptr;     // [nnz]
  int blocks = 0;                // nb = T / block
  int block = 0;                 // tokens per block side
  int nnz = 0;
};

/// att [B,NH,nnz,blk,blk] elements (also the backward's fp32 workspace size).
std::size_t sparse_attention_att_elems(int b, int nh, const DeviceBlockLayout& layout);

template <typename T>
void sparse_attention_forward(T* out, float* att, const T* qkv, int b, int t, int c, int nh,
                              const DeviceBlockLayout& layout, cudaStream_t stream);

/// dqkv += ∂L/∂qkv given dout and the forward's att; `workspace` holds
/// sparse_attention_att_elems floats (the scores' gradients dS).
template <typename T>
void sparse_attention_backward(T* dqkv, float* workspace, const T* dout, const T* qkv, const float* att, int b,
                               int t, int c, int nh, const DeviceBlockLayout& layout, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
