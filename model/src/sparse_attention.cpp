#include "ztune/model/sparse_attention.hpp"

#include <algorithm>

namespace ztune {

namespace {

// Row r's blocks in DeepSpeed's local windows (fixed, variable): the window
// containing r starts at ⌊r/L⌋·L and the causal window covers start..r.
std::int64_t window_start(std::int64_t r, std::int64_t L) { return r / L * L; }

// fixed (unidirectional): row r holds its local causal window plus one global
// column per earlier window (the window's last G blocks; DeepSpeed's
// first_global_block_idx = L − G with one pattern). A window's global columns
// lie inside that window, so for later rows they are new blocks; for rows of
// the window itself they are already local (or in the future). The short last
// window's global column (sparsity_config.py: start = min(end + L − G, nb − G))
// lies in that window too, so it adds nothing to other rows.
double fixed_blocks(std::int64_t nb, const SparseLayoutParams& prm) {
  const std::int64_t L = prm.local_window_blocks;
  const std::int64_t G = prm.fixed_global_blocks;
  double n = 0;
  for (std::int64_t r = 0; r < nb; ++r) {
    const std::int64_t start = window_start(r, L);
    n += static_cast<double>(r - start + 1) + static_cast<double>((start / L) * G);
  }
  return n;
}

// variable (unidirectional, no random blocks): local windows as fixed, plus
// global column 0 (global_block_indices [0]) for rows outside the first window.
double variable_blocks(std::int64_t nb, const SparseLayoutParams& prm) {
  const std::int64_t L = prm.local_window_blocks;
  double n = 0;
  for (std::int64_t r = 0; r < nb; ++r) {
    const std::int64_t start = window_start(r, L);
    n += static_cast<double>(r - start + 1) + (start > 0 ? 1.0 : 0.0);
  }
  return n;
}

// Blocks of row r after tril for a sliding window of w blocks each side and
// global blocks [0, G) as rows and columns: columns max(0, r−w)..r, the
// global columns below that, and the whole causal row when r is global.
std::int64_t window_global_blocks(std::int64_t r, std::int64_t w, std::int64_t G) {
  if (r < G) return r + 1;  // a global row attends to every earlier block
  const std::int64_t lo = std::max<std::int64_t>(0, r - w);
  return (r - lo + 1) + std::min(G, lo);
}

double longformer_blocks(std::int64_t nb, const SparseLayoutParams& prm) {
  const std::int64_t w = prm.sliding_window_blocks / 2;
  double n = 0;
  for (std::int64_t r = 0; r < nb; ++r) n += static_cast<double>(window_global_blocks(r, w, prm.global_blocks));
  return n;
}

// bigbird: longformer's window and global blocks plus `random_blocks` columns
// sampled without replacement from [0, r] (set_random_layout). The expected
// number of those that land on a free column: k·free/(r + 1), capped by free.
double bigbird_blocks(std::int64_t nb, const SparseLayoutParams& prm) {
  const std::int64_t w = prm.sliding_window_blocks / 2;
  double n = 0;
  for (std::int64_t r = 0; r < nb; ++r) {
    const auto set = static_cast<double>(window_global_blocks(r, w, prm.global_blocks));
    const double row = static_cast<double>(r + 1);
    const double k = std::min<double>(prm.random_blocks, row);
    n += set + k * (row - set) / row;
  }
  return n;
}

}  // namespace

double sparse_layout_blocks(SparseLayout layout, std::int64_t nb, const SparseLayoutParams& prm) {
  if (nb <= 0) return 0;
  switch (layout) {
    case SparseLayout::none: return static_cast<double>(nb) * static_cast<double>(nb);
    case SparseLayout::fixed: return fixed_blocks(nb, prm);
    case SparseLayout::bigbird: return bigbird_blocks(nb, prm);
    case SparseLayout::longformer: return longformer_blocks(nb, prm);
    case SparseLayout::variable: return variable_blocks(nb, prm);
  }
  return static_cast<double>(nb) * static_cast<double>(nb);
}

double attention_density(const Transformer& m, const Plan& p) {
  if (p.sparse_attention == SparseLayout::none || p.sparse_block <= 0) return 1.0;
  const std::int64_t nb = m.seq_len / p.sparse_block;
  if (nb <= 0) return 1.0;
  const double full = static_cast<double>(nb) * static_cast<double>(nb);
  return sparse_layout_blocks(p.sparse_attention, nb) / full;
}

}  // namespace ztune
