// Block-sparse attention in the cost model. Oracles: block counts traced by
// hand from DeepSpeed's sparsity_config.py for small layouts; a brute-force
// builder written here line by line after sparsity_config.py (set the blocks
// of each pattern into an nb×nb mask, then tril), compared for every nb up to
// 160; and the closed forms of the Korthikanti activation and FLOP terms the
// density scales.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "ztune/vocab/catalog.hpp"
#include "ztune/model/flops.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/sparse_attention.hpp"

using namespace ztune;

namespace {

// sparsity_config.py, unidirectional, one layout for all heads, class defaults.
struct Mask {
  explicit Mask(int nb) : n(nb), cells(static_cast<std::size_t>(nb) * static_cast<std::size_t>(nb), 0) {}
  int n;
  std::vector<std::uint8_t> cells;
  void set(int r, int c) { cells[static_cast<std::size_t>(r) * static_cast<std::size_t>(n) + static_cast<std::size_t>(c)] = 1; }
  void tril() {
    for (int r = 0; r < n; ++r)
      for (int c = r + 1; c < n; ++c) cells[static_cast<std::size_t>(r) * static_cast<std::size_t>(n) + static_cast<std::size_t>(c)] = 0;
  }
  [[nodiscard]] double count() const { return static_cast<double>(std::count(cells.begin(), cells.end(), 1)); }
};

// FixedSparsityConfig(num_local_blocks=4, num_global_blocks=1, 'unidirectional').
Mask fixed_mask(int nb) {
  Mask m(nb);
  const int L = 4, G = 1;
  for (int i = 0; i < nb; i += L) {  // set_local_layout
    const int end = std::min(i + L, nb);
    for (int row = i; row < end; ++row)
      for (int col = i; col < row + 1; ++col) m.set(row, col);
  }
  const int first = L - G;  // set_global_layout, h = 0
  const int end = nb - nb % L;
  for (int i = first; i < end; i += L)
    for (int row = i; row < nb; ++row)
      for (int col = i; col < i + G; ++col) m.set(row, col);
  if (end < nb) {
    const int start = std::min(end + first, nb - G);
    for (int row = start; row < nb; ++row)
      for (int col = start; col < start + G; ++col) m.set(row, col);
  }
  return m;
}

// Sliding window (num_sliding_window_blocks=3) and global index 0 as row and column, then tril.
Mask longformer_mask(int nb) {
  Mask m(nb);
  const int w = 3 / 2;
  for (int row = 0; row < nb; ++row)
    for (int col = std::max(0, row - w); col < std::min(row + w + 1, nb); ++col) m.set(row, col);
  for (int k = 0; k < nb; ++k) { m.set(0, k); m.set(k, 0); }
  m.tril();
  return m;
}

// BigBird: random (1 per row from [0, row]), sliding window 3, global 1, tril.
Mask bigbird_mask(int nb, std::mt19937& rng) {
  Mask m(nb);
  for (int row = 0; row < nb; ++row) {
    std::uniform_int_distribution<int> pick(0, row);
    m.set(row, pick(rng));
  }
  const int w = 3 / 2;
  for (int row = 0; row < nb; ++row)
    for (int col = std::max(0, row - w); col < std::min(row + w + 1, nb); ++col) m.set(row, col);
  for (int k = 0; k < nb; ++k) { m.set(0, k); m.set(k, 0); }
  m.tril();
  return m;
}

// Variable: local windows [4] repeated, global column 0 from row 0 (unidirectional: first_row = idx).
Mask variable_mask(int nb) {
  Mask m(nb);
  for (int i = 0; i < nb; i += 4) {
    const int end = std::min(i + 4, nb);
    for (int row = i; row < end; ++row)
      for (int col = i; col < row + 1; ++col) m.set(row, col);
  }
  for (int row = 0; row < nb; ++row) m.set(row, 0);
  return m;
}

}  // namespace

TEST_CASE("sparse layouts: block counts traced by hand for 8 blocks", "[model][sparse]") {
  // fixed: two windows of 4 lower-triangular (10 each) + global column 3 for rows 4..7.
  CHECK(sparse_layout_blocks(SparseLayout::fixed, 8) == 24);
  // longformer: row 0 one block, row 1 two, rows 2..7 three (r−1, r, global 0).
  CHECK(sparse_layout_blocks(SparseLayout::longformer, 8) == 21);
  // variable: the two windows (20) + global column 0 for rows 4..7.
  CHECK(sparse_layout_blocks(SparseLayout::variable, 8) == 24);
  // bigbird: longformer's 21 + the random block's chance of a free column,
  // (r−2)/(r+1) for rows 3..7.
  CHECK(sparse_layout_blocks(SparseLayout::bigbird, 8) ==
        Approx(21 + 1.0 / 4 + 2.0 / 5 + 3.0 / 6 + 4.0 / 7 + 5.0 / 8).epsilon(1e-12));
  CHECK(sparse_layout_blocks(SparseLayout::none, 8) == 64);
}

TEST_CASE("sparse layouts: counts equal a mask built after DeepSpeed's sparsity_config.py", "[model][sparse]") {
  for (int nb = 1; nb <= 160; ++nb) {
    INFO("nb = " << nb);
    CHECK(sparse_layout_blocks(SparseLayout::fixed, nb) == fixed_mask(nb).count());
    CHECK(sparse_layout_blocks(SparseLayout::longformer, nb) == longformer_mask(nb).count());
    CHECK(sparse_layout_blocks(SparseLayout::variable, nb) == variable_mask(nb).count());
  }
  // BigBird's random block: the expectation against the mean over 400 draws
  // (the count's spread is below √nb, so the mean is within 0.5 blocks).
  std::mt19937 rng(12345);
  for (int nb : {16, 64, 128}) {
    double sum = 0;
    const int draws = 400;
    for (int i = 0; i < draws; ++i) sum += bigbird_mask(nb, rng).count();
    CHECK(sparse_layout_blocks(SparseLayout::bigbird, nb) == Approx(sum / draws).margin(0.5));
  }
}

TEST_CASE("sparse layouts: asymptotic densities", "[model][sparse]") {
  // bigbird ≈ 3 window/global blocks + ~1 random block per row: density·nb → 4;
  // longformer → 3; fixed → 1/8 (a global column every 4 blocks, causal half).
  const std::int64_t nb = 4096;
  const double full = static_cast<double>(nb) * nb;
  CHECK(sparse_layout_blocks(SparseLayout::bigbird, nb) / nb == Approx(4.0).epsilon(0.01));
  CHECK(sparse_layout_blocks(SparseLayout::longformer, nb) / nb == Approx(3.0).epsilon(0.001));
  CHECK(sparse_layout_blocks(SparseLayout::fixed, nb) / full == Approx(0.125).epsilon(0.01));
  CHECK(sparse_layout_blocks(SparseLayout::variable, nb) / nb == Approx(3.5).epsilon(0.01));
}

TEST_CASE("sparse attention scales the attention FLOPs, score memory and time by the density", "[model][sparse]") {
  Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx2x16");
  const HardwareProfile hw = default_profile_for(c);
  Plan p;
  p.dp = 1;
  p.global_batch = 1;
  p.precision = Precision::fp16;
  p.sparse_attention = SparseLayout::bigbird;
  p.sparse_block = 16;
  const double d = attention_density(m, p);
  const double nb = 1024.0 / 16;
  CHECK(d == Approx(sparse_layout_blocks(SparseLayout::bigbird, 64) / (nb * nb)));
  CHECK(d < 0.07);

  // Model FLOPs: the 4·B·s²·h attention core term of Korthikanti eq. 7 per layer, ×3 for fwd+bwd.
  const double s = m.seq_len, h = m.hidden, L = m.layers, a = m.heads;
  const double dense = model_flops_per_iteration(m, 1);
  CHECK(dense - model_flops_per_iteration(m, 1, d) == Approx(3 * L * 4 * s * s * h * (1 - d)).epsilon(1e-9));

  // Activations: the 5·a·s²·b score bytes of Korthikanti Table 2 scale by d.
  const double sbh = s * h;
  CHECK(layer_activation_bytes(m, 1, 1, false, Recompute::none, d) == Approx(sbh * 34 + 5 * a * s * s * d));
  CHECK(layer_activation_bytes(m, 1, 1, false, Recompute::selective, d) == Approx(sbh * 34));

  // Attention core in the layer: the score GEMMs do d of the dense FLOPs.
  Plan dense_plan = p;
  dense_plan.sparse_attention = SparseLayout::none;
  const LayerCost sparse_lc = layer_cost(m, p, c, hw);
  const LayerCost dense_lc = layer_cost(m, dense_plan, c, hw);
  CHECK(dense_lc.fwd_flops - sparse_lc.fwd_flops == Approx(4 * s * s * h * (1 - d)).epsilon(1e-9));
  CHECK(sparse_lc.fwd_attention_s < dense_lc.fwd_attention_s);
  CHECK(sparse_lc.fwd_gemm_s == Approx(dense_lc.fwd_gemm_s));  // linear layers untouched
}

TEST_CASE("sparse attention fits a 10x longer sequence where dense attention does not", "[model][sparse]") {
  // GPT-2 1.5B on one DGX-2 node (V100 32 GB), ZeRO-2 over 16 GPUs, full
  // recompute, micro-batch 1: at s = 1024 both fit; at s = 10240 the dense
  // score tensors (one layer's a·s² held while it is recomputed, plus the
  // workspace) do not, the bigbird layout's do. (DeepSpeed reports 10x longer
  // sequences for BERT-base with sparse attention on a V100-32GB.) DeepSpeed's
  // claim, so its engine (16-bit activations; ztune's executor stores fp32).
  const Cluster c = load_cluster("dgx2");
  const HardwareProfile hw = with_engine(default_profile_for(c), "deepspeed");
  Plan p;
  p.dp = 16;
  p.zero_stage = 2;
  p.micro_batch = 1;
  p.global_batch = 16;
  p.recompute = Recompute::full;
  p.precision = Precision::fp16;
  const Transformer short_seq = load_transformer("gpt2-1.5b");
  const Transformer long_seq = load_transformer("gpt2-1.5b", 10240);
  CHECK(predict_memory(short_seq, p, c, hw).fits_gpu);
  CHECK_FALSE(predict_memory(long_seq, p, c, hw).fits_gpu);
  p.sparse_attention = SparseLayout::bigbird;
  p.sparse_block = 16;
  CHECK(predict_memory(long_seq, p, c, hw).fits_gpu);
}
