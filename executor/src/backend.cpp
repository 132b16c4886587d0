#include "ztune/executor/backend.hpp"

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

std::optional<StorageDtype> parse_storage_dtype(std::string_view s) {
  if (s == "fp32") return StorageDtype::fp32;
  if (s == "bf16") return StorageDtype::bf16;
  if (s == "fp16") return StorageDtype::fp16;
  return std::nullopt;
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
                          const kernels::AdamWParams& h, float grad_scale) {
  ScopedOp timer(ops_, OpKind::memory_bound);
  adamw_fused_impl(spans, grad_dtype, param_dtype, h, grad_scale);
}

void Backend::adamw_fused_impl(std::span<const AdamWSpan> spans, StorageDtype grad_dtype, StorageDtype param_dtype,
                               const kernels::AdamWParams& h, float grad_scale) {
  // The fp32 path of every backend: one adamw per span (the CUDA backend fuses them).
  if (grad_dtype != StorageDtype::fp32 || param_dtype != StorageDtype::fp32)
    throw std::invalid_argument("backend " + name() + " keeps fp32 storage: a fused AdamW with " +
                                storage_name(grad_dtype) + " gradients and " + storage_name(param_dtype) +
                                " parameter copies needs the CUDA backend");
  for (const AdamWSpan& s : spans) {
    const auto* g = static_cast<const float*>(s.grad);
    Buffer scaled;
    if (grad_scale != 1.0f) {
      scaled = allocate(static_cast<std::size_t>(s.n), MemCategory::workspace);
      copy(scaled.data(), g, static_cast<std::size_t>(s.n));
      scale_impl(scaled.data(), grad_scale, s.n);
      g = scaled.data();
    }
    adamw_impl(s.master, g, s.m, s.v, s.n, h);
    if (s.param != nullptr) copy(static_cast<float*>(s.param), s.master, static_cast<std::size_t>(s.n));
  }
}

#define ZT_TIMED(kind, call) \
  ScopedOp timer_(ops_, kind); \
  call

void Backend::gemm(const kernels::GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c) {
  ZT_TIMED(OpKind::gemm, gemm_impl(s, alpha, a, b, beta, c));
}
void Backend::matmul_forward(float* out, const float* inp, const float* w, const float* bias, int n, int c, int oc) {
  ZT_TIMED(OpKind::gemm, matmul_forward_impl(out, inp, w, bias, n, c, oc));
}
void Backend::matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                              const float* w, int n, int c, int oc) {
  ZT_TIMED(OpKind::gemm, matmul_backward_impl(dinp, dw, dbias, dout, inp, w, n, c, oc));
}
void Backend::embedding_forward(float* out, const std::int32_t* ids, const float* table, int n, int c, int row_begin,
                                int rows) {
  ZT_TIMED(OpKind::memory_bound, embedding_forward_impl(out, ids, table, n, c, row_begin, rows));
}
void Backend::embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, int n, int c,
                                 int row_begin, int rows) {
  ZT_TIMED(OpKind::memory_bound, embedding_backward_impl(dtable, dout, ids, n, c, row_begin, rows));
}
void Backend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                                const float* b, int n, int c, float eps) {
  ZT_TIMED(OpKind::memory_bound, layernorm_forward_impl(out, mean, rstd, inp, w, b, n, c, eps));
}
void Backend::layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                 const float* w, const float* mean, const float* rstd, int n, int c) {
  ZT_TIMED(OpKind::memory_bound, layernorm_backward_impl(dinp, dw, db, dout, inp, w, mean, rstd, n, c));
}
void Backend::gelu_forward(float* out, const float* inp, long n) {
  ZT_TIMED(OpKind::memory_bound, gelu_forward_impl(out, inp, n));
}
void Backend::gelu_backward(float* dinp, const float* inp, const float* dout, long n) {
  ZT_TIMED(OpKind::memory_bound, gelu_backward_impl(dinp, inp, dout, n));
}
void Backend::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int n, int c, float eps) {
  ZT_TIMED(OpKind::memory_bound, rmsnorm_forward_impl(out, rstd, inp, w, n, c, eps));
}
void Backend::rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                               const float* rstd, int n, int c) {
  ZT_TIMED(OpKind::memory_bound, rmsnorm_backward_impl(dinp, dw, dout, inp, w, rstd, n, c));
}
void Backend::swiglu_forward(float* out, const float* inp, int n, int f) {
  ZT_TIMED(OpKind::memory_bound, swiglu_forward_impl(out, inp, n, f));
}
void Backend::swiglu_backward(float* dinp, const float* inp, const float* dout, int n, int f) {
  ZT_TIMED(OpKind::memory_bound, swiglu_backward_impl(dinp, inp, dout, n, f));
}
void Backend::rope_forward(float* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                           int rot_dims, float theta) {
  ZT_TIMED(OpKind::memory_bound, rope_impl(x, positions, n, row_stride, heads, hd, rot_dims, theta, false));
}
void Backend::rope_backward(float* dx, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                            int rot_dims, float theta) {
  ZT_TIMED(OpKind::memory_bound, rope_impl(dx, positions, n, row_stride, heads, hd, rot_dims, theta, true));
}
void Backend::kv_repeat_forward(float* out, const float* inp, int n, int nh, int kv, int hd) {
  ZT_TIMED(OpKind::memory_bound, kv_repeat_forward_impl(out, inp, n, nh, kv, hd));
}
void Backend::kv_repeat_backward(float* dinp, const float* dout, int n, int nh, int kv, int hd) {
  ZT_TIMED(OpKind::memory_bound, kv_repeat_backward_impl(dinp, dout, n, nh, kv, hd));
}
void Backend::attention_forward(float* out, float* att, const float* qkv, int b, int t, int c, int nh, bool flash,
                                int window) {
  ZT_TIMED(OpKind::attention, attention_forward_impl(out, att, qkv, b, t, c, nh, flash, window));
}
std::size_t Backend::attention_state_elems(int b, int t, int nh, bool flash) {
  const std::size_t rows = static_cast<std::size_t>(b) * static_cast<std::size_t>(nh) * static_cast<std::size_t>(t);
  return flash ? rows : rows * static_cast<std::size_t>(t);
}
void Backend::attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* att,
                                 int b, int t, int c, int nh, bool flash, int window) {
  ZT_TIMED(OpKind::attention, attention_backward_impl(dqkv, dout, qkv, out, att, b, t, c, nh, flash, window));
}
void Backend::sparse_attention_forward(float* out, float* att, const float* qkv, int b, int t, int c, int nh,
                                       const kernels::BlockLayout& layout) {
  ZT_TIMED(OpKind::attention, sparse_attention_forward_impl(out, att, qkv, b, t, c, nh, layout));
}
void Backend::sparse_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int b,
                                        int t, int c, int nh, const kernels::BlockLayout& layout) {
  ZT_TIMED(OpKind::attention, sparse_attention_backward_impl(dqkv, dout, qkv, att, b, t, c, nh, layout));
}
void Backend::ce_row_max(float* row_max, const float* logits, int n, int v) {
  ZT_TIMED(OpKind::memory_bound, ce_row_max_impl(row_max, logits, n, v));
}
void Backend::ce_row_sumexp(float* row_sum, const float* logits, const float* row_max, int n, int v) {
  ZT_TIMED(OpKind::memory_bound, ce_row_sumexp_impl(row_sum, logits, row_max, n, v));
}
void Backend::ce_target_logit(float* tl, const float* logits, const std::int32_t* targets, int n, int v,
                              int vocab_begin) {
  ZT_TIMED(OpKind::memory_bound, ce_target_logit_impl(tl, logits, targets, n, v, vocab_begin));
}
void Backend::ce_loss(float* losses, const float* row_max, const float* row_sum, const float* tl, int n) {
  ZT_TIMED(OpKind::memory_bound, ce_loss_impl(losses, row_max, row_sum, tl, n));
}
void Backend::ce_backward(float* dlogits, const float* logits, const float* row_max, const float* row_sum,
                          const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin) {
  ZT_TIMED(OpKind::memory_bound, ce_backward_impl(dlogits, logits, row_max, row_sum, targets, dloss, n, v,
                                                  vocab_begin));
}
void Backend::adamw(float* p, const float* g, float* m, float* v, long n, const kernels::AdamWParams& h) {
  ZT_TIMED(OpKind::memory_bound, adamw_impl(p, g, m, v, n, h));
}
void Backend::add(float* out, const float* a, const float* b, long n) {
  ZT_TIMED(OpKind::memory_bound, add_impl(out, a, b, n));
}
void Backend::accumulate(float* dst, const float* src, long n) {
  ZT_TIMED(OpKind::memory_bound, accumulate_impl(dst, src, n));
}
void Backend::scale(float* x, float s, long n) { ZT_TIMED(OpKind::memory_bound, scale_impl(x, s, n)); }
void Backend::add_bias(float* x, const float* bias, int n, int c) {
  ZT_TIMED(OpKind::memory_bound, add_bias_impl(x, bias, n, c));
}
void Backend::quantize_dequantize(float* x, long n, int bits, long group) {
  ZT_TIMED(OpKind::memory_bound, quantize_dequantize_impl(x, n, bits, group));
}
void Backend::bias_backward(float* dbias, const float* dout, int n, int c) {
  ZT_TIMED(OpKind::memory_bound, bias_backward_impl(dbias, dout, n, c));
}
double Backend::sum_squares(const float* x, long n) {
  ScopedOp timer(ops_, OpKind::memory_bound);
  return sum_squares_impl(x, n);
}

#undef ZT_TIMED

}  // namespace ztune::executor
