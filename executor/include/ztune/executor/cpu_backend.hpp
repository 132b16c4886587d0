#pragma once
// The CPU backend: host memory, the kernels/ CPU references, Eigen GEMMs spread
// over a thread pool. Ids (token arrays) are plain host int32 arrays.
#include <memory>

#include "ztune/executor/backend.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::executor {

class CpuBackend final : public Backend {
 public:
  /// `threads` >= 1 threads for GEMMs and attention heads.
  explicit CpuBackend(int threads);
  ~CpuBackend() override;
  [[nodiscard]] std::string name() const override { return "cpu"; }
  kernels::ThreadPool& pool() { return pool_; }

  void fence() override {}

 protected:
  void zero_bytes(void* x, std::size_t bytes) override;
  void copy_bytes(void* dst, const void* src, std::size_t bytes) override;
  void to_host_bytes(void* host, const void* device, std::size_t bytes) override;
  void from_host_bytes(void* device, const void* host, std::size_t bytes) override;
  void convert_impl(void* dst, StorageDtype dst_dtype, const void* src, StorageDtype src_dtype,
                    std::size_t n) override;
  float* raw_allocate(std::size_t numel, MemCategory category) override;
  void raw_free(float* data, std::size_t numel, MemCategory category) override;
  void gemm_impl(const kernels::GemmShape& s, float alpha, const float* a, const float* b, float beta,
                 float* c) override;
  void matmul_forward_impl(float* out, const float* inp, const float* w, const float* bias, int n, int c,
                           int oc) override;
  void matmul_backward_impl(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                            const float* w, int n, int c, int oc) override;
  void embedding_forward_impl(float* out, const std::int32_t* ids, const float* table, int n, int c, int row_begin,
                              int rows) override;
  void embedding_backward_impl(float* dtable, const float* dout, const std::int32_t* ids, int n, int c,
                               int row_begin, int rows) override;
  void layernorm_forward_impl(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                              int n, int c, float eps) override;
  void layernorm_backward_impl(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                               const float* mean, const float* rstd, int n, int c) override;
  void gelu_forward_impl(float* out, const float* inp, long n) override;
  void gelu_backward_impl(float* dinp, const float* inp, const float* dout, long n) override;
  void rmsnorm_forward_impl(float* out, float* rstd, const float* inp, const float* w, int n, int c,
                            float eps) override;
  void rmsnorm_backward_impl(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                             const float* rstd, int n, int c) override;
  void swiglu_forward_impl(float* out, const float* inp, int n, int f) override;
  void swiglu_backward_impl(float* dinp, const float* inp, const float* dout, int n, int f) override;
  void rope_impl(float* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd, int rot_dims,
                 float theta, bool backward) override;
  void kv_repeat_forward_impl(float* out, const float* inp, int n, int nh, int kv, int hd) override;
  void kv_repeat_backward_impl(float* dinp, const float* dout, int n, int nh, int kv, int hd) override;
  void attention_forward_impl(float* out, float* att, const float* qkv, int b, int t, int c, int nh, bool flash,
                              int window) override;
  void attention_backward_impl(float* dqkv, const float* dout, const float* qkv, const float* out, const float* att,
                               int b, int t, int c, int nh, bool flash, int window) override;
  void sparse_attention_forward_impl(float* out, float* att, const float* qkv, int b, int t, int c, int nh,
                                    const kernels::BlockLayout& layout) override;
  void sparse_attention_backward_impl(float* dqkv, const float* dout, const float* qkv, const float* att, int b,
                                     int t, int c, int nh, const kernels::BlockLayout& layout) override;
  void ce_row_max_impl(float* row_max, const float* logits, int n, int v) override;
  void ce_row_sumexp_impl(float* row_sum, const float* logits, const float* row_max, int n, int v) override;
  void ce_target_logit_impl(float* tl, const float* logits, const std::int32_t* targets, int n, int v,
                            int vocab_begin) override;
  void ce_loss_impl(float* losses, const float* row_max, const float* row_sum, const float* tl, int n) override;
  void ce_backward_impl(float* dlogits, const float* logits, const float* row_max, const float* row_sum,
                        const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin) override;
  void adamw_impl(float* p, const float* g, float* m, float* v, long n, const kernels::AdamWParams& h) override;
  void add_impl(float* out, const float* a, const float* b, long n) override;
  void accumulate_impl(float* dst, const float* src, long n) override;
  void scale_impl(float* x, float s, long n) override;
  void quantize_dequantize_impl(float* x, long n, int bits, long group) override;
  void add_bias_impl(float* x, const float* bias, int n, int c) override;
  void bias_backward_impl(float* dbias, const float* dout, int n, int c) override;
  double sum_squares_impl(const float* x, long n) override;

 private:
  kernels::ThreadPool pool_;
};

}  // namespace ztune::executor
