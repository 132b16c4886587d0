// One transformer block of GptStage, as two branches:
//   attention: partial = c_proj(attn(rope(c_attn(ln1(x)))))   (row-parallel, unreduced)
//   MLP:       partial = c_proj(act(c_fc(ln2(xin))))
// Sequential blocks (GPT-2, Llama): x2 = x + reduce(attn), out = x2 + reduce(mlp(x2)).
// Parallel blocks (GPT-J, GPT-NeoX's use_parallel_residual; Black et al. 2022 §2):
// out = x + reduce(attn(x) + mlp(x)): both branches read x, and their row-parallel
// partial sums share one tensor-parallel reduction.
// Backward kernels accumulate (+=), so each branch adds its input gradient into the
// gradient of the residual it read.
#include <vector>

#include "gpt_stage_parts.hpp"

namespace ztune::executor {

void GptStage::norm_linear_forward(ConstTensorRef xin, Buffer& ln, Buffer& mean, Buffer& rstd, int norm_w,
                                   int norm_b, int w, int b, int width, Buffer& out) {
  ln = act(static_cast<std::size_t>(rows_) * static_cast<std::size_t>(C_));
  norm_forward(ln.ref(), mean, rstd, xin, norm_w, norm_b);
  Buffer tmp;
  const ConstTensorRef ln_full = gather_rows(ln.ref(), tmp);  // f: the sequence-parallel all-gather
  out = act(static_cast<std::size_t>(N_) * static_cast<std::size_t>(width));
  be_.matmul_forward(out.ref(), ln_full, store_.param(w), param(b), N_, C_, width);
}

void GptStage::attn_forward(const BlockParams& p, ConstTensorRef x, LayerActs& la, bool keep_att, TensorRef partial) {
  const auto n = static_cast<std::size_t>(N_);
  norm_linear_forward(x, la.ln1, la.mean1, la.rstd1, p.ln1_w, p.ln1_b, p.qkv_w, p.qkv_b, QKVl_, la.qkv);
  rotate(la.qkv.ref(), false);
  la.att = be_.allocate(att_elems(), keep_att ? MemCategory::activations : MemCategory::workspace, att_dtype());
  la.atty = act(n * Cl_);
  {
    Buffer expanded;
    attend(la.atty.ref(), la.att.ref(), dense_qkv(la.qkv.ref(), expanded));
  }
  if (!keep_att) la.att.release();
  be_.matmul_forward(partial, la.atty.ref(), store_.param(p.proj_w), nullptr, N_, Cl_, C_);
}

void GptStage::mlp_forward(const BlockParams& p, ConstTensorRef xin, LayerActs& la, TensorRef partial) {
  const auto n = static_cast<std::size_t>(N_);
  norm_linear_forward(xin, la.ln2, la.mean2, la.rstd2, p.ln2_w, p.ln2_b, p.fc_w, p.fc_b, FCl_, la.fc);
  la.gelu = act(n * Fl_);
  if (swiglu_) be_.swiglu_forward(la.gelu.ref(), la.fc.ref(), N_, Fl_);
  else be_.gelu_forward(la.gelu.ref(), la.fc.ref(), static_cast<long>(n * Fl_));
  be_.matmul_forward(partial, la.gelu.ref(), store_.param(p.mproj_w), nullptr, N_, Fl_, C_);
}

void GptStage::forward_block(int l, ConstTensorRef x, LayerActs& la, TensorRef out, bool keep_att) {
  const auto& p = blocks_[static_cast<std::size_t>(l)];
  const auto ns = static_cast<std::size_t>(rows_) * static_cast<std::size_t>(C_);
  const auto n = static_cast<std::size_t>(N_) * static_cast<std::size_t>(C_);
  Buffer partial = work(n);
  attn_forward(p, x, la, keep_att, partial.ref());
  if (parallel_) {
    {
      Buffer mlp = work(n);
      mlp_forward(p, x, la, mlp.ref());
      be_.accumulate(partial.ref(), mlp.ref(), static_cast<long>(n));
    }
    reduce_rows(partial.ref(), out);
    if (p.proj_b >= 0) be_.add_bias(out, store_.param(p.proj_b), rows_, C_);
    if (p.mproj_b >= 0) be_.add_bias(out, store_.param(p.mproj_b), rows_, C_);
    be_.accumulate(out, x, static_cast<long>(ns));  // out = x + attn + mlp
    return;
  }
  la.x2 = act(ns);
  reduce_rows(partial.ref(), la.x2.ref());
  if (p.proj_b >= 0) be_.add_bias(la.x2.ref(), store_.param(p.proj_b), rows_, C_);
  be_.accumulate(la.x2.ref(), x, static_cast<long>(ns));  // x2 = x + attn
  mlp_forward(p, la.x2.ref(), la, partial.ref());
  reduce_rows(partial.ref(), out);
  if (p.mproj_b >= 0) be_.add_bias(out, store_.param(p.mproj_b), rows_, C_);
  be_.accumulate(out, la.x2.ref(), static_cast<long>(ns));  // out = x2 + mlp
}

void GptStage::norm_linear_backward(Buffer& dy, const Buffer& ln, int w, int b, int width, ConstTensorRef xin,
                                    int norm_w, int norm_b, const Buffer& mean, const Buffer& rstd, TensorRef dxin) {
  const auto ns = static_cast<std::size_t>(rows_), n = static_cast<std::size_t>(N_);
  const auto c = static_cast<std::size_t>(C_);
  Buffer dln_full = work(n * c), tmp;
  const ConstTensorRef ln_full = gather_rows(ln.ref(), tmp);
  be_.matmul_backward(dln_full.ref(), store_.grad(w), grad(b), dy.ref(), ln_full, store_.param(w), N_, C_, width);
  tmp.release();
  dy.release();
  Buffer dln = work(ns * c);
  reduce_rows(dln_full.ref(), dln.ref());  // the column-parallel GEMM's input gradient (f's conjugate)
  dln_full.release();
  norm_backward(dxin, dln.ref(), xin, norm_w, norm_b, mean, rstd);
}

void GptStage::mlp_backward(const BlockParams& p, LayerActs& la, ConstTensorRef xin, ConstTensorRef dout_full,
                            Buffer& dout_owner, TensorRef dxin) {
  const auto n = static_cast<std::size_t>(N_);
  Buffer dg = work(n * Fl_);
  be_.matmul_backward(dg.ref(), store_.grad(p.mproj_w), nullptr, dout_full, la.gelu.ref(), store_.param(p.mproj_w),
                      N_, Fl_, C_);
  dout_owner.release();
  Buffer dfc = work(n * FCl_);
  if (swiglu_) be_.swiglu_backward(dfc.ref(), la.fc.ref(), dg.ref(), N_, Fl_);
  else be_.gelu_backward(dfc.ref(), la.fc.ref(), dg.ref(), static_cast<long>(n * Fl_));
  dg.release();
  norm_linear_backward(dfc, la.ln2, p.fc_w, p.fc_b, FCl_, xin, p.ln2_w, p.ln2_b, la.mean2, la.rstd2, dxin);
}

void GptStage::attn_backward(const BlockParams& p, LayerActs& la, ConstTensorRef x, ConstTensorRef dout_full,
                             Buffer& dout_owner, TensorRef dx) {
  const auto n = static_cast<std::size_t>(N_);
  Buffer datty = work(n * Cl_);
  be_.matmul_backward(datty.ref(), store_.grad(p.proj_w), nullptr, dout_full, la.atty.ref(), store_.param(p.proj_w),
                      N_, Cl_, C_);
  dout_owner.release();
  Buffer att_tmp, atty_tmp, expanded;
  const ConstTensorRef qkv = dense_qkv(la.qkv.ref(), expanded);
  ConstTensorRef att = la.att.ref();
  ConstTensorRef atty = la.atty.ref();
  if (la.att.empty()) {  // selective recomputation: the probabilities (or a fused kernel's state) again
    att_tmp = be_.allocate(att_elems(), MemCategory::workspace, att_dtype());
    atty_tmp = work(n * Cl_);
    attend(atty_tmp.ref(), att_tmp.ref(), qkv);
    att = att_tmp.ref();
    atty = atty_tmp.ref();
  }
  Buffer dqkv = work(n * QKVl_);
  if (KVl_ == NHl_) {
    attend_backward(dqkv.ref(), datty.ref(), qkv, atty, att);
  } else {
    Buffer dqkv_dense = work(n * 3 * Cl_);
    attend_backward(dqkv_dense.ref(), datty.ref(), qkv, atty, att);
    be_.kv_repeat_backward(dqkv.ref(), dqkv_dense.ref(), N_, NHl_, KVl_, hd_);
  }
  datty.release();
  att_tmp.release();
  atty_tmp.release();
  expanded.release();
  rotate(dqkv.ref(), true);
  norm_linear_backward(dqkv, la.ln1, p.qkv_w, p.qkv_b, QKVl_, x, p.ln1_w, p.ln1_b, la.mean1, la.rstd1, dx);
}

void GptStage::backward_block(int l, ConstTensorRef dres, LayerActs& la, ConstTensorRef x, TensorRef dx) {
  const auto& p = blocks_[static_cast<std::size_t>(l)];
  const auto ns = static_cast<std::size_t>(rows_) * static_cast<std::size_t>(C_);
  Buffer tmp;
  if (parallel_) {
    // out = x + attn(x) + mlp(x): both branches see the same output gradient.
    be_.copy(dx, dres, ns);
    if (p.mproj_b >= 0) be_.bias_backward(store_.grad(p.mproj_b), dres, rows_, C_);
    if (p.proj_b >= 0) be_.bias_backward(store_.grad(p.proj_b), dres, rows_, C_);
    const ConstTensorRef dout_full = gather_rows(dres, tmp);
    Buffer keep;  // the MLP branch must not free what the attention branch reads next
    mlp_backward(p, la, x, dout_full, keep, dx);
    attn_backward(p, la, x, dout_full, tmp, dx);
    return;
  }
  // MLP: out = x2 + mlp(x2).
  Buffer dx2 = work(ns);
  be_.copy(dx2.ref(), dres, ns);
  if (p.mproj_b >= 0) be_.bias_backward(store_.grad(p.mproj_b), dres, rows_, C_);
  const ConstTensorRef dm_full = gather_rows(dres, tmp);
  mlp_backward(p, la, la.x2.ref(), dm_full, tmp, dx2.ref());
  // Attention: x2 = x + attn(x).
  if (p.proj_b >= 0) be_.bias_backward(store_.grad(p.proj_b), dx2.ref(), rows_, C_);
  const ConstTensorRef dproj_full = gather_rows(dx2.ref(), tmp);
  be_.copy(dx, dx2.ref(), ns);
  attn_backward(p, la, x, dproj_full, tmp, dx);
}

}  // namespace ztune::executor
