#pragma once
// Block layouts of block-sparse attention, built the way DeepSpeed builds them
// (deepspeed/ops/sparse_attention/sparsity_config.py, `make_layout`) with
// attention='unidirectional' and its class defaults, one layout for all heads:
//   fixed       local windows of 4 blocks (causal inside) + the last block of
//               each window as a global column (Child et al. 2019);
//   bigbird     1 random block per row from [0, row], a sliding window of 3
//               blocks, global block 0 as row and column, then tril (Zaheer
//               et al. 2020, "Big Bird");
//   longformer  a sliding window of 3 blocks + global block 0, then tril
//               (Beltagy et al. 2020, block version: DeepSpeed BSLongformer);
//   variable    local windows [4] + global column 0 (DeepSpeed Variable);
//   dense       every block at or below the diagonal (causal dense attention).
// Inside a block the kernels apply the causal mask element by element, so a
// layout's diagonal block attends to tokens j <= i only.
#include <cstdint>
#include <vector>

namespace ztune::kernels {

enum class BlockPattern : std::uint8_t { dense, fixed, bigbird, longformer, variable };

/// Non-zero blocks of an nb×nb block matrix in compressed sparse rows.
struct BlockLayout {
  int blocks = 0;             // nb = seq / block
  int block = 0;              // tokens per block side
  std::vector<int> row_ptr;   // [nb + 1]
  std::vector<int> cols;      // [nnz], ascending within a row
  [[nodiscard]] int nnz() const { return static_cast<int>(cols.size()); }
  /// Whether block (r, c) is present.
  [[nodiscard]] bool has(int r, int c) const;
};

/// The layout of `pattern` for `seq` tokens in blocks of `block` (which must
/// divide seq). `seed` drives BigBird's random blocks (same seed, same layout
/// on every rank).
BlockLayout make_block_layout(BlockPattern pattern, int seq, int block, std::uint64_t seed = 0);

}  // namespace ztune::kernels
