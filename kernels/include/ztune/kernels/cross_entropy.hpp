#pragma once
// Softmax cross-entropy over the vocabulary, split into pieces so that the same
// kernels serve one rank holding all V logits and a tensor-parallel rank holding
// the vocabulary shard [vocab_begin, vocab_begin + v) (Megatron's
// vocab_parallel_cross_entropy): the caller reduces row_max (max) and row_sum and
// target_logit (sum) over the group between the steps. Softmax is computed in fp32
// with the max subtracted. loss_i = log Σ_j exp(l_ij − m_i) + m_i − l_i,target.
// See conventions.hpp (backward +=).
#include <cstdint>

namespace ztune::kernels::cpu {

/// row_max[n] = max_j logits[i, j] over the local shard.
void cross_entropy_row_max(float* row_max, const float* logits, int n, int v);
/// row_sum[n] = Σ_j exp(logits[i, j] − row_max[i]) over the local shard.
void cross_entropy_row_sumexp(float* row_sum, const float* logits, const float* row_max, int n, int v);
/// target_logit[n] = logits[i, target_i − vocab_begin] if the target is in the shard, else 0.
void cross_entropy_target_logit(float* target_logit, const float* logits, const std::int32_t* targets, int n, int v,
                                int vocab_begin);
/// losses[n] from the group-reduced statistics.
void cross_entropy_loss(float* losses, const float* row_max, const float* row_sum, const float* target_logit, int n);
/// dlogits[i, j] += dloss[i]·(softmax_ij − [j = target_i − vocab_begin]).
void cross_entropy_backward(float* dlogits, const float* logits, const float* row_max, const float* row_sum,
                            const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin);
/// The whole forward on one shard holding all of the vocabulary (vocab_begin = 0).
void cross_entropy_forward(float* losses, const float* logits, const std::int32_t* targets, int n, int v);

}  // namespace ztune::kernels::cpu
