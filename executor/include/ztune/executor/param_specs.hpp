#pragma once
// The parameters one rank holds: their names (Hugging Face GPT-2's, in its Conv1D
// [in, out] layout, for every model shape: a Llama-shaped model has no biases or
// wpe, RMSNorm's ln_*.weight, c_attn = [Q | K | V] with K and V of kv_heads
// heads, c_fc = [gate | up] under SwiGLU, and lm_head.weight [V, C] when the
// embeddings are untied), the slice of the full tensor this rank's
// tensor-parallel shard covers (Megatron: column-parallel c_attn/c_fc,
// row-parallel c_proj, vocabulary-parallel wte and lm_head), the unit (layer) they
// belong to, and how they are initialised. A pure function of (model, group shape,
// coordinates), so rank 0 can rebuild any rank's list to assemble a full model.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ztune/executor/process_groups.hpp"
#include "ztune/vocab/executor_support.hpp"  // vocab_range
#include "ztune/vocab/transformer.hpp"

namespace ztune::executor {

/// The local tensor is full[row_begin : row_begin + rows, ·] restricted to the
/// column ranges `cols` (each [begin, begin + width)), concatenated in order:
/// local shape [rows, Σ width], row-major. A column-parallel weight holds one
/// range per block of its output (Q | K | V, or SwiGLU's gate | up); blocks may
/// differ in width (grouped-query attention's K and V are narrower than Q).
struct ColumnRange {
  int begin = 0;
  int width = 1;
};
struct ShardMap {
  int full_rows = 1;
  int full_cols = 1;
  int row_begin = 0;
  int rows = 1;
  std::vector<ColumnRange> cols{ColumnRange{}};
  [[nodiscard]] std::size_t local_cols() const;
  [[nodiscard]] std::size_t numel() const { return static_cast<std::size_t>(rows) * local_cols(); }
  [[nodiscard]] std::size_t full_numel() const { return static_cast<std::size_t>(full_rows) * full_cols; }
  /// Index in the full tensor of local element `i`.
  [[nodiscard]] std::size_t full_index(std::size_t i) const;
};

enum class InitKind : std::uint8_t { normal, zeros, ones };

struct ParamSpec {
  std::string name;            // "h.3.attn.c_attn.weight"
  std::vector<int> hf_shape;   // full tensor shape as Hugging Face stores it
  ShardMap shard;
  int unit = 0;                // index of the layer unit on this stage, in forward order
  InitKind init = InitKind::normal;
  float init_std = 0.02f;
  bool counted_in_norm = true;   // false for tensor-parallel replicas off tp rank 0 and the tied copy
  bool sp_partial = false;       // replicated over tp, but its gradient is partial under sequence parallelism
  bool tied_copy = false;        // the last stage's copy of wte (pp > 1): gradients summed with the first stage's
  /// The token embedding (wte) or its tied copy: with a tied head across
  /// stages, the parameter whose gradient the embedding group sums. Found by
  /// this role, not by its name.
  bool word_embedding = false;
};

/// Units on a stage in forward order: "embedding" (first stage), one per block,
/// "head" (last stage). With interleaved 1F1B (Narayanan et al. 2021, §2.2) the
/// stage holds `chunks` model chunks: chunk c is virtual stage c·pp + pp_rank,
/// its blocks those plan.hpp virtual_stage_bounds gives it (equal chunks, or
/// the plan's chunk_layers: Megatron-Core's first and last chunks one short,
/// down to none); the embedding belongs to chunk 0 of stage 0, the head to the
/// last chunk of the last stage. Blocks are numbered chunk by chunk, so units
/// stay in forward order.
struct StageLayout {
  int pp = 1;
  int pp_rank = 0;
  int chunks = 1;
  std::vector<int> chunk_first;   // global index of each chunk's first block
  std::vector<int> chunk_blocks;  // blocks of each chunk
  bool has_embedding = false;
  bool has_head = false;
  int units = 0;
  /// Blocks of chunk `chunk`.
  [[nodiscard]] int layers(int chunk = 0) const { return chunk_blocks[static_cast<std::size_t>(chunk)]; }
  /// Global index of chunk `chunk`'s first block.
  [[nodiscard]] int first_layer(int chunk = 0) const { return chunk_first[static_cast<std::size_t>(chunk)]; }
  [[nodiscard]] int block_unit(int local_layer, int chunk = 0) const {
    int before = 0;
    for (int c = 0; c < chunk; ++c) before += layers(c);
    return (has_embedding ? 1 : 0) + before + local_layer;
  }
  [[nodiscard]] int head_unit() const { return units - 1; }
};

StageLayout stage_layout(const Transformer& m, const GroupShape& shape, int pp_rank);


/// Every parameter this (tp, pp) coordinate holds, in forward order.
std::vector<ParamSpec> param_specs(const Transformer& m, const GroupShape& shape, const Coordinates& c);

}  // namespace ztune::executor
