#include "ztune/executor/backend.hpp"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace ztune::executor {

void Buffer::release() {
  if (owner_ != nullptr && data_ != nullptr) {
    if (dtype_ == StorageDtype::fp32) owner_->free(data_, numel_, category_);
    else owner_->free_typed(data_, numel_, category_, dtype_);
  }
  owner_ = nullptr;
  data_ = nullptr;
  numel_ = 0;
}

Buffer Backend::allocate(std::size_t numel, MemCategory category) {
  if (numel == 0) return {};
  float* p = raw_allocate(numel, category);
  memory_.on_allocate(category, numel * sizeof(float));
  return {this, p, numel, category};
}

void Backend::free(float* data, std::size_t numel, MemCategory category) {
  raw_free(data, numel, category);
  memory_.on_free(category, numel * sizeof(float));
}

namespace {
/// fp32 words holding numel elements of dtype (a 16-bit buffer rides on raw_allocate).
std::size_t words_for(std::size_t numel, StorageDtype dtype) {
  return (numel * storage_bytes(dtype) + sizeof(float) - 1) / sizeof(float);
}
}  // namespace

Buffer Backend::allocate(std::size_t numel, MemCategory category, StorageDtype dtype) {
  if (dtype == StorageDtype::fp32) return allocate(numel, category);
  if (numel == 0) return {};
  float* p = raw_allocate(words_for(numel, dtype), category);
  memory_.on_allocate(category, numel * storage_bytes(dtype));
  return {this, p, numel, category, dtype};
}

void Backend::free_typed(float* data, std::size_t numel, MemCategory category, StorageDtype dtype) {
  raw_free(data, words_for(numel, dtype), category);
  memory_.on_free(category, numel * storage_bytes(dtype));
}

void Backend::adamw_fused(std::span<const AdamWSpan> spans, StorageDtype grad_dtype, StorageDtype param_dtype,
                          const kernels::AdamWParams& h, float grad_scale, AdamWStates states) {
  ScopedOp timer(ops_, OpKind::memory_bound);
  adamw_fused_impl(spans, grad_dtype, param_dtype, h, grad_scale, states);
}

void Backend::adamw_fused_impl(std::span<const AdamWSpan> spans, StorageDtype grad_dtype, StorageDtype param_dtype,
                               const kernels::AdamWParams& h, float grad_scale, AdamWStates states) {
  // Every backend's path: one adamw per span over an fp32 copy of its gradient
  // (CUDA fuses them into one launch) and of its 16-bit states, which are
  // rounded back after; then the 16-bit copy from the new master as stored.
  for (const AdamWSpan& s : spans) {
    const auto n = static_cast<std::size_t>(s.n);
    Buffer staged;
    const auto* g = static_cast<const float*>(s.grad);
    if (grad_dtype != StorageDtype::fp32 || grad_scale != 1.0f) {
      staged = allocate(n, MemCategory::workspace);
      copy(staged.data(), ConstTensorRef(s.grad, grad_dtype), n);
      if (grad_scale != 1.0f) scale_impl(staged.data(), grad_scale, s.n);
      g = staged.data();
    }
    // 16-bit states widened chunk by chunk (a bounded fp32 workspace); fp32
    // ones, which StagedOut passes through, in one call.
    const std::size_t chunk = states.fp32() ? n : staged_adam_chunk();
    for (std::size_t off = 0; off < n; off += chunk) {
      const std::size_t len = std::min(chunk, n - off);
      StagedOut master(*this, TensorRef(s.master, states.master) + off, len, true);
      StagedOut m(*this, TensorRef(s.m, states.moments) + off, len, true);
      StagedOut v(*this, TensorRef(s.v, states.moments) + off, len, true);
      adamw_impl(master, g + off, m, v, static_cast<long>(len), h);
      master.commit();
      m.commit();
      v.commit();
    }
    if (s.param != nullptr) copy(TensorRef(s.param, param_dtype), ConstTensorRef(s.master, states.master), n);
  }
}

void Backend::copy(TensorRef dst, ConstTensorRef src, std::size_t n) {
  if (dst.dtype == src.dtype) copy_bytes(dst.ptr, src.ptr, n * storage_bytes(dst.dtype));
  else convert_impl(dst.ptr, dst.dtype, src.ptr, src.dtype, n);
}

// fp32 operands and null pointers pass through untouched, so fp32 training
// costs nothing extra.
Backend::StagedIn::StagedIn(Backend& be, ConstTensorRef r, std::size_t n) : p_(static_cast<const float*>(r.ptr)) {
  if (r.ptr == nullptr || r.is_fp32() || n == 0) return;
  buf_ = be.allocate(n, MemCategory::workspace);
  be.convert_impl(buf_.data(), StorageDtype::fp32, r.ptr, r.dtype, n);
  p_ = buf_.data();
}

Backend::StagedOut::StagedOut(Backend& be, TensorRef r, std::size_t n, bool reads)
    : be_(be), r_(r), n_(n), p_(static_cast<float*>(r.ptr)) {
  if (r.ptr == nullptr || r.is_fp32() || n == 0) return;
  buf_ = be.allocate(n, MemCategory::workspace);
  if (reads) be.convert_impl(buf_.data(), StorageDtype::fp32, r.ptr, r.dtype, n);
  p_ = buf_.data();
}

void Backend::StagedOut::commit() {
  if (!buf_.empty()) be_.convert_impl(r_.ptr, r_.dtype, buf_.data(), StorageDtype::fp32, n_);
}

namespace {
std::size_t sz(long a) { return static_cast<std::size_t>(a); }
std::size_t sz(long a, long b) { return static_cast<std::size_t>(a) * static_cast<std::size_t>(b); }
/// Elements an operand of a GEMM spans: rows × its leading dimension.
std::size_t gemm_extent(bool trans, int rows, int cols, int ld) { return sz(trans ? cols : rows, ld); }
}  // namespace

namespace {
// Whether every operand given (null ones aside) is fp32: no staging, no native hook.
bool all_fp32(std::initializer_list<ConstTensorRef> refs) {
  for (const ConstTensorRef& r : refs)
    if (r.ptr != nullptr && !r.is_fp32()) return false;
  return true;
}
}  // namespace

// The defaults: no native kernel, stage through fp32.
bool Backend::gemm_native(const kernels::GemmShape&, float, ConstTensorRef, ConstTensorRef, float, TensorRef) {
  return false;
}
bool Backend::matmul_forward_native(TensorRef, ConstTensorRef, ConstTensorRef, ConstTensorRef, int, int, int) {
  return false;
}
bool Backend::matmul_backward_native(TensorRef, TensorRef, TensorRef, ConstTensorRef, ConstTensorRef, ConstTensorRef,
                                     int, int, int) {
  return false;
}
bool Backend::attention_forward_native(TensorRef, TensorRef, ConstTensorRef, int, int, int, int, bool, int) {
  return false;
}
bool Backend::attention_backward_native(TensorRef, ConstTensorRef, ConstTensorRef, ConstTensorRef, ConstTensorRef, int,
                                        int, int, int, bool, int) {
  return false;
}

bool Backend::embedding_forward_native(TensorRef, const std::int32_t*, ConstTensorRef, int, int, int, int) {
  return false;
}
bool Backend::embedding_backward_native(TensorRef, ConstTensorRef, const std::int32_t*, int, int, int, int) {
  return false;
}
bool Backend::layernorm_forward_native(TensorRef, float*, float*, ConstTensorRef, ConstTensorRef, ConstTensorRef, int,
                                       int, float) {
  return false;
}
bool Backend::layernorm_backward_native(TensorRef, TensorRef, TensorRef, ConstTensorRef, ConstTensorRef,
                                        ConstTensorRef, const float*, const float*, int, int) {
  return false;
}
bool Backend::rmsnorm_forward_native(TensorRef, float*, ConstTensorRef, ConstTensorRef, int, int, float) {
  return false;
}
bool Backend::rmsnorm_backward_native(TensorRef, TensorRef, ConstTensorRef, ConstTensorRef, ConstTensorRef,
                                      const float*, int, int) {
  return false;
}
bool Backend::gelu_forward_native(TensorRef, ConstTensorRef, long) { return false; }
bool Backend::gelu_backward_native(TensorRef, ConstTensorRef, ConstTensorRef, long) { return false; }
bool Backend::swiglu_forward_native(TensorRef, ConstTensorRef, int, int) { return false; }
bool Backend::swiglu_backward_native(TensorRef, ConstTensorRef, ConstTensorRef, int, int) { return false; }
bool Backend::rope_native(TensorRef, const std::int32_t*, int, int, int, int, int, float, bool) { return false; }
bool Backend::kv_repeat_forward_native(TensorRef, ConstTensorRef, int, int, int, int) { return false; }
bool Backend::kv_repeat_backward_native(TensorRef, ConstTensorRef, int, int, int, int) { return false; }
bool Backend::sparse_attention_forward_native(TensorRef, TensorRef, ConstTensorRef, int, int, int, int,
                                              const kernels::BlockLayout&) {
  return false;
}
bool Backend::sparse_attention_backward_native(TensorRef, ConstTensorRef, ConstTensorRef, ConstTensorRef, int, int,
                                               int, int, const kernels::BlockLayout&) {
  return false;
}
bool Backend::ce_row_max_native(float*, ConstTensorRef, int, int) { return false; }
bool Backend::ce_row_sumexp_native(float*, ConstTensorRef, const float*, int, int) { return false; }
bool Backend::ce_target_logit_native(float*, ConstTensorRef, const std::int32_t*, int, int, int) { return false; }
bool Backend::ce_backward_native(TensorRef, ConstTensorRef, const float*, const float*, const std::int32_t*,
                                 const float*, int, int, int) {
  return false;
}
bool Backend::add_native(TensorRef, ConstTensorRef, ConstTensorRef, long) { return false; }
bool Backend::accumulate_native(TensorRef, ConstTensorRef, long) { return false; }
bool Backend::scale_native(TensorRef, float, long) { return false; }
bool Backend::add_bias_native(TensorRef, ConstTensorRef, int, int) { return false; }
bool Backend::bias_backward_native(TensorRef, ConstTensorRef, int, int) { return false; }
bool Backend::sum_squares_native(double*, ConstTensorRef, long) { return false; }
bool Backend::quantize_dequantize_native(TensorRef, long, int, long) { return false; }

#define ZT_TIMED(kind) ScopedOp timer_(ops_, kind)
// Some operand is 16-bit and the backend ran the op on the stored values itself.
#define ZT_NATIVE(call, ...) \
  if (!all_fp32({__VA_ARGS__}) && (call)) return
#define ZT_IN(name, ref, n) StagedIn name(*this, ref, n)
#define ZT_OUT(name, ref, n) StagedOut name(*this, ref, n, false)
#define ZT_ACC(name, ref, n) StagedOut name(*this, ref, n, true)

void Backend::gemm(const kernels::GemmShape& s, float alpha, ConstTensorRef a, ConstTensorRef b, float beta,
                   TensorRef c) {
  ZT_TIMED(OpKind::gemm);
  ZT_NATIVE(gemm_native(s, alpha, a, b, beta, c), a, b, c);
  ZT_IN(A, a, gemm_extent(s.trans_a, s.m, s.k, s.lda));
  ZT_IN(B, b, gemm_extent(s.trans_b, s.k, s.n, s.ldb));
  StagedOut C(*this, c, sz(s.m, s.ldc), beta != 0.0f);
  gemm_impl(s, alpha, A, B, beta, C);
  C.commit();
}
void Backend::matmul_forward(TensorRef out, ConstTensorRef inp, ConstTensorRef w, ConstTensorRef bias, int n, int c,
                             int oc) {
  ZT_TIMED(OpKind::gemm);
  ZT_NATIVE(matmul_forward_native(out, inp, w, bias, n, c, oc), out, inp, w, bias);
  ZT_IN(I, inp, sz(n, c));
  ZT_IN(W, w, sz(oc, c));
  ZT_IN(Bi, bias, sz(oc));
  ZT_OUT(O, out, sz(n, oc));
  matmul_forward_impl(O, I, W, Bi, n, c, oc);
  O.commit();
}
void Backend::matmul_backward(TensorRef dinp, TensorRef dw, TensorRef dbias, ConstTensorRef dout, ConstTensorRef inp,
                              ConstTensorRef w, int n, int c, int oc) {
  ZT_TIMED(OpKind::gemm);
  ZT_NATIVE(matmul_backward_native(dinp, dw, dbias, dout, inp, w, n, c, oc), dinp, dw, dbias, dout, inp, w);
  ZT_IN(D, dout, sz(n, oc));
  ZT_IN(I, inp, sz(n, c));
  ZT_IN(W, w, sz(oc, c));
  ZT_ACC(DI, dinp, sz(n, c));
  ZT_ACC(DW, dw, sz(oc, c));
  ZT_ACC(DB, dbias, sz(oc));
  matmul_backward_impl(DI, DW, DB, D, I, W, n, c, oc);
  DI.commit();
  DW.commit();
  DB.commit();
}
void Backend::embedding_forward(TensorRef out, const std::int32_t* ids, ConstTensorRef table, int n, int c,
                                int row_begin, int rows) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(embedding_forward_native(out, ids, table, n, c, row_begin, rows), out, table);
  ZT_IN(T, table, sz(rows, c));
  ZT_OUT(O, out, sz(n, c));
  embedding_forward_impl(O, ids, T, n, c, row_begin, rows);
  O.commit();
}
void Backend::embedding_backward(TensorRef dtable, ConstTensorRef dout, const std::int32_t* ids, int n, int c,
                                 int row_begin, int rows) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(embedding_backward_native(dtable, dout, ids, n, c, row_begin, rows), dtable, dout);
  ZT_IN(D, dout, sz(n, c));
  ZT_ACC(DT, dtable, sz(rows, c));
  embedding_backward_impl(DT, D, ids, n, c, row_begin, rows);
  DT.commit();
}
void Backend::layernorm_forward(TensorRef out, float* mean, float* rstd, ConstTensorRef inp, ConstTensorRef w,
                                ConstTensorRef b, int n, int c, float eps) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(layernorm_forward_native(out, mean, rstd, inp, w, b, n, c, eps), out, inp, w, b);
  ZT_IN(I, inp, sz(n, c));
  ZT_IN(W, w, sz(c));
  ZT_IN(Bi, b, sz(c));
  ZT_OUT(O, out, sz(n, c));
  layernorm_forward_impl(O, mean, rstd, I, W, Bi, n, c, eps);
  O.commit();
}
void Backend::layernorm_backward(TensorRef dinp, TensorRef dw, TensorRef db, ConstTensorRef dout, ConstTensorRef inp,
                                 ConstTensorRef w, const float* mean, const float* rstd, int n, int c) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(layernorm_backward_native(dinp, dw, db, dout, inp, w, mean, rstd, n, c), dinp, dw, db, dout, inp, w);
  ZT_IN(D, dout, sz(n, c));
  ZT_IN(I, inp, sz(n, c));
  ZT_IN(W, w, sz(c));
  ZT_ACC(DI, dinp, sz(n, c));
  ZT_ACC(DW, dw, sz(c));
  ZT_ACC(DB, db, sz(c));
  layernorm_backward_impl(DI, DW, DB, D, I, W, mean, rstd, n, c);
  DI.commit();
  DW.commit();
  DB.commit();
}
void Backend::gelu_forward(TensorRef out, ConstTensorRef inp, long n) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(gelu_forward_native(out, inp, n), out, inp);
  ZT_IN(I, inp, sz(n));
  ZT_OUT(O, out, sz(n));
  gelu_forward_impl(O, I, n);
  O.commit();
}
void Backend::gelu_backward(TensorRef dinp, ConstTensorRef inp, ConstTensorRef dout, long n) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(gelu_backward_native(dinp, inp, dout, n), dinp, inp, dout);
  ZT_IN(I, inp, sz(n));
  ZT_IN(D, dout, sz(n));
  ZT_ACC(DI, dinp, sz(n));
  gelu_backward_impl(DI, I, D, n);
  DI.commit();
}
void Backend::rmsnorm_forward(TensorRef out, float* rstd, ConstTensorRef inp, ConstTensorRef w, int n, int c,
                              float eps) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(rmsnorm_forward_native(out, rstd, inp, w, n, c, eps), out, inp, w);
  ZT_IN(I, inp, sz(n, c));
  ZT_IN(W, w, sz(c));
  ZT_OUT(O, out, sz(n, c));
  rmsnorm_forward_impl(O, rstd, I, W, n, c, eps);
  O.commit();
}
void Backend::rmsnorm_backward(TensorRef dinp, TensorRef dw, ConstTensorRef dout, ConstTensorRef inp,
                               ConstTensorRef w, const float* rstd, int n, int c) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(rmsnorm_backward_native(dinp, dw, dout, inp, w, rstd, n, c), dinp, dw, dout, inp, w);
  ZT_IN(D, dout, sz(n, c));
  ZT_IN(I, inp, sz(n, c));
  ZT_IN(W, w, sz(c));
  ZT_ACC(DI, dinp, sz(n, c));
  ZT_ACC(DW, dw, sz(c));
  rmsnorm_backward_impl(DI, DW, D, I, W, rstd, n, c);
  DI.commit();
  DW.commit();
}
void Backend::swiglu_forward(TensorRef out, ConstTensorRef inp, int n, int f) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(swiglu_forward_native(out, inp, n, f), out, inp);
  ZT_IN(I, inp, sz(n, 2L * f));
  ZT_OUT(O, out, sz(n, f));
  swiglu_forward_impl(O, I, n, f);
  O.commit();
}
void Backend::swiglu_backward(TensorRef dinp, ConstTensorRef inp, ConstTensorRef dout, int n, int f) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(swiglu_backward_native(dinp, inp, dout, n, f), dinp, inp, dout);
  ZT_IN(I, inp, sz(n, 2L * f));
  ZT_IN(D, dout, sz(n, f));
  ZT_ACC(DI, dinp, sz(n, 2L * f));
  swiglu_backward_impl(DI, I, D, n, f);
  DI.commit();
}
void Backend::rope_forward(TensorRef x, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                           int rot_dims, float theta) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(rope_native(x, positions, n, row_stride, heads, hd, rot_dims, theta, false), x);
  // In place: the span from the first row's first head to the last row's last.
  ZT_ACC(X, x, n == 0 ? 0 : sz(n - 1L, row_stride) + sz(heads, hd));
  rope_impl(X, positions, n, row_stride, heads, hd, rot_dims, theta, false);
  X.commit();
}
void Backend::rope_backward(TensorRef dx, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                            int rot_dims, float theta) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(rope_native(dx, positions, n, row_stride, heads, hd, rot_dims, theta, true), dx);
  ZT_ACC(X, dx, n == 0 ? 0 : sz(n - 1L, row_stride) + sz(heads, hd));
  rope_impl(X, positions, n, row_stride, heads, hd, rot_dims, theta, true);
  X.commit();
}
void Backend::kv_repeat_forward(TensorRef out, ConstTensorRef inp, int n, int nh, int kv, int hd) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(kv_repeat_forward_native(out, inp, n, nh, kv, hd), out, inp);
  ZT_IN(I, inp, sz(n, sz(nh + 2L * kv, hd)));
  ZT_OUT(O, out, sz(n, sz(3L * nh, hd)));
  kv_repeat_forward_impl(O, I, n, nh, kv, hd);
  O.commit();
}
void Backend::kv_repeat_backward(TensorRef dinp, ConstTensorRef dout, int n, int nh, int kv, int hd) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(kv_repeat_backward_native(dinp, dout, n, nh, kv, hd), dinp, dout);
  ZT_IN(D, dout, sz(n, sz(3L * nh, hd)));
  ZT_ACC(DI, dinp, sz(n, sz(nh + 2L * kv, hd)));
  kv_repeat_backward_impl(DI, D, n, nh, kv, hd);
  DI.commit();
}
std::size_t Backend::attention_state_elems(int b, int t, int nh, bool flash) {
  const std::size_t rows = static_cast<std::size_t>(b) * static_cast<std::size_t>(nh) * static_cast<std::size_t>(t);
  return flash ? rows : rows * static_cast<std::size_t>(t);
}
void Backend::attention_forward(TensorRef out, TensorRef att, ConstTensorRef qkv, int b, int t, int c, int nh,
                                bool flash, int window) {
  ZT_TIMED(OpKind::attention);
  ZT_NATIVE(attention_forward_native(out, att, qkv, b, t, c, nh, flash, window), out, att, qkv);
  ZT_IN(Q, qkv, sz(b, sz(t, 3L * c)));
  ZT_OUT(O, out, sz(b, sz(t, c)));
  ZT_OUT(A, att, attention_state_elems(b, t, nh, flash));
  attention_forward_impl(O, A, Q, b, t, c, nh, flash, window);
  O.commit();
  A.commit();
}
void Backend::attention_backward(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv, ConstTensorRef out,
                                 ConstTensorRef att, int b, int t, int c, int nh, bool flash, int window) {
  ZT_TIMED(OpKind::attention);
  ZT_NATIVE(attention_backward_native(dqkv, dout, qkv, out, att, b, t, c, nh, flash, window), dqkv, dout, qkv, out,
            att);
  ZT_IN(D, dout, sz(b, sz(t, c)));
  ZT_IN(Q, qkv, sz(b, sz(t, 3L * c)));
  ZT_IN(O, out, sz(b, sz(t, c)));
  ZT_IN(A, att, attention_state_elems(b, t, nh, flash));
  ZT_ACC(DQ, dqkv, sz(b, sz(t, 3L * c)));
  attention_backward_impl(DQ, D, Q, O, A, b, t, c, nh, flash, window);
  DQ.commit();
}
namespace {
std::size_t sparse_state_elems(int b, int nh, const kernels::BlockLayout& layout) {
  return sz(b, nh) * static_cast<std::size_t>(layout.nnz()) * sz(layout.block, layout.block);
}
}  // namespace
void Backend::sparse_attention_forward(TensorRef out, TensorRef att, ConstTensorRef qkv, int b, int t, int c, int nh,
                                       const kernels::BlockLayout& layout) {
  ZT_TIMED(OpKind::attention);
  ZT_NATIVE(sparse_attention_forward_native(out, att, qkv, b, t, c, nh, layout), out, att, qkv);
  ZT_IN(Q, qkv, sz(b, sz(t, 3L * c)));
  ZT_OUT(O, out, sz(b, sz(t, c)));
  ZT_OUT(A, att, sparse_state_elems(b, nh, layout));
  sparse_attention_forward_impl(O, A, Q, b, t, c, nh, layout);
  O.commit();
  A.commit();
}
void Backend::sparse_attention_backward(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv, ConstTensorRef att,
                                        int b, int t, int c, int nh, const kernels::BlockLayout& layout) {
  ZT_TIMED(OpKind::attention);
  ZT_NATIVE(sparse_attention_backward_native(dqkv, dout, qkv, att, b, t, c, nh, layout), dqkv, dout, qkv, att);
  ZT_IN(D, dout, sz(b, sz(t, c)));
  ZT_IN(Q, qkv, sz(b, sz(t, 3L * c)));
  ZT_IN(A, att, sparse_state_elems(b, nh, layout));
  ZT_ACC(DQ, dqkv, sz(b, sz(t, 3L * c)));
  sparse_attention_backward_impl(DQ, D, Q, A, b, t, c, nh, layout);
  DQ.commit();
}
void Backend::ce_row_max(float* row_max, ConstTensorRef logits, int n, int v) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(ce_row_max_native(row_max, logits, n, v), logits);
  ZT_IN(L, logits, sz(n, v));
  ce_row_max_impl(row_max, L, n, v);
}
void Backend::ce_row_sumexp(float* row_sum, ConstTensorRef logits, const float* row_max, int n, int v) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(ce_row_sumexp_native(row_sum, logits, row_max, n, v), logits);
  ZT_IN(L, logits, sz(n, v));
  ce_row_sumexp_impl(row_sum, L, row_max, n, v);
}
void Backend::ce_target_logit(float* tl, ConstTensorRef logits, const std::int32_t* targets, int n, int v,
                              int vocab_begin) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(ce_target_logit_native(tl, logits, targets, n, v, vocab_begin), logits);
  ZT_IN(L, logits, sz(n, v));
  ce_target_logit_impl(tl, L, targets, n, v, vocab_begin);
}
void Backend::ce_loss(float* losses, const float* row_max, const float* row_sum, const float* tl, int n) {
  ZT_TIMED(OpKind::memory_bound);
  ce_loss_impl(losses, row_max, row_sum, tl, n);
}
void Backend::ce_backward(TensorRef dlogits, ConstTensorRef logits, const float* row_max, const float* row_sum,
                          const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(ce_backward_native(dlogits, logits, row_max, row_sum, targets, dloss, n, v, vocab_begin), dlogits,
            logits);
  ZT_IN(L, logits, sz(n, v));
  ZT_ACC(DL, dlogits, sz(n, v));  // backward accumulates (kernels/conventions.hpp)
  ce_backward_impl(DL, L, row_max, row_sum, targets, dloss, n, v, vocab_begin);
  DL.commit();
}
void Backend::adamw(float* p, const float* g, float* m, float* v, long n, const kernels::AdamWParams& h) {
  ZT_TIMED(OpKind::memory_bound);
  adamw_impl(p, g, m, v, n, h);
}
void Backend::add(TensorRef out, ConstTensorRef a, ConstTensorRef b, long n) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(add_native(out, a, b, n), out, a, b);
  ZT_IN(A, a, sz(n));
  ZT_IN(B, b, sz(n));
  ZT_OUT(O, out, sz(n));
  add_impl(O, A, B, n);
  O.commit();
}
void Backend::accumulate(TensorRef dst, ConstTensorRef src, long n) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(accumulate_native(dst, src, n), dst, src);
  ZT_IN(S, src, sz(n));
  ZT_ACC(D, dst, sz(n));
  accumulate_impl(D, S, n);
  D.commit();
}
void Backend::scale(TensorRef x, float s, long n) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(scale_native(x, s, n), x);
  ZT_ACC(X, x, sz(n));
  scale_impl(X, s, n);
  X.commit();
}
void Backend::add_bias(TensorRef x, ConstTensorRef bias, int n, int c) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(add_bias_native(x, bias, n, c), x, bias);
  ZT_IN(Bi, bias, sz(c));
  ZT_ACC(X, x, sz(n, c));
  add_bias_impl(X, Bi, n, c);
  X.commit();
}
void Backend::quantize_dequantize(TensorRef x, long n, int bits, long group) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(quantize_dequantize_native(x, n, bits, group), x);
  ZT_ACC(X, x, sz(n));
  quantize_dequantize_impl(X, n, bits, group);
  X.commit();
}
void Backend::bias_backward(TensorRef dbias, ConstTensorRef dout, int n, int c) {
  ZT_TIMED(OpKind::memory_bound);
  ZT_NATIVE(bias_backward_native(dbias, dout, n, c), dbias, dout);
  ZT_IN(D, dout, sz(n, c));
  ZT_ACC(DB, dbias, sz(c));
  bias_backward_impl(DB, D, n, c);
  DB.commit();
}
double Backend::sum_squares(ConstTensorRef x, long n) {
  ZT_TIMED(OpKind::memory_bound);
  if (double r = 0; !x.is_fp32() && sum_squares_native(&r, x, n)) return r;
  ZT_IN(X, x, sz(n));
  return sum_squares_impl(X, n);
}

#undef ZT_TIMED
#undef ZT_IN
#undef ZT_OUT
#undef ZT_ACC
#undef ZT_NATIVE

}  // namespace ztune::executor
