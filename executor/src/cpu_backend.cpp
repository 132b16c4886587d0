#include "ztune/executor/cpu_backend.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "ztune/kernels/attention.hpp"
#include "ztune/kernels/quantize.hpp"
#include "ztune/kernels/sparse_attention.hpp"
#include "ztune/kernels/cross_entropy.hpp"
#include "ztune/kernels/elementwise.hpp"
#include "ztune/kernels/embedding.hpp"
#include "ztune/kernels/gelu.hpp"
#include "ztune/kernels/kv_repeat.hpp"
#include "ztune/kernels/layernorm.hpp"
#include "ztune/kernels/rope.hpp"
#include "ztune/kernels/swiglu.hpp"
#include "ztune/kernels/matmul.hpp"

namespace ztune::executor {

namespace k = ztune::kernels::cpu;

CpuBackend::CpuBackend(int threads) : pool_(threads < 1 ? 1 : threads) {}
CpuBackend::~CpuBackend() = default;

// 64-byte aligned (cache line, AVX-512) and zero-filled.
float* CpuBackend::raw_allocate(std::size_t numel, MemCategory /*category: all host memory here*/) {
  auto* p = static_cast<float*>(::operator new(numel * sizeof(float), std::align_val_t{64}));
  std::fill(p, p + numel, 0.0f);
  return p;
}
void CpuBackend::raw_free(float* data, std::size_t /*numel*/, MemCategory /*category*/) { ::operator delete(data, std::align_val_t{64}); }

void CpuBackend::zero_bytes(void* x, std::size_t bytes) {
  if (bytes > 0) std::memset(x, 0, bytes);
}
void CpuBackend::copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}
void CpuBackend::to_host_bytes(void* host, const void* device, std::size_t bytes) { copy_bytes(host, device, bytes); }
void CpuBackend::from_host_bytes(void* device, const void* host, std::size_t bytes) {
  copy_bytes(device, host, bytes);
}
void CpuBackend::convert_impl(void* dst, StorageDtype dst_dtype, const void* src, StorageDtype src_dtype,
                              std::size_t n) {
  convert_host(dst, dst_dtype, src, src_dtype, n);
}

void CpuBackend::gemm_impl(const kernels::GemmShape& s, float alpha, const float* a, const float* b, float beta,
                           float* c) {
  k::gemm(s, alpha, a, b, beta, c, &pool_);
}
void CpuBackend::matmul_forward_impl(float* out, const float* inp, const float* w, const float* bias, int n, int c,
                                     int oc) {
  k::matmul_forward(out, inp, w, bias, n, c, oc, &pool_);
}
void CpuBackend::matmul_backward_impl(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                                      const float* w, int n, int c, int oc) {
  k::matmul_backward(dinp, dw, dbias, dout, inp, w, n, c, oc, &pool_);
}
void CpuBackend::embedding_forward_impl(float* out, const std::int32_t* ids, const float* table, int n, int c,
                                        int row_begin, int rows) {
  k::embedding_forward(out, ids, table, n, c, row_begin, rows);
}
void CpuBackend::embedding_backward_impl(float* dtable, const float* dout, const std::int32_t* ids, int n, int c,
                                         int row_begin, int rows) {
  k::embedding_backward(dtable, dout, ids, n, c, row_begin, rows);
}
void CpuBackend::layernorm_forward_impl(float* out, float* mean, float* rstd, const float* inp, const float* w,
                                        const float* b, int n, int c, float eps) {
  k::layernorm_forward(out, mean, rstd, inp, w, b, n, c, eps);
}
void CpuBackend::layernorm_backward_impl(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                         const float* w, const float* mean, const float* rstd, int n, int c) {
  k::layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, n, c);
}
void CpuBackend::gelu_forward_impl(float* out, const float* inp, long n) { k::gelu_forward(out, inp, n); }
void CpuBackend::gelu_backward_impl(float* dinp, const float* inp, const float* dout, long n) {
  k::gelu_backward(dinp, inp, dout, n);
}
void CpuBackend::rmsnorm_forward_impl(float* out, float* rstd, const float* inp, const float* w, int n, int c,
                                      float eps) {
  k::rmsnorm_forward(out, rstd, inp, w, n, c, eps);
}
void CpuBackend::rmsnorm_backward_impl(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                                       const float* rstd, int n, int c) {
  k::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, n, c);
}
void CpuBackend::swiglu_forward_impl(float* out, const float* inp, int n, int f) { k::swiglu_forward(out, inp, n, f); }
void CpuBackend::swiglu_backward_impl(float* dinp, const float* inp, const float* dout, int n, int f) {
  k::swiglu_backward(dinp, inp, dout, n, f);
}
void CpuBackend::rope_impl(float* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                           int rot_dims, float theta, bool backward) {
  if (backward) k::rope_backward(x, positions, n, row_stride, heads, hd, theta, rot_dims);
  else k::rope_forward(x, positions, n, row_stride, heads, hd, theta, rot_dims);
}
void CpuBackend::kv_repeat_forward_impl(float* out, const float* inp, int n, int nh, int kv, int hd) {
  k::kv_repeat_forward(out, inp, n, nh, kv, hd);
}
void CpuBackend::kv_repeat_backward_impl(float* dinp, const float* dout, int n, int nh, int kv, int hd) {
  k::kv_repeat_backward(dinp, dout, n, nh, kv, hd);
}
void CpuBackend::attention_forward_impl(float* out, float* att, const float* qkv, int b, int t, int c, int nh,
                                        bool flash, int window) {
  if (flash) k::flash_attention_forward(out, att, qkv, b, t, c, nh, &pool_, window);
  else k::attention_forward(out, att, qkv, b, t, c, nh, &pool_, window);
}
void CpuBackend::attention_backward_impl(float* dqkv, const float* dout, const float* qkv, const float* out,
                                         const float* att, int b, int t, int c, int nh, bool flash, int window) {
  if (flash) k::flash_attention_backward(dqkv, dout, qkv, out, att, b, t, c, nh, &pool_, window);
  else k::attention_backward(dqkv, dout, qkv, att, b, t, c, nh, &pool_, window);
}
void CpuBackend::sparse_attention_forward_impl(float* out, float* att, const float* qkv, int b, int t, int c, int nh,
                                              const kernels::BlockLayout& layout) {
  k::sparse_attention_forward(out, att, qkv, b, t, c, nh, layout, &pool_);
}
void CpuBackend::sparse_attention_backward_impl(float* dqkv, const float* dout, const float* qkv, const float* att,
                                               int b, int t, int c, int nh, const kernels::BlockLayout& layout) {
  k::sparse_attention_backward(dqkv, dout, qkv, att, b, t, c, nh, layout, &pool_);
}
void CpuBackend::ce_row_max_impl(float* row_max, const float* logits, int n, int v) {
  k::cross_entropy_row_max(row_max, logits, n, v);
}
void CpuBackend::ce_row_sumexp_impl(float* row_sum, const float* logits, const float* row_max, int n, int v) {
  k::cross_entropy_row_sumexp(row_sum, logits, row_max, n, v);
}
void CpuBackend::ce_target_logit_impl(float* tl, const float* logits, const std::int32_t* targets, int n, int v,
                                      int vocab_begin) {
  k::cross_entropy_target_logit(tl, logits, targets, n, v, vocab_begin);
}
void CpuBackend::ce_loss_impl(float* losses, const float* row_max, const float* row_sum, const float* tl, int n) {
  k::cross_entropy_loss(losses, row_max, row_sum, tl, n);
}
void CpuBackend::ce_backward_impl(float* dlogits, const float* logits, const float* row_max, const float* row_sum,
                                  const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin) {
  k::cross_entropy_backward(dlogits, logits, row_max, row_sum, targets, dloss, n, v, vocab_begin);
}
void CpuBackend::adamw_impl(float* p, const float* g, float* m, float* v, long n, const kernels::AdamWParams& h) {
  k::adamw_update(p, g, m, v, n, h);
}
void CpuBackend::add_impl(float* out, const float* a, const float* b, long n) { k::add(out, a, b, n); }
void CpuBackend::accumulate_impl(float* dst, const float* src, long n) { k::accumulate(dst, src, n); }
void CpuBackend::scale_impl(float* x, float s, long n) { k::scale(x, s, n); }
void CpuBackend::add_bias_impl(float* x, const float* bias, int n, int c) { k::add_bias(x, bias, n, c); }
void CpuBackend::bias_backward_impl(float* dbias, const float* dout, int n, int c) {
  k::bias_backward(dbias, dout, n, c);
}
void CpuBackend::quantize_dequantize_impl(float* x, long n, int bits, long group) {
  k::quantize_dequantize(x, n, bits, group);
}
double CpuBackend::sum_squares_impl(const float* x, long n) { return k::sum_squares(x, n); }

}  // namespace ztune::executor
