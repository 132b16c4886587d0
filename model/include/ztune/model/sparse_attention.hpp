#pragma once
// Block-sparse attention in the cost model: the fraction of the s×s score
// matrix a layout computes, from which attention FLOPs, score memory and
// softmax traffic scale (DeepSpeed Sparse Attention, Microsoft 2020; its
// layouts in deepspeed/ops/sparse_attention/sparsity_config.py).
//
// ztune trains decoder-only (causal) models, so every layout is DeepSpeed's
// `attention='unidirectional'` variant, with one layout for all heads and
// DeepSpeed's class defaults (the values `ztune export` writes into
// ds_config.json's "sparse_attention" section):
//   fixed       Child et al. 2019 "Generating Long Sequences with Sparse
//               Transformers" fixed pattern: local windows of 4 blocks
//               (lower-triangular inside the window) + the last block of
//               every window as a global column for all later rows.
//   bigbird     Zaheer et al. 2020 "Big Bird": a sliding window of 3 blocks,
//               1 global block (index 0, row and column), 1 random block per
//               row drawn from the blocks at or before the row; then tril.
//   longformer  Beltagy et al. 2020 "Longformer", block version (DeepSpeed's
//               BSLongformer): a sliding window of 3 blocks + global block 0
//               (row and column); then tril.
//   variable    DeepSpeed's Variable: local windows [4] (the last size
//               repeats), global column 0, no random blocks.
// Dense attention in the cost model computes the full s×s product before the
// causal mask (as Megatron's unfused kernel does), so density is measured
// against nb² blocks, nb = s / block: a causal dense layout would be ≈ 1/2.
#include <cstdint>

#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

/// DeepSpeed's defaults for each layout (sparsity_config.py constructors).
struct SparseLayoutParams {
  int local_window_blocks = 4;   // fixed: num_local_blocks; variable: local_window_blocks[0]
  int fixed_global_blocks = 1;   // fixed: num_global_blocks (the last of each window)
  int sliding_window_blocks = 3; // bigbird, longformer: num_sliding_window_blocks (w = 3/2 = 1 each side)
  int global_blocks = 1;         // bigbird: num_global_blocks from index 0; longformer/variable: indices [0]
  int random_blocks = 1;         // bigbird: num_random_blocks per row (variable: 0)
};
inline constexpr SparseLayoutParams kDeepSpeedSparseDefaults{};

/// Non-zero blocks of the causal layout over nb×nb blocks. BigBird's random
/// block is counted by its expectation: a column drawn uniformly from
/// [0, row] adds a block with probability (free columns)/(row + 1). Exact for
/// the other layouts. SparseLayout::none gives nb² (dense, unmasked).
[[nodiscard]] double sparse_layout_blocks(SparseLayout layout, std::int64_t nb,
                                          const SparseLayoutParams& prm = kDeepSpeedSparseDefaults);

/// Fraction of the full s×s score matrix computed: blocks / nb². 1 when the
/// plan uses dense attention. The plan's block must divide s (check_plan).
[[nodiscard]] double attention_density(const Transformer& m, const Plan& p);

}  // namespace ztune
