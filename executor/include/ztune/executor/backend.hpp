#pragma once
// The compute backend: memory and kernels behind one interface, so the training
// code is the same on the CPU (this issue: fp32, Eigen GEMMs, the kernels/ CPU
// references) and on CUDA (issue 7: cuBLASLt, the CUDA kernels, a caching
// allocator; pointers are then device pointers and the kernel methods enqueue on
// the compute stream). Kernel methods mirror ztune::kernels::cpu (see
// kernels/include/ztune/kernels/conventions.hpp: forward =, backward +=).
// Every kernel call is timed under its OpKind: the public methods are
// non-virtual, time the protected *_impl, and call fence() first when profiling
// (a CUDA backend's fence synchronises the stream so host timers mean something).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "ztune/executor/buffer.hpp"
#include "ztune/executor/memory_tracker.hpp"
#include "ztune/executor/op_stats.hpp"
#include "ztune/executor/storage.hpp"
#include "ztune/kernels/adamw.hpp"
#include "ztune/kernels/block_sparse_layout.hpp"
#include "ztune/kernels/gemm.hpp"
#include "ztune/vocab/executor_support.hpp"

namespace ztune::executor {

/// One tensor of a fused AdamW step (Backend::adamw_fused): master weights and
/// Adam states in the step's state dtypes (AdamWStates: fp32 unless the plan
/// keeps them in 16 bits), the gradient in the step's grad dtype, and the copy
/// of the parameters the forward reads in the param dtype (null: the forward
/// reads the master itself, fp32 training).
struct AdamWSpan {
  void* master = nullptr;
  void* m = nullptr;
  void* v = nullptr;
  const void* grad = nullptr;
  void* param = nullptr;
  long n = 0;
};

/// The dtypes a fused AdamW step keeps its states in (Plan::master_dtype and
/// moments_dtype; NeMo's distributed_fused_adam dtype, Megatron-Core's
/// precision-aware optimizer): the arithmetic is fp32 whatever they are, the
/// states are read widened and written rounded.
struct AdamWStates {
  StorageDtype master = StorageDtype::fp32;
  StorageDtype moments = StorageDtype::fp32;
  [[nodiscard]] bool fp32() const { return master == StorageDtype::fp32 && moments == StorageDtype::fp32; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  [[nodiscard]] virtual std::string name() const = 0;
  /// Zero-filled buffer of `numel` floats, counted under `category`.
  Buffer allocate(std::size_t numel, MemCategory category);
  /// Called by Buffer's destructor.
  void free(float* data, std::size_t numel, MemCategory category);
  /// Zero-filled buffer of `numel` elements of `dtype`, counted as numel ×
  /// storage_bytes(dtype) under `category` (issue 24: 16-bit storage). fp32 is
  /// allocate(numel, category).
  Buffer allocate(std::size_t numel, MemCategory category, StorageDtype dtype);
  /// Called by Buffer's destructor for 16-bit buffers.
  void free_typed(float* data, std::size_t numel, MemCategory category, StorageDtype dtype);

  MemoryTracker& memory() { return memory_; }
  OpStats& ops() { return ops_; }

  // Memory movement. Host pointers are ordinary host memory. Buffers of the host_*
  // categories are host memory (pinned on CUDA); the others device memory.
  /// n elements of x's type set to zero.
  void zero(TensorRef x, std::size_t n) { zero_bytes(x.ptr, n * storage_bytes(x.dtype)); }
  /// dst ← src, n elements, rounded to dst's type when the types differ.
  void copy(TensorRef dst, ConstTensorRef src, std::size_t n);
  /// n elements of `device`'s type into host memory of the same type.
  void to_host(void* host, ConstTensorRef device, std::size_t n) {
    to_host_bytes(host, device.ptr, n * storage_bytes(device.dtype));
  }
  void from_host(TensorRef device, const void* host, std::size_t n) {
    from_host_bytes(device.ptr, host, n * storage_bytes(device.dtype));
  }
  /// Waits for all enqueued work (no-op on the CPU).
  virtual void fence() = 0;

  // Kernels (timed wrappers around the *_impl below). Every tensor operand may be
  // fp32 or 16-bit storage (TensorRef); arithmetic is fp32. The *_impl take
  // fp32: a 16-bit operand is converted into fp32 workspace first and a 16-bit
  // output rounded back after (stage_through.hpp), so every backend trains
  // mixed-precision storage with the kernels it has; a backend with native
  // 16-bit kernels overrides the *_native hook of that op. Statistics the
  // kernels keep for backward (LayerNorm's mean and rstd, the attention's
  // log-sum-exp, the cross-entropy's row max and sum) stay fp32, as Megatron's
  // fused kernels keep them.
  void gemm(const kernels::GemmShape& s, float alpha, ConstTensorRef a, ConstTensorRef b, float beta, TensorRef c);
  void matmul_forward(TensorRef out, ConstTensorRef inp, ConstTensorRef w, ConstTensorRef bias, int n, int c, int oc);
  void matmul_backward(TensorRef dinp, TensorRef dw, TensorRef dbias, ConstTensorRef dout, ConstTensorRef inp,
                       ConstTensorRef w, int n, int c, int oc);
  void embedding_forward(TensorRef out, const std::int32_t* ids, ConstTensorRef table, int n, int c, int row_begin,
                         int rows);
  void embedding_backward(TensorRef dtable, ConstTensorRef dout, const std::int32_t* ids, int n, int c, int row_begin,
                          int rows);
  /// `eps`: the model's norm_eps (kernels/layernorm.hpp's kLayerNormEps is GPT-2's).
  void layernorm_forward(TensorRef out, float* mean, float* rstd, ConstTensorRef inp, ConstTensorRef w,
                         ConstTensorRef b, int n, int c, float eps);
  void layernorm_backward(TensorRef dinp, TensorRef dw, TensorRef db, ConstTensorRef dout, ConstTensorRef inp,
                          ConstTensorRef w, const float* mean, const float* rstd, int n, int c);
  void gelu_forward(TensorRef out, ConstTensorRef inp, long n);
  void gelu_backward(TensorRef dinp, ConstTensorRef inp, ConstTensorRef dout, long n);
  // Llama-shaped models (kernels/layernorm.hpp's RMSNorm, swiglu.hpp, rope.hpp, kv_repeat.hpp).
  void rmsnorm_forward(TensorRef out, float* rstd, ConstTensorRef inp, ConstTensorRef w, int n, int c, float eps);
  void rmsnorm_backward(TensorRef dinp, TensorRef dw, ConstTensorRef dout, ConstTensorRef inp, ConstTensorRef w,
                        const float* rstd, int n, int c);
  void swiglu_forward(TensorRef out, ConstTensorRef inp, int n, int f);
  void swiglu_backward(TensorRef dinp, ConstTensorRef inp, ConstTensorRef dout, int n, int f);
  /// In place on the first rot_dims channels of `heads` heads (hd apart) at the start
  /// of each row; positions is a host array of n.
  void rope_forward(TensorRef x, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                    int rot_dims, float theta);
  void rope_backward(TensorRef dx, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                     int rot_dims, float theta);
  void kv_repeat_forward(TensorRef out, ConstTensorRef inp, int n, int nh, int kv, int hd);
  void kv_repeat_backward(TensorRef dinp, ConstTensorRef dout, int n, int nh, int kv, int hd);
  /// Causal attention, standard or `flash` (the plan's attention kernel). `att` is
  /// the state backward needs, of attention_state_elems() elements: the
  /// probabilities [B, NH, T, T] (standard; storage type of the caller's
  /// choosing), or the log-sum-exp [B, NH, T] of each query row (flash:
  /// FlashAttention's contract, kernels/attention.hpp; fp32; the CUDA kernel
  /// takes head sizes 64 and 128). Backward also reads the forward's `out`.
  [[nodiscard]] static std::size_t attention_state_elems(int b, int t, int nh, bool flash);
  /// `window` > 0: sliding-window attention (the CPU kernels; CUDA refuses it).
  void attention_forward(TensorRef out, TensorRef att, ConstTensorRef qkv, int b, int t, int c, int nh, bool flash,
                         int window = 0);
  void attention_backward(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv, ConstTensorRef out,
                          ConstTensorRef att, int b, int t, int c, int nh, bool flash, int window = 0);
  /// Block-sparse causal attention (kernels/sparse_attention.hpp): att holds
  /// b·nh·nnz·block² probabilities in the layout's CSR order.
  void sparse_attention_forward(TensorRef out, TensorRef att, ConstTensorRef qkv, int b, int t, int c, int nh,
                                const kernels::BlockLayout& layout);
  void sparse_attention_backward(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv, ConstTensorRef att, int b,
                                 int t, int c, int nh, const kernels::BlockLayout& layout);
  void ce_row_max(float* row_max, ConstTensorRef logits, int n, int v);
  void ce_row_sumexp(float* row_sum, ConstTensorRef logits, const float* row_max, int n, int v);
  void ce_target_logit(float* tl, ConstTensorRef logits, const std::int32_t* targets, int n, int v, int vocab_begin);
  void ce_loss(float* losses, const float* row_max, const float* row_sum, const float* tl, int n);
  void ce_backward(TensorRef dlogits, ConstTensorRef logits, const float* row_max, const float* row_sum,
                   const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin);
  void adamw(float* p, const float* g, float* m, float* v, long n, const kernels::AdamWParams& h);
  /// AdamW over all spans at once, gradients multiplied by grad_scale first
  /// (1/loss scale), 16-bit parameter copies written from the new masters (as
  /// stored: a 16-bit master rounds first). The CPU backend loops adamw() over
  /// fp32 copies of the gradients (and of 16-bit states); CUDA runs one launch
  /// over a device chunk table (kernels/multi_tensor.hpp) for fp32 states.
  void adamw_fused(std::span<const AdamWSpan> spans, StorageDtype grad_dtype, StorageDtype param_dtype,
                   const kernels::AdamWParams& h, float grad_scale = 1.0f, AdamWStates states = {});
  void add(TensorRef out, ConstTensorRef a, ConstTensorRef b, long n);
  void accumulate(TensorRef dst, ConstTensorRef src, long n);
  void scale(TensorRef x, float s, long n);
  /// x as it arrives through a quantized collective (ZeRO++; kernels/quantize.hpp).
  void quantize_dequantize(TensorRef x, long n, int bits, long group);
  void add_bias(TensorRef x, ConstTensorRef bias, int n, int c);
  void bias_backward(TensorRef dbias, ConstTensorRef dout, int n, int c);
  double sum_squares(ConstTensorRef x, long n);

  /// n elements of a tensor as fp32 in this backend's memory, for code that
  /// computes in fp32 (every *_impl kernel, the host-side ring and Ulysses, the
  /// optimizer's and the checkpoints' fp32 paths): the tensor itself when it is
  /// fp32 (or null), else a converted copy in workspace that lives as long as
  /// the object.
  class StagedIn {
   public:
    StagedIn(Backend& be, ConstTensorRef r, std::size_t n);
    [[nodiscard]] const float* data() const { return p_; }
    operator const float*() const { return p_; }  // NOLINT(google-explicit-constructor)

   private:
    Buffer buf_;
    const float* p_;
  };
  /// The same for a tensor to be written: fp32 workspace (holding the tensor's
  /// values first when `reads`: the kernel accumulates into it or works in
  /// place) that commit() rounds back into a 16-bit tensor; an fp32 tensor is
  /// written directly and commit() does nothing.
  class StagedOut {
   public:
    StagedOut(Backend& be, TensorRef r, std::size_t n, bool reads);
    [[nodiscard]] float* data() const { return p_; }
    operator float*() const { return p_; }  // NOLINT(google-explicit-constructor)
    void commit();

   private:
    Backend& be_;
    TensorRef r_;
    std::size_t n_;
    Buffer buf_;
    float* p_;
  };

 protected:
  /// Zero-filled storage for `numel` floats. The category says where it lives:
  /// host_optimizer and host_staging are host memory (pinned on CUDA), the rest
  /// device memory.
  virtual float* raw_allocate(std::size_t numel, MemCategory category) = 0;
  virtual void raw_free(float* data, std::size_t numel, MemCategory category) = 0;
  virtual void zero_bytes(void* x, std::size_t bytes) = 0;
  virtual void copy_bytes(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void to_host_bytes(void* host, const void* device, std::size_t bytes) = 0;
  virtual void from_host_bytes(void* device, const void* host, std::size_t bytes) = 0;
  /// dst ← src converted between storage types (dst_dtype ≠ src_dtype), n elements.
  virtual void convert_impl(void* dst, StorageDtype dst_dtype, const void* src, StorageDtype src_dtype,
                            std::size_t n) = 0;

  // A backend's own kernels for 16-bit operands (issue 24's speed path), tried
  // before the fp32 staging when some operand is not fp32: true when the
  // backend ran the op on the typed operands itself, false to stage (the
  // default, and every backend's answer for operand types it has no kernel
  // for). CUDA runs its GEMMs on 16-bit tensor cores straight from storage,
  // the plan's flash attention through cuDNN's fused attention, and every
  // other kernel through its bf16/fp16 instance.
  virtual bool gemm_native(const kernels::GemmShape& s, float alpha, ConstTensorRef a, ConstTensorRef b, float beta,
                           TensorRef c);
  virtual bool matmul_forward_native(TensorRef out, ConstTensorRef inp, ConstTensorRef w, ConstTensorRef bias, int n,
                                     int c, int oc);
  virtual bool matmul_backward_native(TensorRef dinp, TensorRef dw, TensorRef dbias, ConstTensorRef dout,
                                      ConstTensorRef inp, ConstTensorRef w, int n, int c, int oc);
  virtual bool attention_forward_native(TensorRef out, TensorRef att, ConstTensorRef qkv, int b, int t, int c,
                                        int nh, bool flash, int window);
  virtual bool attention_backward_native(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv, ConstTensorRef out,
                                         ConstTensorRef att, int b, int t, int c, int nh, bool flash, int window);
  // The memory-bound kernels' hooks (CUDA: each kernel's bf16/fp16 instance
  // on the stored values; a weight's or a table's gradient the kernel sums in
  // fp32 goes through an fp32 copy when it is kept in 16 bits).
  virtual bool embedding_forward_native(TensorRef out, const std::int32_t* ids, ConstTensorRef table, int n, int c,
                                        int row_begin, int rows);
  virtual bool embedding_backward_native(TensorRef dtable, ConstTensorRef dout, const std::int32_t* ids, int n, int c,
                                         int row_begin, int rows);
  virtual bool layernorm_forward_native(TensorRef out, float* mean, float* rstd, ConstTensorRef inp, ConstTensorRef w,
                                        ConstTensorRef b, int n, int c, float eps);
  virtual bool layernorm_backward_native(TensorRef dinp, TensorRef dw, TensorRef db, ConstTensorRef dout,
                                         ConstTensorRef inp, ConstTensorRef w, const float* mean, const float* rstd,
                                         int n, int c);
  virtual bool rmsnorm_forward_native(TensorRef out, float* rstd, ConstTensorRef inp, ConstTensorRef w, int n, int c,
                                      float eps);
  virtual bool rmsnorm_backward_native(TensorRef dinp, TensorRef dw, ConstTensorRef dout, ConstTensorRef inp,
                                       ConstTensorRef w, const float* rstd, int n, int c);
  virtual bool gelu_forward_native(TensorRef out, ConstTensorRef inp, long n);
  virtual bool gelu_backward_native(TensorRef dinp, ConstTensorRef inp, ConstTensorRef dout, long n);
  virtual bool swiglu_forward_native(TensorRef out, ConstTensorRef inp, int n, int f);
  virtual bool swiglu_backward_native(TensorRef dinp, ConstTensorRef inp, ConstTensorRef dout, int n, int f);
  virtual bool rope_native(TensorRef x, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                           int rot_dims, float theta, bool backward);
  virtual bool kv_repeat_forward_native(TensorRef out, ConstTensorRef inp, int n, int nh, int kv, int hd);
  virtual bool kv_repeat_backward_native(TensorRef dinp, ConstTensorRef dout, int n, int nh, int kv, int hd);
  virtual bool sparse_attention_forward_native(TensorRef out, TensorRef att, ConstTensorRef qkv, int b, int t, int c,
                                               int nh, const kernels::BlockLayout& layout);
  virtual bool sparse_attention_backward_native(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv,
                                                ConstTensorRef att, int b, int t, int c, int nh,
                                                const kernels::BlockLayout& layout);
  virtual bool ce_row_max_native(float* row_max, ConstTensorRef logits, int n, int v);
  virtual bool ce_row_sumexp_native(float* row_sum, ConstTensorRef logits, const float* row_max, int n, int v);
  virtual bool ce_target_logit_native(float* tl, ConstTensorRef logits, const std::int32_t* targets, int n, int v,
                                      int vocab_begin);
  virtual bool ce_backward_native(TensorRef dlogits, ConstTensorRef logits, const float* row_max,
                                  const float* row_sum, const std::int32_t* targets, const float* dloss, int n, int v,
                                  int vocab_begin);
  virtual bool add_native(TensorRef out, ConstTensorRef a, ConstTensorRef b, long n);
  virtual bool accumulate_native(TensorRef dst, ConstTensorRef src, long n);
  virtual bool scale_native(TensorRef x, float s, long n);
  virtual bool add_bias_native(TensorRef x, ConstTensorRef bias, int n, int c);
  virtual bool bias_backward_native(TensorRef dbias, ConstTensorRef dout, int n, int c);
  /// Σx² of a 16-bit tensor into *result.
  virtual bool sum_squares_native(double* result, ConstTensorRef x, long n);
  virtual bool quantize_dequantize_native(TensorRef x, long n, int bits, long group);

  virtual void gemm_impl(const kernels::GemmShape& s, float alpha, const float* a, const float* b, float beta,
                         float* c) = 0;
  virtual void matmul_forward_impl(float* out, const float* inp, const float* w, const float* bias, int n, int c,
                                   int oc) = 0;
  virtual void matmul_backward_impl(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                                    const float* w, int n, int c, int oc) = 0;
  virtual void embedding_forward_impl(float* out, const std::int32_t* ids, const float* table, int n, int c,
                                      int row_begin, int rows) = 0;
  virtual void embedding_backward_impl(float* dtable, const float* dout, const std::int32_t* ids, int n, int c,
                                       int row_begin, int rows) = 0;
  virtual void layernorm_forward_impl(float* out, float* mean, float* rstd, const float* inp, const float* w,
                                      const float* b, int n, int c, float eps) = 0;
  virtual void layernorm_backward_impl(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                       const float* w, const float* mean, const float* rstd, int n, int c) = 0;
  virtual void gelu_forward_impl(float* out, const float* inp, long n) = 0;
  virtual void gelu_backward_impl(float* dinp, const float* inp, const float* dout, long n) = 0;
  virtual void rmsnorm_forward_impl(float* out, float* rstd, const float* inp, const float* w, int n, int c,
                                    float eps) = 0;
  virtual void rmsnorm_backward_impl(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                                     const float* rstd, int n, int c) = 0;
  virtual void swiglu_forward_impl(float* out, const float* inp, int n, int f) = 0;
  virtual void swiglu_backward_impl(float* dinp, const float* inp, const float* dout, int n, int f) = 0;
  virtual void rope_impl(float* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                         int rot_dims, float theta, bool backward) = 0;
  virtual void kv_repeat_forward_impl(float* out, const float* inp, int n, int nh, int kv, int hd) = 0;
  virtual void kv_repeat_backward_impl(float* dinp, const float* dout, int n, int nh, int kv, int hd) = 0;
  virtual void attention_forward_impl(float* out, float* att, const float* qkv, int b, int t, int c, int nh,
                                      bool flash, int window) = 0;
  virtual void attention_backward_impl(float* dqkv, const float* dout, const float* qkv, const float* out,
                                       const float* att, int b, int t, int c, int nh, bool flash, int window) = 0;
  virtual void sparse_attention_forward_impl(float* out, float* att, const float* qkv, int b, int t, int c, int nh,
                                            const kernels::BlockLayout& layout) = 0;
  virtual void sparse_attention_backward_impl(float* dqkv, const float* dout, const float* qkv, const float* att,
                                             int b, int t, int c, int nh, const kernels::BlockLayout& layout) = 0;
  virtual void ce_row_max_impl(float* row_max, const float* logits, int n, int v) = 0;
  virtual void ce_row_sumexp_impl(float* row_sum, const float* logits, const float* row_max, int n, int v) = 0;
  virtual void ce_target_logit_impl(float* tl, const float* logits, const std::int32_t* targets, int n, int v,
                                    int vocab_begin) = 0;
  virtual void ce_loss_impl(float* losses, const float* row_max, const float* row_sum, const float* tl, int n) = 0;
  virtual void ce_backward_impl(float* dlogits, const float* logits, const float* row_max, const float* row_sum,
                                const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin) = 0;
  virtual void adamw_impl(float* p, const float* g, float* m, float* v, long n, const kernels::AdamWParams& h) = 0;
  virtual void adamw_fused_impl(std::span<const AdamWSpan> spans, StorageDtype grad_dtype, StorageDtype param_dtype,
                                const kernels::AdamWParams& h, float grad_scale, AdamWStates states);
  /// The elements of 16-bit optimizer states adamw_fused_impl widens at a time
  /// (vocab/executor_support.hpp staged_adam_chunk; CUDA's override is larger).
  [[nodiscard]] virtual std::size_t staged_adam_chunk() const { return ztune::staged_adam_chunk(ExecBackend::cpu); }
  virtual void add_impl(float* out, const float* a, const float* b, long n) = 0;
  virtual void accumulate_impl(float* dst, const float* src, long n) = 0;
  virtual void scale_impl(float* x, float s, long n) = 0;
  virtual void quantize_dequantize_impl(float* x, long n, int bits, long group) = 0;
  virtual void add_bias_impl(float* x, const float* bias, int n, int c) = 0;
  virtual void bias_backward_impl(float* dbias, const float* dout, int n, int c) = 0;
  virtual double sum_squares_impl(const float* x, long n) = 0;

 private:
  MemoryTracker memory_;
  OpStats ops_;
};

}  // namespace ztune::executor
