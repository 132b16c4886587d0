#pragma once
// Causal multi-head self-attention on the device, qkv [B,T,3C] as kernels/attention.hpp
// (Q | K | V blocks of C = NH·hd channels), out [B,T,C], softmax in fp32.
//
// Two implementations:
//  - flash_attention_*: fused and memory-efficient in the FlashAttention manner
//    (Dao et al. 2022, Alg. 1 forward with the online softmax; Dao 2023 (FA-2) for the
//    backward's D_i = rowsum(dO∘O)): scores never reach global memory; forward saves
//    only lse [B,NH,T] = log Σ_j exp(s_ij); backward recomputes the probabilities.
//    SIMT fp32 arithmetic on any storage type (no tensor-core instructions, so it
//    builds and runs on sm_70). Head dimensions 64 and 128.
//  - attention_forward/backward: the unfused form the executor's Backend interface
//    asks for (the probabilities att [B,NH,T,T] are stored): per-head strided-batched
//    cuBLASLt GEMMs (tensor cores for 16-bit types) around a causal-softmax kernel.
// Forward writes; backward accumulates (+=) into dqkv.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace ztune::kernels::cuda {

class Gemm;

template <typename T>
void flash_attention_forward(T* out, float* lse, const T* qkv, int b, int t, int c, int nh, cudaStream_t stream);
/// dqkv += ∂L/∂qkv; delta is a workspace of B·NH·T floats; out and lse from the forward.
template <typename T>
void flash_attention_backward(T* dqkv, float* delta, const T* dout, const T* qkv, const T* out, const float* lse,
                              int b, int t, int c, int nh, cudaStream_t stream);

/// Elements of T the unfused forward and backward need as workspace.
std::size_t attention_workspace_elems(int b, int t, int c, int nh);
template <typename T>
void attention_forward(Gemm& gemm, T* out, T* att, const T* qkv, T* workspace, int b, int t, int c, int nh,
                       cudaStream_t stream);
template <typename T>
void attention_backward(Gemm& gemm, T* dqkv, const T* dout, const T* qkv, const T* att, T* workspace, int b, int t,
                        int c, int nh, cudaStream_t stream);

// The unfused path's pieces (exposed for the benchmark and the tests).
/// dst [B,NH,T,hd] ← src [B,T,·] whose row r of head h starts at src + r·src_stride + h·hd.
template <typename T>
void to_heads(T* dst, const T* src, long src_stride, int b, int t, int nh, int hd, cudaStream_t stream);
/// dst [B,T,·] (row stride dst_stride) ← src [B,NH,T,hd]; `accumulate` adds instead of writing.
template <typename T>
void from_heads(T* dst, long dst_stride, const T* src, int b, int t, int nh, int hd, bool accumulate,
                cudaStream_t stream);
/// att [rows = B·NH·T, T] scaled scores → causal softmax probabilities in place (0 above the diagonal).
template <typename T>
void causal_softmax_forward(T* att, int bh, int t, cudaStream_t stream);
/// datt ← att ∘ (datt − rowsum(att ∘ datt)) in place (0 above the diagonal).
template <typename T>
void causal_softmax_backward(T* datt, const T* att, int bh, int t, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
