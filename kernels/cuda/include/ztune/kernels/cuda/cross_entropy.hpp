#pragma once
// Softmax cross-entropy on the device. The pieces mirror kernels/cross_entropy.hpp
// one for one (vocabulary-sharded: the caller reduces row_max by max and row_sum,
// target_logit by sum over the tensor-parallel group between them). The fused
// kernel does forward and backward in one pass over a row for an unsharded
// vocabulary (llm.c's fused_classifier): it computes the loss and WRITES
// dlogits = dloss·(softmax − onehot), so dlogits may be the logits buffer itself
// (the LM head's largest activation is overwritten in place, never stored twice).
// Statistics are fp32 whatever the logits' type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ztune::kernels::cuda {

template <typename T>
void ce_row_max(float* row_max, const T* logits, int n, int v, cudaStream_t stream);
template <typename T>
void ce_row_sumexp(float* row_sum, const T* logits, const float* row_max, int n, int v, cudaStream_t stream);
template <typename T>
void ce_target_logit(float* target_logit, const T* logits, const std::int32_t* targets, int n, int v, int vocab_begin,
                     cudaStream_t stream);
void ce_loss(float* losses, const float* row_max, const float* row_sum, const float* target_logit, int n,
             cudaStream_t stream);
/// dlogits[i, j] += dloss[i]·(softmax_ij − [j = target_i − vocab_begin]).
template <typename T>
void ce_backward(T* dlogits, const T* logits, const float* row_max, const float* row_sum, const std::int32_t* targets,
                 const float* dloss, int n, int v, int vocab_begin, cudaStream_t stream);
/// losses[i] = −log softmax(logits_i)[target_i]; dlogits (=, may alias logits) = dloss·(softmax − onehot).
template <typename T>
void ce_fused_forward_backward(float* losses, T* dlogits, const T* logits, const std::int32_t* targets, float dloss,
                               int n, int v, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
