#include "ztune/executor/param_specs.hpp"

#include <algorithm>
#include <cmath>

namespace ztune::executor {

std::size_t ShardMap::full_index(std::size_t i) const {
  const std::size_t local_cols = col_begins.size() * static_cast<std::size_t>(col_width);
  const std::size_t r = i / local_cols, j = i % local_cols;
  const std::size_t block = j / static_cast<std::size_t>(col_width), jj = j % static_cast<std::size_t>(col_width);
  return (static_cast<std::size_t>(row_begin) + r) * static_cast<std::size_t>(full_cols) +
         static_cast<std::size_t>(col_begins[block]) + jj;
}

StageLayout stage_layout(const Transformer& m, const GroupShape& shape, int pp_rank) {
  StageLayout s;
  s.pp = shape.pp;
  s.pp_rank = pp_rank;
  s.chunks = shape.chunks;
  s.layers = m.layers / (shape.pp * shape.chunks);
  s.has_embedding = pp_rank == 0;
  s.has_head = pp_rank == shape.pp - 1;
  s.units = s.chunks * s.layers + (s.has_embedding ? 1 : 0) + (s.has_head ? 1 : 0);
  return s;
}

namespace {

ShardMap replicated(int rows, int cols) {
  ShardMap s;
  s.full_rows = rows;
  s.full_cols = cols;
  s.rows = rows;
  s.col_width = cols;
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
// `blocks` equal column blocks (Q|K|V = 3), each split over the parts.
ShardMap col_shard(int rows, int cols, int part, int parts, int blocks) {
  ShardMap s = replicated(rows, cols);
  const int block = cols / blocks;
  s.col_width = block / parts;
  s.col_begins.clear();
  for (int b = 0; b < blocks; ++b) s.col_begins.push_back(b * block + part * s.col_width);
  return s;
}

}  // namespace

std::vector<ParamSpec> param_specs(const Transformer& m, const GroupShape& shape, const Coordinates& c) {
  const int C = m.hidden, F = m.ffn_hidden, V = m.vocab, T = m.seq_len, t = shape.tp, r = c.tp_rank;
  const bool tp0 = r == 0;
  const bool sp_possible = t > 1;  // whether sequence parallelism could make replicas partial
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
  if (layout.has_embedding) {
    add("wte.weight", {V, C}, vocab_shard(V, C, r, t), 0, InitKind::normal, 0.02f, false);
    add("wpe.weight", {T, C}, replicated(T, C), 0, InitKind::normal, 0.01f, true);
  }
  for (int k = 0; k < layout.chunks * layout.layers; ++k) {
    const int chunk = k / layout.layers, l = k % layout.layers;
    const int unit = layout.block_unit(l, chunk);
    const std::string h = "h." + std::to_string(layout.first_layer(chunk) + l) + ".";
    add(h + "ln_1.weight", {C}, replicated(1, C), unit, InitKind::ones, 0, true);
    add(h + "ln_1.bias", {C}, replicated(1, C), unit, InitKind::zeros, 0, true);
    add(h + "attn.c_attn.weight", {C, 3 * C}, col_shard(C, 3 * C, r, t, 3), unit, InitKind::normal, 0.02f, false);
    add(h + "attn.c_attn.bias", {3 * C}, col_shard(1, 3 * C, r, t, 3), unit, InitKind::zeros, 0, false);
    add(h + "attn.c_proj.weight", {C, C}, row_shard(C, C, r, t), unit, InitKind::normal, proj_std, false);
    add(h + "attn.c_proj.bias", {C}, replicated(1, C), unit, InitKind::zeros, 0, true);
    add(h + "ln_2.weight", {C}, replicated(1, C), unit, InitKind::ones, 0, true);
    add(h + "ln_2.bias", {C}, replicated(1, C), unit, InitKind::zeros, 0, true);
    add(h + "mlp.c_fc.weight", {C, F}, col_shard(C, F, r, t, 1), unit, InitKind::normal, 0.02f, false);
    add(h + "mlp.c_fc.bias", {F}, col_shard(1, F, r, t, 1), unit, InitKind::zeros, 0, false);
    add(h + "mlp.c_proj.weight", {F, C}, row_shard(F, C, r, t), unit, InitKind::normal, proj_std, false);
    add(h + "mlp.c_proj.bias", {C}, replicated(1, C), unit, InitKind::zeros, 0, true);
  }
  if (layout.has_head) {
    const int unit = layout.head_unit();
    add("ln_f.weight", {C}, replicated(1, C), unit, InitKind::ones, 0, true);
    add("ln_f.bias", {C}, replicated(1, C), unit, InitKind::zeros, 0, true);
    if (!layout.has_embedding) {
      // Tied LM head on another stage than the embedding: a copy of wte whose
      // gradient is summed with the first stage's (Megatron's embedding group).
      add("wte.weight", {V, C}, vocab_shard(V, C, r, t), unit, InitKind::normal, 0.02f, false);
      out.back().tied_copy = true;
      out.back().counted_in_norm = false;
    }
  }
  return out;
}

}  // namespace ztune::executor
