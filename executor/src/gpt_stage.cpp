#include "ztune/executor/gpt_stage.hpp"

#include <cassert>
#include <stdexcept>
#include <vector>

namespace ztune::executor {

// RMSNorm's ε: Llama 2's rms_norm_eps (Hugging Face config).
constexpr float kRmsNormEps = 1e-5f;

// Parameter ids in the store; -1 where the model has no such tensor (biases).
struct GptStage::BlockParams {
  int unit = 0;
  int ln1_w = -1, ln1_b = -1, qkv_w = -1, qkv_b = -1, proj_w = -1, proj_b = -1, ln2_w = -1, ln2_b = -1, fc_w = -1,
      fc_b = -1, mproj_w = -1, mproj_b = -1;
};

// What one block keeps for backward (shapes per rank; Ns = rows()).
struct GptStage::LayerActs {
  Buffer ln1, mean1, rstd1;  // [Ns, C], [Ns], [Ns] (no mean under RMSNorm)
  Buffer qkv;                // [N, QKVl] (after RoPE)
  Buffer att;                // [B, NH/tp, T, T] (absent under selective recomputation)
  Buffer atty;               // [N, C/tp]
  Buffer x2;                 // [Ns, C] residual after attention
  Buffer ln2, mean2, rstd2;  // [Ns, C], [Ns], [Ns]
  Buffer fc, gelu;           // [N, FCl], [N, F/tp] (gelu holds SwiGLU's output too)
};

struct GptStage::Acts {
  std::vector<Buffer> residual;   // residual[l] = input of block l; residual[L] = stage output
  std::vector<LayerActs> layers;  // empty entries under full recomputation
  Buffer lnf, meanf, rstdf;       // head
  Buffer logits, row_max, row_sum, losses;
  double loss_sum = 0;
};

GptStage::GptStage(const Transformer& m, const Plan& plan, ProcessGroups& groups, Backend& backend,
                   ParamStore& store, float loss_scale, int chunk)
    : m_(m), plan_(plan), g_(groups), be_(backend), store_(store) {
  const auto layout = stage_layout(m, g_.shape, g_.coords.pp_rank);
  first_ = layout.has_embedding && chunk == 0;
  last_ = layout.has_head && chunk == layout.chunks - 1;
  tp_ = g_.shape.tp;
  sp_ = plan.sequence_parallel && tp_ > 1;
  B_ = plan.micro_batch;
  T_ = m.seq_len;
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
  FCl_ = swiglu_ ? 2 * Fl_ : Fl_;
  const VocabRange vocab = vocab_range(m.vocab, tp_, g_.coords.tp_rank);
  Vl_ = vocab.rows;
  vocab_begin_ = vocab.begin;
  rows_ = sp_ ? N_ / tp_ : N_;
  layers_ = layout.layers;
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
    wpe_ = maybe(!rope_, "wpe.weight", embed_unit_);
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
    p.qkv_b = maybe(bias, h + "attn.c_attn.bias", p.unit);
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
  for (int i = 0; i < rows_; ++i) positions_.push_back((row0 + i) % T_);
  if (rope_)
    for (int i = 0; i < N_; ++i) positions_full_.push_back(i % T_);
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

const float* GptStage::gather_rows(const float* shard, Buffer& tmp) {
  if (!sp_) return shard;
  tmp = work(static_cast<std::size_t>(N_) * C_);
  g_.tp->all_gather(shard, tmp.data(), static_cast<std::size_t>(rows_) * C_);
  return tmp.data();
}

void GptStage::reduce_rows(float* partial, float* out) {
  const auto n = static_cast<std::size_t>(rows_) * C_;
  if (sp_) {
    g_.tp->reduce_scatter(partial, out, n);
    return;
  }
  if (tp_ > 1) g_.tp->all_reduce(partial, n);
  be_.copy(out, partial, n);
}

void GptStage::embedding_forward(const MicroBatch& data, float* out) {
  store_.acquire(embed_unit_, Direction::forward);
  Buffer partial = work(static_cast<std::size_t>(N_) * C_);
  be_.embedding_forward(partial.data(), data.tokens.data(), store_.param(wte_), N_, C_, vocab_begin_, Vl_);
  reduce_rows(partial.data(), out);
  if (wpe_ >= 0) {
    Buffer pos = work(static_cast<std::size_t>(rows_) * C_);
    be_.embedding_forward(pos.data(), positions_.data(), store_.param(wpe_), rows_, C_, 0, T_);
    be_.accumulate(out, pos.data(), static_cast<long>(rows_) * C_);
  }
  store_.release(embed_unit_);
}

void GptStage::embedding_backward(const MicroBatch& data, const float* dres) {
  store_.acquire(embed_unit_, Direction::backward);
  if (wpe_ >= 0) be_.embedding_backward(store_.grad(wpe_), dres, positions_.data(), rows_, C_, 0, T_);
  Buffer tmp;
  const float* dfull = gather_rows(dres, tmp);
  be_.embedding_backward(store_.grad(wte_), dfull, data.tokens.data(), N_, C_, vocab_begin_, Vl_);
  store_.release(embed_unit_);
}

std::size_t GptStage::att_elems() const {
  const std::size_t per_head = sparse_ ? static_cast<std::size_t>(sparse_->nnz()) * sparse_->block * sparse_->block
                                       : static_cast<std::size_t>(T_) * T_;
  return static_cast<std::size_t>(B_) * NHl_ * per_head;
}

void GptStage::attend(float* out, float* att, const float* qkv) {
  if (sparse_) be_.sparse_attention_forward(out, att, qkv, B_, T_, Cl_, NHl_, *sparse_);
  else be_.attention_forward(out, att, qkv, B_, T_, Cl_, NHl_);
}

void GptStage::attend_backward(float* dqkv, const float* dout, const float* qkv, const float* att) {
  if (sparse_) be_.sparse_attention_backward(dqkv, dout, qkv, att, B_, T_, Cl_, NHl_, *sparse_);
  else be_.attention_backward(dqkv, dout, qkv, att, B_, T_, Cl_, NHl_);
}

void GptStage::norm_forward(float* out, Buffer& mean, Buffer& rstd, const float* x, int w, int b) {
  rstd = act(static_cast<std::size_t>(rows_));
  if (rms_) {
    be_.rmsnorm_forward(out, rstd.data(), x, param(w), rows_, C_, kRmsNormEps);
    return;
  }
  mean = act(static_cast<std::size_t>(rows_));
  be_.layernorm_forward(out, mean.data(), rstd.data(), x, param(w), param(b), rows_, C_);
}

void GptStage::norm_backward(float* dx, const float* dout, const float* x, int w, int b, const Buffer& mean,
                             const Buffer& rstd) {
  if (rms_) be_.rmsnorm_backward(dx, grad(w), dout, x, param(w), rstd.data(), rows_, C_);
  else be_.layernorm_backward(dx, grad(w), grad(b), dout, x, param(w), mean.data(), rstd.data(), rows_, C_);
}

void GptStage::rotate(float* qkv, bool backward) {
  if (!rope_) return;
  const auto theta = static_cast<float>(m_.rope_theta);
  float* k = qkv + static_cast<std::size_t>(NHl_) * hd_;
  if (backward) {
    be_.rope_backward(qkv, positions_full_.data(), N_, QKVl_, NHl_, hd_, rot_dims_, theta);
    be_.rope_backward(k, positions_full_.data(), N_, QKVl_, KVl_, hd_, rot_dims_, theta);
  } else {
    be_.rope_forward(qkv, positions_full_.data(), N_, QKVl_, NHl_, hd_, rot_dims_, theta);
    be_.rope_forward(k, positions_full_.data(), N_, QKVl_, KVl_, hd_, rot_dims_, theta);
  }
}

const float* GptStage::dense_qkv(const float* qkv, Buffer& tmp) {
  if (KVl_ == NHl_) return qkv;
  tmp = work(static_cast<std::size_t>(N_) * 3 * Cl_);
  be_.kv_repeat_forward(tmp.data(), qkv, N_, NHl_, KVl_, hd_);
  return tmp.data();
}

void GptStage::forward_block(int l, const float* x, LayerActs& la, float* out, bool keep_att) {
  const auto& p = blocks_[static_cast<std::size_t>(l)];
  const auto ns = static_cast<std::size_t>(rows_), n = static_cast<std::size_t>(N_);
  const auto c = static_cast<std::size_t>(C_);
  la.ln1 = act(ns * c);
  norm_forward(la.ln1.data(), la.mean1, la.rstd1, x, p.ln1_w, p.ln1_b);
  Buffer tmp;
  const float* ln1_full = gather_rows(la.ln1.data(), tmp);
  la.qkv = act(n * QKVl_);
  be_.matmul_forward(la.qkv.data(), ln1_full, store_.param(p.qkv_w), param(p.qkv_b), N_, C_, QKVl_);
  tmp.release();
  rotate(la.qkv.data(), false);
  la.att = keep_att ? act(att_elems()) : work(att_elems());
  la.atty = act(n * Cl_);
  {
    Buffer expanded;
    attend(la.atty.data(), la.att.data(), dense_qkv(la.qkv.data(), expanded));
  }
  if (!keep_att) la.att.release();
  {
    Buffer partial = work(n * c);
    be_.matmul_forward(partial.data(), la.atty.data(), store_.param(p.proj_w), nullptr, N_, Cl_, C_);
    la.x2 = act(ns * c);
    reduce_rows(partial.data(), la.x2.data());
  }
  if (p.proj_b >= 0) be_.add_bias(la.x2.data(), store_.param(p.proj_b), rows_, C_);
  be_.accumulate(la.x2.data(), x, static_cast<long>(ns * c));  // x2 = x + attn
  la.ln2 = act(ns * c);
  norm_forward(la.ln2.data(), la.mean2, la.rstd2, la.x2.data(), p.ln2_w, p.ln2_b);
  const float* ln2_full = gather_rows(la.ln2.data(), tmp);
  la.fc = act(n * FCl_);
  be_.matmul_forward(la.fc.data(), ln2_full, store_.param(p.fc_w), param(p.fc_b), N_, C_, FCl_);
  tmp.release();
  la.gelu = act(n * Fl_);
  if (swiglu_) be_.swiglu_forward(la.gelu.data(), la.fc.data(), N_, Fl_);
  else be_.gelu_forward(la.gelu.data(), la.fc.data(), static_cast<long>(n * Fl_));
  Buffer partial = work(n * c);
  be_.matmul_forward(partial.data(), la.gelu.data(), store_.param(p.mproj_w), nullptr, N_, Fl_, C_);
  reduce_rows(partial.data(), out);
  if (p.mproj_b >= 0) be_.add_bias(out, store_.param(p.mproj_b), rows_, C_);
  be_.accumulate(out, la.x2.data(), static_cast<long>(ns * c));  // out = x2 + mlp
}

void GptStage::backward_block(int l, const float* dres, LayerActs& la, const float* x, float* dx) {
  const auto& p = blocks_[static_cast<std::size_t>(l)];
  const auto ns = static_cast<std::size_t>(rows_), n = static_cast<std::size_t>(N_);
  const auto c = static_cast<std::size_t>(C_);
  Buffer tmp, tmp2;
  // MLP: out = x2 + c_proj(act(c_fc(ln2(x2)))).
  Buffer dx2 = work(ns * c);
  be_.copy(dx2.data(), dres, ns * c);
  if (p.mproj_b >= 0) be_.bias_backward(store_.grad(p.mproj_b), dres, rows_, C_);
  const float* dm_full = gather_rows(dres, tmp);
  Buffer dg = work(n * Fl_);
  be_.matmul_backward(dg.data(), store_.grad(p.mproj_w), nullptr, dm_full, la.gelu.data(), store_.param(p.mproj_w),
                      N_, Fl_, C_);
  tmp.release();
  Buffer dfc = work(n * FCl_);
  if (swiglu_) be_.swiglu_backward(dfc.data(), la.fc.data(), dg.data(), N_, Fl_);
  else be_.gelu_backward(dfc.data(), la.fc.data(), dg.data(), static_cast<long>(n * Fl_));
  dg.release();
  Buffer dln2_full = work(n * c);
  const float* ln2_full = gather_rows(la.ln2.data(), tmp2);
  be_.matmul_backward(dln2_full.data(), store_.grad(p.fc_w), grad(p.fc_b), dfc.data(), ln2_full,
                      store_.param(p.fc_w), N_, C_, FCl_);
  tmp2.release();
  dfc.release();
  Buffer dln2 = work(ns * c);
  reduce_rows(dln2_full.data(), dln2.data());
  dln2_full.release();
  norm_backward(dx2.data(), dln2.data(), la.x2.data(), p.ln2_w, p.ln2_b, la.mean2, la.rstd2);
  dln2.release();
  // Attention: x2 = x + c_proj(attn(rope(c_attn(ln1(x))))).
  if (p.proj_b >= 0) be_.bias_backward(store_.grad(p.proj_b), dx2.data(), rows_, C_);
  const float* dproj_full = gather_rows(dx2.data(), tmp);
  Buffer datty = work(n * Cl_);
  be_.matmul_backward(datty.data(), store_.grad(p.proj_w), nullptr, dproj_full, la.atty.data(),
                      store_.param(p.proj_w), N_, Cl_, C_);
  tmp.release();
  Buffer att_tmp, atty_tmp, expanded;
  const float* qkv = dense_qkv(la.qkv.data(), expanded);
  const float* att = la.att.data();
  if (la.att.empty()) {  // selective recomputation: the probabilities again
    att_tmp = work(att_elems());
    atty_tmp = work(n * Cl_);
    attend(atty_tmp.data(), att_tmp.data(), qkv);
    att = att_tmp.data();
  }
  Buffer dqkv = work(n * QKVl_);
  if (KVl_ == NHl_) {
    attend_backward(dqkv.data(), datty.data(), qkv, att);
  } else {
    Buffer dqkv_dense = work(n * 3 * Cl_);
    attend_backward(dqkv_dense.data(), datty.data(), qkv, att);
    be_.kv_repeat_backward(dqkv.data(), dqkv_dense.data(), N_, NHl_, KVl_, hd_);
  }
  datty.release();
  att_tmp.release();
  atty_tmp.release();
  expanded.release();
  rotate(dqkv.data(), true);
  Buffer dln1_full = work(n * c);
  const float* ln1_full = gather_rows(la.ln1.data(), tmp);
  be_.matmul_backward(dln1_full.data(), store_.grad(p.qkv_w), grad(p.qkv_b), dqkv.data(), ln1_full,
                      store_.param(p.qkv_w), N_, C_, QKVl_);
  tmp.release();
  dqkv.release();
  Buffer dln1 = work(ns * c);
  reduce_rows(dln1_full.data(), dln1.data());
  dln1_full.release();
  be_.copy(dx, dx2.data(), ns * c);
  norm_backward(dx, dln1.data(), x, p.ln1_w, p.ln1_b, la.mean1, la.rstd1);
}

void GptStage::head_forward(Acts& a, const MicroBatch& data, const float* x) {
  const auto ns = static_cast<std::size_t>(rows_), n = static_cast<std::size_t>(N_);
  const auto c = static_cast<std::size_t>(C_);
  const bool tied_here = first_ && m_.tied_embeddings;  // the head reads the embedding unit's wte
  store_.acquire(head_unit_, Direction::forward);
  if (tied_here) store_.acquire(embed_unit_, Direction::forward);
  a.lnf = act(ns * c);
  norm_forward(a.lnf.data(), a.meanf, a.rstdf, x, lnf_w_, lnf_b_);
  Buffer tmp;
  const float* lnf_full = gather_rows(a.lnf.data(), tmp);
  a.logits = be_.allocate(n * Vl_, MemCategory::logits);
  // logits[N, V/tp] = lnf · wte_shardᵀ
  be_.gemm({false, true, N_, Vl_, C_, C_, C_, Vl_}, 1.0f, lnf_full, store_.param(head_w_), 0.0f, a.logits.data());
  tmp.release();
  a.row_max = be_.allocate(n, MemCategory::logits);
  a.row_sum = be_.allocate(n, MemCategory::logits);
  a.losses = be_.allocate(n, MemCategory::logits);
  Buffer target = work(n);
  be_.ce_row_max(a.row_max.data(), a.logits.data(), N_, Vl_);
  if (tp_ > 1) g_.tp->all_reduce(a.row_max.data(), n, ReduceOp::max);
  be_.ce_row_sumexp(a.row_sum.data(), a.logits.data(), a.row_max.data(), N_, Vl_);
  be_.ce_target_logit(target.data(), a.logits.data(), data.targets.data(), N_, Vl_, vocab_begin_);
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

void GptStage::head_backward(Acts& a, const MicroBatch& data, const float* x, float* dx) {
  const auto ns = static_cast<std::size_t>(rows_), n = static_cast<std::size_t>(N_);
  const auto c = static_cast<std::size_t>(C_);
  const bool tied_here = first_ && m_.tied_embeddings;
  store_.acquire(head_unit_, Direction::backward);
  if (tied_here) store_.acquire(embed_unit_, Direction::backward);
  Buffer dlogits = work(n * Vl_);
  be_.ce_backward(dlogits.data(), a.logits.data(), a.row_max.data(), a.row_sum.data(), data.targets.data(),
                  dloss_.data(), N_, Vl_, vocab_begin_);
  a.logits.release();
  Buffer tmp;
  const float* lnf_full = gather_rows(a.lnf.data(), tmp);
  Buffer dlnf_full = work(n * c);
  be_.gemm({false, false, N_, C_, Vl_, Vl_, C_, C_}, 1.0f, dlogits.data(), store_.param(head_w_), 0.0f,
           dlnf_full.data());
  be_.gemm({true, false, Vl_, C_, N_, Vl_, C_, C_}, 1.0f, dlogits.data(), lnf_full, 1.0f, store_.grad(head_w_));
  tmp.release();
  dlogits.release();
  Buffer dlnf = work(ns * c);
  reduce_rows(dlnf_full.data(), dlnf.data());
  be_.zero(dx, ns * c);
  norm_backward(dx, dlnf.data(), x, lnf_w_, lnf_b_, a.meanf, a.rstdf);
  if (tied_here) store_.release(embed_unit_);
  store_.release(head_unit_);
}

const float* GptStage::forward(int mb, const MicroBatch& data, const float* input) {
  auto a = std::make_unique<Acts>();
  const auto ns = static_cast<std::size_t>(rows_) * C_;
  a->residual.resize(static_cast<std::size_t>(layers_) + 1);
  a->layers.resize(static_cast<std::size_t>(layers_));
  a->residual[0] = act(ns);
  if (first_) {
    embedding_forward(data, a->residual[0].data());
  } else {
    be_.copy(a->residual[0].data(), input, ns);
  }
  const bool full = plan_.recompute == Recompute::full;
  const bool keep_att = plan_.recompute == Recompute::none;
  for (int l = 0; l < layers_; ++l) {
    const auto li = static_cast<std::size_t>(l);
    a->residual[li + 1] = act(ns);
    store_.acquire(blocks_[li].unit, Direction::forward);
    forward_block(l, a->residual[li].data(), a->layers[li], a->residual[li + 1].data(), keep_att);
    store_.release(blocks_[li].unit);
    if (full) a->layers[li] = LayerActs{};  // keep only the block input (Korthikanti §5)
  }
  if (last_) head_forward(*a, data, a->residual.back().data());
  const float* out = last_ ? nullptr : a->residual.back().data();
  acts_[mb] = std::move(a);
  return out;
}

double GptStage::loss_sum(int mb) const { return acts_.at(mb)->loss_sum; }

const float* GptStage::backward(int mb, const MicroBatch& data, const float* dout, bool last_micro) {
  auto& a = *acts_.at(mb);
  const auto ns = static_cast<std::size_t>(rows_) * C_;
  Buffer d = work(ns), dnext = work(ns);
  if (last_) {
    head_backward(a, data, a.residual.back().data(), d.data());
    store_.unit_backward_done(head_unit_, last_micro);
  } else {
    be_.copy(d.data(), dout, ns);
  }
  a.residual.back().release();
  for (int l = layers_ - 1; l >= 0; --l) {
    const auto li = static_cast<std::size_t>(l);
    store_.acquire(blocks_[li].unit, Direction::backward);
    if (plan_.recompute == Recompute::full) {
      Buffer scratch = work(ns);
      forward_block(l, a.residual[li].data(), a.layers[li], scratch.data(), true);
    }
    backward_block(l, d.data(), a.layers[li], a.residual[li].data(), dnext.data());
    a.layers[li] = LayerActs{};
    store_.release(blocks_[li].unit);
    store_.unit_backward_done(blocks_[li].unit, last_micro);
    std::swap(d, dnext);
    a.residual[li + 1].release();
  }
  if (first_) {
    embedding_backward(data, d.data());
    store_.unit_backward_done(embed_unit_, last_micro);
  }
  acts_.erase(mb);
  if (first_) return nullptr;
  dinput_ = std::move(d);
  return dinput_.data();
}

}  // namespace ztune::executor
