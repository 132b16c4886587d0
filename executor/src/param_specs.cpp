#include "ztune/executor/param_specs.hpp"

#include <algorithm>
#include <cmath>

namespace ztune::executor {

std::size_t ShardMap::local_cols() const {
  std::size_t n = 0;
  for (const auto& c : cols) n += static_cast<std::size_t>(c.width);
  return n;
}

std::size_t ShardMap::full_index(std::size_t i) const {
  const std::size_t lc = local_cols();
  const std::size_t r = i / lc;
  std::size_t j = i % lc;
  std::size_t col = 0;
  for (const auto& c : cols) {
    if (j < static_cast<std::size_t>(c.width)) {
      col = static_cast<std::size_t>(c.begin) + j;
      break;
    }
    j -= static_cast<std::size_t>(c.width);
  }
  return (static_cast<std::size_t>(row_begin) + r) * static_cast<std::size_t>(full_cols) + col;
}

StageLayout stage_layout(const Transformer& m, const GroupShape& shape, int pp_rank) {
  StageLayout s;
  s.pp = shape.pp;
  s.pp_rank = pp_rank;
  s.chunks = shape.chunks;
  // The plan's partition (plan.hpp: balanced or stated, each stage cut into
  // `chunks` chunks when interleaved): chunk c of this stage is virtual
  // stage c·pp + pp_rank.
  const std::vector<int> bounds =
      virtual_stage_bounds(shape.stage_layers, m.layers, shape.pp, shape.chunks, shape.chunk_layers);
  int blocks = 0;
  for (int c = 0; c < shape.chunks; ++c) {
    const auto j = static_cast<std::size_t>(c) * static_cast<std::size_t>(shape.pp) + static_cast<std::size_t>(pp_rank);
    s.chunk_first.push_back(bounds[j]);
    s.chunk_blocks.push_back(bounds[j + 1] - bounds[j]);
    blocks += s.chunk_blocks.back();
  }
  s.has_embedding = pp_rank == 0;
  s.has_head = pp_rank == shape.pp - 1;
  s.units = blocks + (s.has_embedding ? 1 : 0) + (s.has_head ? 1 : 0);
  return s;
}

namespace {

ShardMap replicated(int rows, int cols) {
  ShardMap s;
  s.full_rows = rows;
  s.full_cols = cols;
  s.rows = rows;
  s.cols = {ColumnRange{0, cols}};
  return s;
}
ShardMap row_shard(int rows, int cols, int part, int parts) {
  ShardMap s = replicated(rows, cols);
  s.rows = rows / parts;
  s.row_begin = part * s.rows;
  return s;
}
ShardMap vocab_shard(int vocab, int cols, int part, int parts) {
  ShardMap s = replicated(vocab, cols);
  const VocabRange r = vocab_range(vocab, parts, part);
  s.row_begin = r.begin;
  s.rows = r.rows;
  return s;
}
// Column blocks of the given widths (Q | K | V; gate | up), each split over the parts.
ShardMap col_shard(int rows, const std::vector<int>& block_widths, int part, int parts) {
  int total = 0;
  for (int w : block_widths) total += w;
  ShardMap s = replicated(rows, total);
  s.cols.clear();
  int begin = 0;
  for (int w : block_widths) {
    s.cols.push_back({begin + part * (w / parts), w / parts});
    begin += w;
  }
  return s;
}

}  // namespace

std::vector<ParamSpec> param_specs(const Transformer& m, const GroupShape& shape, const Coordinates& c) {
  const int C = m.hidden, F = m.ffn_hidden, V = m.vocab, t = shape.tp, r = c.tp_rank;
  const int KVC = m.kv_heads * m.head_dim();  // width of K and of V
  const bool tp0 = r == 0;
  const bool sp_possible = t > 1;  // whether sequence parallelism could make replicas partial
  const bool bias = m.bias, norm_bias = m.norm == NormKind::layernorm;
  const bool swiglu = m.activation == Activation::swiglu;
  const std::vector<int> qkv_blocks{C, KVC, KVC};
  const std::vector<int> fc_blocks = swiglu ? std::vector<int>{F, F} : std::vector<int>{F};
  const int fc_cols = swiglu ? 2 * F : F;
  const auto layout = stage_layout(m, shape, c.pp_rank);
  // GPT-2 scales the residual projections by 1/√(2L) (Radford et al. 2019, §2.3).
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(m.layers));
  std::vector<ParamSpec> out;
  auto add = [&](std::string name, std::vector<int> hf, ShardMap s, int unit, InitKind init, float sd,
                 bool replica) {
    ParamSpec p;
    p.name = std::move(name);
    p.hf_shape = std::move(hf);
    p.shard = std::move(s);
    p.unit = unit;
    p.init = init;
    p.init_std = sd;
    p.counted_in_norm = !replica || tp0;
    p.sp_partial = replica && sp_possible;
    out.push_back(std::move(p));
  };
  auto add_norm = [&](const std::string& prefix, int unit) {
    add(prefix + ".weight", {C}, replicated(1, C), unit, InitKind::ones, 0, true);
    if (norm_bias) add(prefix + ".bias", {C}, replicated(1, C), unit, InitKind::zeros, 0, true);
  };
  if (layout.has_embedding) {
    add("wte.weight", {V, C}, vocab_shard(V, C, r, t), 0, InitKind::normal, 0.02f, false);
    out.back().word_embedding = true;
    if (m.position == PositionEmbedding::learned) {
      const int P = m.learned_position_rows();  // the whole table, however long the sequences trained
      add("wpe.weight", {P, C}, replicated(P, C), 0, InitKind::normal, 0.01f, true);
    }
  }
  for (int chunk = 0; chunk < layout.chunks; ++chunk) {
    for (int l = 0; l < layout.layers(chunk); ++l) {
      const int unit = layout.block_unit(l, chunk);
      const std::string h = "h." + std::to_string(layout.first_layer(chunk) + l) + ".";
      add_norm(h + "ln_1", unit);
      add(h + "attn.c_attn.weight", {C, C + 2 * KVC}, col_shard(C, qkv_blocks, r, t), unit, InitKind::normal, 0.02f,
          false);
      if (bias || m.qkv_bias) add(h + "attn.c_attn.bias", {C + 2 * KVC}, col_shard(1, qkv_blocks, r, t), unit, InitKind::zeros, 0, false);
      add(h + "attn.c_proj.weight", {C, C}, row_shard(C, C, r, t), unit, InitKind::normal, proj_std, false);
      if (bias) add(h + "attn.c_proj.bias", {C}, replicated(1, C), unit, InitKind::zeros, 0, true);
      add_norm(h + "ln_2", unit);
      add(h + "mlp.c_fc.weight", {C, fc_cols}, col_shard(C, fc_blocks, r, t), unit, InitKind::normal, 0.02f, false);
      if (bias) add(h + "mlp.c_fc.bias", {fc_cols}, col_shard(1, fc_blocks, r, t), unit, InitKind::zeros, 0, false);
      add(h + "mlp.c_proj.weight", {F, C}, row_shard(F, C, r, t), unit, InitKind::normal, proj_std, false);
      if (bias) add(h + "mlp.c_proj.bias", {C}, replicated(1, C), unit, InitKind::zeros, 0, true);
    }
  }
  if (layout.has_head) {
    const int unit = layout.head_unit();
    add_norm("ln_f", unit);
    if (!m.tied_embeddings) {
      // Untied output layer, vocabulary-parallel like wte (Megatron's
      // untie_embeddings_and_output_weights).
      add("lm_head.weight", {V, C}, vocab_shard(V, C, r, t), unit, InitKind::normal, 0.02f, false);
    } else if (!layout.has_embedding) {
      // Tied LM head on another stage than the embedding: a copy of wte whose
      // gradient is summed with the first stage's (Megatron's embedding group).
      add("wte.weight", {V, C}, vocab_shard(V, C, r, t), unit, InitKind::normal, 0.02f, false);
      out.back().tied_copy = true;
      out.back().word_embedding = true;
      out.back().counted_in_norm = false;
    }
  }
  return out;
}

}  // namespace ztune::executor
