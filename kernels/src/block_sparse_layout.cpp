#include "ztune/kernels/block_sparse_layout.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>

namespace ztune::kernels {

namespace {

constexpr int kLocalBlocks = 4;          // fixed num_local_blocks, variable local_window_blocks [4]
constexpr int kFixedGlobalBlocks = 1;    // fixed num_global_blocks
constexpr int kSlidingWindowBlocks = 3;  // bigbird / longformer num_sliding_window_blocks
constexpr int kGlobalBlocks = 1;         // bigbird num_global_blocks; longformer / variable indices [0]
constexpr int kRandomBlocks = 1;         // bigbird num_random_blocks

// Dense nb×nb mask, filled as sparsity_config.py fills its layout tensor.
class Mask {
 public:
  explicit Mask(int nb) : nb_(nb), cells_(static_cast<std::size_t>(nb) * static_cast<std::size_t>(nb), 0) {}
  void set(int r, int c) { cells_[index(r, c)] = 1; }
  void set_rows_cols(int r0, int r1, int c0, int c1) {
    for (int r = std::max(0, r0); r < std::min(r1, nb_); ++r)
      for (int c = std::max(0, c0); c < std::min(c1, nb_); ++c) set(r, c);
  }
  void tril() {
    for (int r = 0; r < nb_; ++r)
      for (int c = r + 1; c < nb_; ++c) cells_[index(r, c)] = 0;
  }
  [[nodiscard]] BlockLayout to_layout(int block) const {
    BlockLayout l;
    l.blocks = nb_;
    l.block = block;
    l.row_ptr.assign(static_cast<std::size_t>(nb_) + 1, 0);
    for (int r = 0; r < nb_; ++r) {
      for (int c = 0; c < nb_; ++c)
        if (cells_[index(r, c)] != 0) l.cols.push_back(c);
      l.row_ptr[static_cast<std::size_t>(r) + 1] = static_cast<int>(l.cols.size());
    }
    return l;
  }

 private:
  [[nodiscard]] std::size_t index(int r, int c) const {
    return static_cast<std::size_t>(r) * static_cast<std::size_t>(nb_) + static_cast<std::size_t>(c);
  }
  int nb_;
  std::vector<std::uint8_t> cells_;
};

// set_local_layout (fixed and variable with one repeated window size), unidirectional.
void local_windows(Mask& m, int nb, int window) {
  for (int i = 0; i < nb; i += window) {
    const int end = std::min(i + window, nb);
    for (int row = i; row < end; ++row) m.set_rows_cols(row, row + 1, i, row + 1);
  }
}

// FixedSparsityConfig.set_global_layout, h = 0, unidirectional, no horizontal.
void fixed_global(Mask& m, int nb) {
  const int first = kLocalBlocks - kFixedGlobalBlocks;
  const int end = nb - nb % kLocalBlocks;
  for (int i = first; i < end; i += kLocalBlocks) m.set_rows_cols(i, nb, i, i + kFixedGlobalBlocks);
  if (end < nb) {
    const int start = std::min(end + first, nb - kFixedGlobalBlocks);
    m.set_rows_cols(start, nb, start, start + kFixedGlobalBlocks);
  }
}

void sliding_window(Mask& m, int nb) {
  const int w = kSlidingWindowBlocks / 2;
  for (int row = 0; row < nb; ++row) m.set_rows_cols(row, row + 1, row - w, row + w + 1);
}

}  // namespace

bool BlockLayout::has(int r, int c) const {
  const auto b = cols.begin() + row_ptr[static_cast<std::size_t>(r)];
  const auto e = cols.begin() + row_ptr[static_cast<std::size_t>(r) + 1];
  return std::binary_search(b, e, c);
}

BlockLayout make_block_layout(BlockPattern pattern, int seq, int block, std::uint64_t seed) {
  if (block <= 0 || seq % block != 0)
    throw std::invalid_argument("make_block_layout: block " + std::to_string(block) + " does not divide seq " +
                                std::to_string(seq));
  const int nb = seq / block;
  Mask m(nb);
  switch (pattern) {
    case BlockPattern::dense:
      m.set_rows_cols(0, nb, 0, nb);
      m.tril();
      break;
    case BlockPattern::fixed:
      local_windows(m, nb, kLocalBlocks);
      fixed_global(m, nb);
      break;
    case BlockPattern::bigbird: {
      std::mt19937_64 rng(seed);
      for (int row = 0; row < nb; ++row) {
        // random.sample(range(0, row + 1), k): k distinct columns at or before the row.
        std::vector<int> pool(static_cast<std::size_t>(row) + 1);
        for (int c = 0; c <= row; ++c) pool[static_cast<std::size_t>(c)] = c;
        std::shuffle(pool.begin(), pool.end(), rng);
        for (int k = 0; k < std::min(kRandomBlocks, row + 1); ++k) m.set(row, pool[static_cast<std::size_t>(k)]);
      }
      sliding_window(m, nb);
      m.set_rows_cols(0, kGlobalBlocks, 0, nb);
      m.set_rows_cols(0, nb, 0, kGlobalBlocks);
      m.tril();
      break;
    }
    case BlockPattern::longformer:
      sliding_window(m, nb);
      m.set_rows_cols(0, kGlobalBlocks, 0, nb);
      m.set_rows_cols(0, nb, 0, kGlobalBlocks);
      m.tril();
      break;
    case BlockPattern::variable:
      local_windows(m, nb, kLocalBlocks);
      m.set_rows_cols(0, nb, 0, kGlobalBlocks);  // global column 0 from row idx = 0
      break;
  }
  return m.to_layout(block);
}

}  // namespace ztune::kernels
