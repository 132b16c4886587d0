#pragma once
// Embedding lookup of a (possibly vocabulary-sharded) table: the shard holds rows
// [row_begin, row_begin + rows) of the full table; ids outside it give zero rows,
// so summing the shards' outputs over the tensor-parallel group gives the full
// lookup (Megatron's VocabParallelEmbedding). See conventions.hpp (backward +=).
#include <cstdint>

namespace ztune::kernels::cpu {

/// out[n,C] = table[ids[i] - row_begin] or 0.
void embedding_forward(float* out, const std::int32_t* ids, const float* table, int n, int c, int row_begin,
                       int rows);
/// dtable[ids[i] - row_begin] += dout[i] for ids inside the shard.
void embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, int n, int c, int row_begin,
                        int rows);

}  // namespace ztune::kernels::cpu
