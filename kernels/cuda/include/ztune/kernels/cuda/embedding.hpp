#pragma once
// Embedding lookup of a (possibly vocabulary-sharded) table on the device; mirrors
// kernels/embedding.hpp: the shard holds rows [row_begin, row_begin + rows); ids
// outside it give zero rows (Megatron's VocabParallelEmbedding). ids are device
// int32. Forward writes, backward accumulates (+=) into an fp32 table gradient.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ztune::kernels::cuda {

template <typename T>
void embedding_forward(T* out, const std::int32_t* ids, const T* table, int n, int c, int row_begin, int rows,
                       cudaStream_t stream);
/// dtable[ids[i] − row_begin] += dout[i] (fp32 atomics: repeated ids add in any order).
template <typename T>
void embedding_backward(float* dtable, const T* dout, const std::int32_t* ids, int n, int c, int row_begin, int rows,
                        cudaStream_t stream);

}  // namespace ztune::kernels::cuda
