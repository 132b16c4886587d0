#include "ztune/executor/gpt_stage.hpp"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <vector>

#include "gpt_stage_parts.hpp"

namespace ztune::executor {

struct GptStage::Acts {
  std::vector<Buffer> residual;   // residual[l] = input of block l; residual[L] = stage output
  std::vector<LayerActs> layers;  // empty entries under full recomputation
  Buffer lnf, meanf, rstdf;       // head
  Buffer logits;                  // storage(); the cross-entropy reads it in fp32 (Megatron's fused CE)
  Buffer row_max, row_sum, losses;  // fp32
  double loss_sum = 0;
};

GptStage::GptStage(const Transformer& m, const Plan& plan, ProcessGroups& groups, Backend& backend,
                   ParamStore& store, float loss_scale, int chunk)
    : m_(m), plan_(plan), g_(groups), be_(backend), store_(store), dt_(store.storage()) {
  const auto layout = stage_layout(m, g_.shape, g_.coords.pp_rank);
  first_ = layout.has_embedding && chunk == 0;
  last_ = layout.has_head && chunk == layout.chunks - 1;
  tp_ = g_.shape.tp;
  sp_ = plan.sequence_parallel && tp_ > 1;
  B_ = plan.micro_batch;
  const int cp = std::max(1, g_.shape.cp);
  const int ulysses = std::max(1, g_.shape.ulysses);
  T_ = m.seq_len / (cp * ulysses);  // this rank's rows of each sequence
  N_ = B_ * T_;
  C_ = m.hidden;
  Cl_ = C_ / tp_;
  NHl_ = m.heads / tp_;
  Fl_ = m.ffn_hidden / tp_;
  hd_ = m.head_dim();
  KVl_ = m.kv_heads / tp_;
  QKVl_ = (NHl_ + 2 * KVl_) * hd_;
  rms_ = m.norm == NormKind::rmsnorm;
  swiglu_ = m.activation == Activation::swiglu;
  rope_ = m.position == PositionEmbedding::rotary;
  rot_dims_ = m.rotary_dims();
  parallel_ = m.parallel_residual;
  FCl_ = swiglu_ ? 2 * Fl_ : Fl_;
  const VocabRange vocab = vocab_range(m.vocab, tp_, g_.coords.tp_rank);
  Vl_ = vocab.rows;
  vocab_begin_ = vocab.begin;
  rows_ = sp_ ? N_ / tp_ : N_;
  layers_ = layout.layers(chunk);
  first_layer_ = layout.first_layer(chunk);
  embed_unit_ = 0;
  head_unit_ = layout.head_unit();
  auto need = [&](const std::string& name, int unit) {
    const int id = store_.find(name, unit);
    if (id < 0) throw std::logic_error("missing parameter " + name);
    return id;
  };
  // Biases (and LayerNorm's shift) exist only when the model has them (param_specs).
  const bool bias = m.bias, norm_bias = !rms_;
  auto maybe = [&](bool present, const std::string& name, int unit) { return present ? need(name, unit) : -1; };
  if (first_) {
    wte_ = need("wte.weight", embed_unit_);
    wpe_ = maybe(m.position == PositionEmbedding::learned, "wpe.weight", embed_unit_);  // as param_specs
  }
  if (last_) {
    lnf_w_ = need("ln_f.weight", head_unit_);
    lnf_b_ = maybe(norm_bias, "ln_f.bias", head_unit_);
    if (!m.tied_embeddings) head_w_ = need("lm_head.weight", head_unit_);
    else if (!layout.has_embedding) head_w_ = wte_ = need("wte.weight", head_unit_);  // the tied copy
    else head_w_ = wte_;
  }
  for (int l = 0; l < layers_; ++l) {
    BlockParams p;
    p.unit = layout.block_unit(l, chunk);
    const std::string h = "h." + std::to_string(first_layer_ + l) + ".";
    p.ln1_w = need(h + "ln_1.weight", p.unit);
    p.ln1_b = maybe(norm_bias, h + "ln_1.bias", p.unit);
    p.qkv_w = need(h + "attn.c_attn.weight", p.unit);
    p.qkv_b = maybe(bias || m.qkv_bias, h + "attn.c_attn.bias", p.unit);  // Qwen2: Q/K/V only
    p.proj_w = need(h + "attn.c_proj.weight", p.unit);
    p.proj_b = maybe(bias, h + "attn.c_proj.bias", p.unit);
    p.ln2_w = need(h + "ln_2.weight", p.unit);
    p.ln2_b = maybe(norm_bias, h + "ln_2.bias", p.unit);
    p.fc_w = need(h + "mlp.c_fc.weight", p.unit);
    p.fc_b = maybe(bias, h + "mlp.c_fc.bias", p.unit);
    p.mproj_w = need(h + "mlp.c_proj.weight", p.unit);
    p.mproj_b = maybe(bias, h + "mlp.c_proj.bias", p.unit);
    blocks_.push_back(p);
  }
  // cudnn is flash's algorithm: the CPU backend runs its fused kernel for
  // both, the CUDA backend its cuDNN SDPA (with the flash kernels as fallback).
  flash_ = fused_attention(plan.attention);
  if (cp > 1) {
    if (plan.sparse_attention != SparseLayout::none || m.windowed())
      throw std::logic_error("context parallelism rings dense causal attention only (check_plan_shape)");
    ring_ = std::make_unique<RingAttention>(*g_.cp, be_, B_, m.seq_len, Cl_, NHl_, flash_);
  }
  if (ulysses > 1) {
    if (plan.sparse_attention != SparseLayout::none || g_.ulysses == nullptr)
      throw std::logic_error("the executor's Ulysses runs dense attention over its group (executor_support)");
    ulysses_ = std::make_unique<UlyssesAttention>(*g_.ulysses, be_, B_, m.seq_len, Cl_, NHl_, flash_, window());
  }
  if (plan.sparse_attention != SparseLayout::none) {
    // The same layout on every rank and head: BigBird's random blocks come
    // from a fixed seed.
    const auto pattern = [&] {
      switch (plan.sparse_attention) {
        case SparseLayout::fixed: return kernels::BlockPattern::fixed;
        case SparseLayout::bigbird: return kernels::BlockPattern::bigbird;
        case SparseLayout::longformer: return kernels::BlockPattern::longformer;
        case SparseLayout::variable: return kernels::BlockPattern::variable;
        case SparseLayout::none: break;
      }
      throw std::logic_error("no block pattern for this layout");
    }();
    sparse_ = kernels::make_block_layout(pattern, T_, plan.sparse_block);
  }
  const int row0 = sp_ ? g_.coords.tp_rank * rows_ : 0;
  // Every row's position (RoPE turns all N rows); a sequence-parallel rank's
  // own rows start at row0 (wpe).
  // With context parallelism a row's position is that of its chunk (ring_attention.hpp).
  for (int i = 0; i < N_; ++i)
    positions_.push_back(cp > 1        ? context_parallel_position(i % T_, m.seq_len, cp, g_.coords.cp_rank)
                         : ulysses > 1 ? g_.coords.ulysses_rank * T_ + i % T_  // Ulysses: contiguous rows
                                       : i % T_);
  local_positions_ = positions_.data() + row0;
  if (last_) {
    dloss_ = be_.allocate(static_cast<std::size_t>(N_), MemCategory::logits);
    std::vector<float> host(static_cast<std::size_t>(N_), loss_scale);
    be_.from_host(dloss_.data(), host.data(), host.size());
  }
}

GptStage::~GptStage() = default;

void GptStage::set_loss_scale(float loss_scale) {
  if (!last_) return;
  std::vector<float> host(static_cast<std::size_t>(N_), loss_scale);
  be_.from_host(dloss_.data(), host.data(), host.size());
}

ConstTensorRef GptStage::gather_rows(ConstTensorRef shard, Buffer& tmp) {
  if (!sp_) return shard;
  tmp = work(static_cast<std::size_t>(N_) * C_);
  g_.tp->all_gather(shard, tmp.ref(), static_cast<std::size_t>(rows_) * C_);
  return tmp.ref();
}

void GptStage::reduce_rows(TensorRef partial, TensorRef out) {
  const auto n = static_cast<std::size_t>(rows_) * C_;
  if (sp_) {
    g_.tp->reduce_scatter(partial, out, n);
    return;
  }
  if (tp_ > 1) g_.tp->all_reduce(partial, n);
  be_.copy(out, partial, n);
}

void GptStage::embedding_forward(const MicroBatch& data, TensorRef out) {
  store_.acquire(embed_unit_, Direction::forward);
  Buffer partial = work(static_cast<std::size_t>(N_) * C_);
  be_.embedding_forward(partial.ref(), data.tokens.data(), store_.param(wte_), N_, C_, vocab_begin_, Vl_);
  reduce_rows(partial.ref(), out);
  if (wpe_ >= 0) {
    Buffer pos = work(static_cast<std::size_t>(rows_) * C_);
    be_.embedding_forward(pos.ref(), local_positions_, store_.param(wpe_), rows_, C_, 0, m_.learned_position_rows());
    be_.accumulate(out, pos.ref(), static_cast<long>(rows_) * C_);
  }
  store_.release(embed_unit_);
}

void GptStage::embedding_backward(const MicroBatch& data, ConstTensorRef dres) {
  store_.acquire(embed_unit_, Direction::backward);
  if (wpe_ >= 0)
    be_.embedding_backward(store_.grad(wpe_), dres, local_positions_, rows_, C_, 0, m_.learned_position_rows());
  Buffer tmp;
  const ConstTensorRef dfull = gather_rows(dres, tmp);
  be_.embedding_backward(store_.grad(wte_), dfull, data.tokens.data(), N_, C_, vocab_begin_, Vl_);
  store_.release(embed_unit_);
}

std::size_t GptStage::att_elems() const {
  if (ring_) return ring_->state_elems();
  if (ulysses_) return ulysses_->state_elems();
  if (!sparse_) return Backend::attention_state_elems(B_, T_, NHl_, flash_);
  const std::size_t per_head = static_cast<std::size_t>(sparse_->nnz()) * sparse_->block * sparse_->block;
  return static_cast<std::size_t>(B_) * NHl_ * per_head;
}

StorageDtype GptStage::att_dtype() const {
  if (ring_ || ulysses_ || (flash_ && !sparse_)) return StorageDtype::fp32;
  return dt_;
}

// The ring and Ulysses algorithms index host memory as fp32 (the CPU backend's
// context parallelism): a 16-bit operand goes through an fp32 copy
// (Backend::StagedIn/StagedOut). Their K/V exchanges then carry fp32 copies of
// 16-bit values (the same numbers, twice the bytes).
void GptStage::attend(TensorRef out, TensorRef att, ConstTensorRef qkv) {
  const auto n = static_cast<std::size_t>(N_);
  if (ring_ || ulysses_) {
    const Backend::StagedIn q(be_, qkv, n * 3 * Cl_);
    Backend::StagedOut o(be_, out, n * Cl_, false);
    if (ring_) ring_->forward(o, att.f32(), q);
    else ulysses_->forward(o, att.f32(), q);
    o.commit();
    return;
  }
  if (sparse_) be_.sparse_attention_forward(out, att, qkv, B_, T_, Cl_, NHl_, *sparse_);
  else be_.attention_forward(out, att, qkv, B_, T_, Cl_, NHl_, flash_, window());
}

void GptStage::attend_backward(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv, ConstTensorRef out,
                               ConstTensorRef att) {
  const auto n = static_cast<std::size_t>(N_);
  if (ring_ || ulysses_) {
    Backend::StagedOut dq(be_, dqkv, n * 3 * Cl_, true);  // backward accumulates
    const Backend::StagedIn d(be_, dout, n * Cl_);
    if (ring_) ring_->backward(dq, d, Backend::StagedIn(be_, qkv, n * 3 * Cl_), Backend::StagedIn(be_, out, n * Cl_),
                               att.f32());
    else ulysses_->backward(dq, d, att.f32());
    dq.commit();
    return;
  }
  if (sparse_) be_.sparse_attention_backward(dqkv, dout, qkv, att, B_, T_, Cl_, NHl_, *sparse_);
  else be_.attention_backward(dqkv, dout, qkv, out, att, B_, T_, Cl_, NHl_, flash_, window());
}

void GptStage::norm_forward(TensorRef out, Buffer& mean, Buffer& rstd, ConstTensorRef x, int w, int b) {
  rstd = act32(static_cast<std::size_t>(rows_));
  const auto eps = static_cast<float>(m_.norm_eps);  // the model's ε, for LayerNorm and RMSNorm alike
  if (rms_) {
    be_.rmsnorm_forward(out, rstd.data(), x, param(w), rows_, C_, eps);
    return;
  }
  mean = act32(static_cast<std::size_t>(rows_));
  be_.layernorm_forward(out, mean.data(), rstd.data(), x, param(w), param(b), rows_, C_, eps);
}

void GptStage::norm_backward(TensorRef dx, ConstTensorRef dout, ConstTensorRef x, int w, int b, const Buffer& mean,
                             const Buffer& rstd) {
  if (rms_) be_.rmsnorm_backward(dx, grad(w), dout, x, param(w), rstd.data(), rows_, C_);
  else be_.layernorm_backward(dx, grad(w), grad(b), dout, x, param(w), mean.data(), rstd.data(), rows_, C_);
}

void GptStage::rotate(TensorRef qkv, bool backward) {
  if (!rope_) return;
  const auto theta = static_cast<float>(m_.rope_theta);
  const TensorRef k = qkv + static_cast<std::size_t>(NHl_) * hd_;
  if (backward) {
    be_.rope_backward(qkv, positions_.data(), N_, QKVl_, NHl_, hd_, rot_dims_, theta);
    be_.rope_backward(k, positions_.data(), N_, QKVl_, KVl_, hd_, rot_dims_, theta);
  } else {
    be_.rope_forward(qkv, positions_.data(), N_, QKVl_, NHl_, hd_, rot_dims_, theta);
    be_.rope_forward(k, positions_.data(), N_, QKVl_, KVl_, hd_, rot_dims_, theta);
  }
}

ConstTensorRef GptStage::dense_qkv(ConstTensorRef qkv, Buffer& tmp) {
  if (KVl_ == NHl_) return qkv;
  tmp = work(static_cast<std::size_t>(N_) * 3 * Cl_);
  be_.kv_repeat_forward(tmp.ref(), qkv, N_, NHl_, KVl_, hd_);
  return tmp.ref();
}

void GptStage::head_forward(Acts& a, const MicroBatch& data, ConstTensorRef x) {
  const auto ns = static_cast<std::size_t>(rows_), n = static_cast<std::size_t>(N_);
  const auto c = static_cast<std::size_t>(C_);
  const bool tied_here = first_ && m_.tied_embeddings;  // the head reads the embedding unit's wte
  store_.acquire(head_unit_, Direction::forward);
  if (tied_here) store_.acquire_out_of_order(embed_unit_, Direction::forward);
  a.lnf = act(ns * c);
  norm_forward(a.lnf.ref(), a.meanf, a.rstdf, x, lnf_w_, lnf_b_);
  Buffer tmp;
  const ConstTensorRef lnf_full = gather_rows(a.lnf.ref(), tmp);
  a.logits = be_.allocate(n * Vl_, MemCategory::logits, dt_);
  // logits[N, V/tp] = lnf · wte_shardᵀ
  be_.gemm({false, true, N_, Vl_, C_, C_, C_, Vl_}, 1.0f, lnf_full, store_.param(head_w_), 0.0f, a.logits.ref());
  tmp.release();
  a.row_max = be_.allocate(n, MemCategory::logits);
  a.row_sum = be_.allocate(n, MemCategory::logits);
  a.losses = be_.allocate(n, MemCategory::logits);
  Buffer target = work32(n);
  be_.ce_row_max(a.row_max.data(), a.logits.ref(), N_, Vl_);
  if (tp_ > 1) g_.tp->all_reduce(a.row_max.data(), n, ReduceOp::max);
  be_.ce_row_sumexp(a.row_sum.data(), a.logits.ref(), a.row_max.data(), N_, Vl_);
  be_.ce_target_logit(target.data(), a.logits.ref(), data.targets.data(), N_, Vl_, vocab_begin_);
  if (tp_ > 1) {
    g_.tp->all_reduce(a.row_sum.data(), n);
    g_.tp->all_reduce(target.data(), n);
  }
  be_.ce_loss(a.losses.data(), a.row_max.data(), a.row_sum.data(), target.data(), N_);
  std::vector<float> host(n);
  be_.to_host(host.data(), a.losses.data(), n);
  a.loss_sum = 0;
  for (float v : host) a.loss_sum += v;
  if (tied_here) store_.release(embed_unit_);
  store_.release(head_unit_);
}

void GptStage::head_backward(Acts& a, const MicroBatch& data, ConstTensorRef x, TensorRef dx) {
  const auto ns = static_cast<std::size_t>(rows_), n = static_cast<std::size_t>(N_);
  const auto c = static_cast<std::size_t>(C_);
  const bool tied_here = first_ && m_.tied_embeddings;
  store_.acquire(head_unit_, Direction::backward);
  if (tied_here) store_.acquire_out_of_order(embed_unit_, Direction::backward);
  Buffer dlogits = work(n * Vl_);
  be_.ce_backward(dlogits.ref(), a.logits.ref(), a.row_max.data(), a.row_sum.data(), data.targets.data(),
                  dloss_.data(), N_, Vl_, vocab_begin_);
  a.logits.release();
  Buffer tmp;
  const ConstTensorRef lnf_full = gather_rows(a.lnf.ref(), tmp);
  Buffer dlnf_full = work(n * c);
  be_.gemm({false, false, N_, C_, Vl_, Vl_, C_, C_}, 1.0f, dlogits.ref(), store_.param(head_w_), 0.0f,
           dlnf_full.ref());
  be_.gemm({true, false, Vl_, C_, N_, Vl_, C_, C_}, 1.0f, dlogits.ref(), lnf_full, 1.0f, store_.grad(head_w_));
  tmp.release();
  dlogits.release();
  Buffer dlnf = work(ns * c);
  reduce_rows(dlnf_full.ref(), dlnf.ref());
  be_.zero(dx, ns * c);
  norm_backward(dx, dlnf.ref(), x, lnf_w_, lnf_b_, a.meanf, a.rstdf);
  if (tied_here) store_.release(embed_unit_);
  store_.release(head_unit_);
}

bool GptStage::recomputes_whole(int l) const {
  // Full recomputation: every layer of this model chunk, or with Megatron's
  // block method (plan.recompute_num_layers) its first N.
  return plan_.recompute == Recompute::full && (plan_.recompute_num_layers <= 0 || l < plan_.recompute_num_layers);
}

ConstTensorRef GptStage::forward(int mb, const MicroBatch& data, ConstTensorRef input) {
  auto a = std::make_unique<Acts>();
  const auto ns = static_cast<std::size_t>(rows_) * C_;
  a->residual.resize(static_cast<std::size_t>(layers_) + 1);
  a->layers.resize(static_cast<std::size_t>(layers_));
  a->residual[0] = act(ns);
  if (first_) {
    embedding_forward(data, a->residual[0].ref());
  } else {
    be_.copy(a->residual[0].ref(), input, ns);
  }
  for (int l = 0; l < layers_; ++l) {
    const auto li = static_cast<std::size_t>(l);
    a->residual[li + 1] = act(ns);
    store_.acquire(blocks_[li].unit, Direction::forward);
    // A layer Megatron's block method leaves out keeps everything, as with recompute "none".
    const bool recomputed = recomputes_whole(l);
    const bool keep_att = plan_.recompute == Recompute::none || (plan_.recompute == Recompute::full && !recomputed);
    forward_block(l, a->residual[li].ref(), a->layers[li], a->residual[li + 1].ref(), keep_att);
    store_.release(blocks_[li].unit);
    if (recomputed) a->layers[li] = LayerActs{};  // keep only the block input (Korthikanti §5)
  }
  if (last_) head_forward(*a, data, a->residual.back().ref());
  const ConstTensorRef out = last_ ? ConstTensorRef{} : ConstTensorRef(a->residual.back().ref());
  acts_[mb] = std::move(a);
  return out;
}

double GptStage::loss_sum(int mb) const { return acts_.at(mb)->loss_sum; }

ConstTensorRef GptStage::backward(int mb, const MicroBatch& data, ConstTensorRef dout, bool last_micro) {
  auto& a = *acts_.at(mb);
  const auto ns = static_cast<std::size_t>(rows_) * C_;
  Buffer d = work(ns), dnext = work(ns);
  if (last_) {
    head_backward(a, data, a.residual.back().ref(), d.ref());
    store_.unit_backward_done(head_unit_, last_micro);
  } else {
    be_.copy(d.ref(), dout, ns);
  }
  a.residual.back().release();
  for (int l = layers_ - 1; l >= 0; --l) {
    const auto li = static_cast<std::size_t>(l);
    store_.acquire(blocks_[li].unit, Direction::backward);
    if (recomputes_whole(l)) {
      Buffer scratch = work(ns);
      forward_block(l, a.residual[li].ref(), a.layers[li], scratch.ref(), true);
    }
    backward_block(l, d.ref(), a.layers[li], a.residual[li].ref(), dnext.ref());
    a.layers[li] = LayerActs{};
    store_.release(blocks_[li].unit);
    store_.unit_backward_done(blocks_[li].unit, last_micro);
    std::swap(d, dnext);
    a.residual[li + 1].release();
  }
  if (first_) {
    embedding_backward(data, d.ref());
    store_.unit_backward_done(embed_unit_, last_micro);
  }
  acts_.erase(mb);
  if (first_) return {};
  dinput_ = std::move(d);
  return dinput_.ref();
}

}  // namespace ztune::executor
