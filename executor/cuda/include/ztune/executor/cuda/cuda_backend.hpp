#pragma once
// The CUDA backend (issue 7): the executor's Backend on one GPU. Buffers are device
// memory from a caching allocator; every kernel method enqueues on the compute
// stream (kernels/cuda launchers, cuBLASLt GEMMs); fence() synchronises it, so the
// Backend's per-op host timers are meaningful when profiling. Offloaded states live
// in pinned host memory and move on the compute stream (unified addressing), so the
// executor's offload copies do not overlap its kernels; NcclCommunicator has its own
// communication stream, which does.
//
// Storage is fp32 or 16-bit (TensorRef). 16-bit operands run on the stored
// values (the *_native hooks, cuda_backend_native.cpp): the GEMMs on 16-bit
// tensor cores, the plan's flash attention through cuDNN, every other kernel
// through its bf16/fp16 instance. Operands of mixed types take the *_impl
// fp32 kernels, the Backend base class
// converting them through fp32 workspace with the cast kernels (convert_impl).
// GEMM precision for fp32 storage is a choice: fp32 (exact, for equivalence
// with the CPU backend), tf32, or bf16/fp16 tensor-core products with fp32
// accumulation and fp32 output (the operands are cast into a workspace
// first). Ids may be host or device int32 arrays: host ones are staged through
// a device buffer.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "ztune/executor/backend.hpp"
#include "ztune/executor/cuda/caching_allocator.hpp"
#include "ztune/kernels/cuda/sparse_attention.hpp"

namespace ztune::kernels::cuda {
class Gemm;
class CudnnAttention;
}

namespace ztune::executor::cuda {

enum class GemmPrecision : std::uint8_t { fp32, tf32, bf16, fp16 };

struct CudaBackendOptions {
  int device = 0;
  GemmPrecision gemm = GemmPrecision::fp32;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options = {});
  ~CudaBackend() override;
  [[nodiscard]] std::string name() const override;

  [[nodiscard]] cudaStream_t compute_stream() const { return compute_; }
  [[nodiscard]] int device() const { return options_.device; }
  [[nodiscard]] AllocatorStats allocator_stats() const { return allocator_.stats(); }

  void fence() override;

  /// Mixed precision: x *= inv_scale and returns whether any element was inf/NaN
  /// (synchronises; the DynamicLossScaler then decides whether to skip the step).
  bool unscale_and_check(float* grads, std::size_t n, float inv_scale);

 protected:
  float* raw_allocate(std::size_t numel, MemCategory category) override;
  void raw_free(float* data, std::size_t numel, MemCategory category) override;
  void zero_bytes(void* x, std::size_t bytes) override;
  void copy_bytes(void* dst, const void* src, std::size_t bytes) override;
  void to_host_bytes(void* host, const void* device, std::size_t bytes) override;
  void from_host_bytes(void* device, const void* host, std::size_t bytes) override;
  void convert_impl(void* dst, StorageDtype dst_dtype, const void* src, StorageDtype src_dtype,
                    std::size_t n) override;
  // 16-bit storage's GEMMs on 16-bit tensor cores straight from storage (no
  // fp32 staging, no operand casts): A and B of one 16-bit type, C of that
  // type or fp32 (fp32 gradients beside 16-bit parameters); else staged.
  bool gemm_native(const kernels::GemmShape& s, float alpha, ConstTensorRef a, ConstTensorRef b, float beta,
                   TensorRef c) override;
  bool matmul_forward_native(TensorRef out, ConstTensorRef inp, ConstTensorRef w, ConstTensorRef bias, int n, int c,
                             int oc) override;
  bool matmul_backward_native(TensorRef dinp, TensorRef dw, TensorRef dbias, ConstTensorRef dout, ConstTensorRef inp,
                              ConstTensorRef w, int n, int c, int oc) override;
  // The plan's flash attention on 16-bit Q|K|V, output and gradients (the
  // log-sum-exp fp32): CudnnAttention, cuDNN's fused attention where its graph
  // is accepted, the flash kernels' 16-bit instances otherwise.
  bool attention_forward_native(TensorRef out, TensorRef att, ConstTensorRef qkv, int b, int t, int c, int nh,
                                bool flash, int window) override;
  bool attention_backward_native(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv, ConstTensorRef out,
                                 ConstTensorRef att, int b, int t, int c, int nh, bool flash, int window) override;
  // Every memory-bound kernel's bf16/fp16 instance on the stored values
  // (cuda_backend_native.cpp), where the op's operands share one 16-bit type.
  bool embedding_forward_native(TensorRef out, const std::int32_t* ids, ConstTensorRef table, int n, int c,
                                int row_begin, int rows) override;
  bool embedding_backward_native(TensorRef dtable, ConstTensorRef dout, const std::int32_t* ids, int n, int c,
                                 int row_begin, int rows) override;
  bool layernorm_forward_native(TensorRef out, float* mean, float* rstd, ConstTensorRef inp, ConstTensorRef w,
                                ConstTensorRef b, int n, int c, float eps) override;
  bool layernorm_backward_native(TensorRef dinp, TensorRef dw, TensorRef db, ConstTensorRef dout, ConstTensorRef inp,
                                 ConstTensorRef w, const float* mean, const float* rstd, int n, int c) override;
  bool rmsnorm_forward_native(TensorRef out, float* rstd, ConstTensorRef inp, ConstTensorRef w, int n, int c,
                              float eps) override;
  bool rmsnorm_backward_native(TensorRef dinp, TensorRef dw, ConstTensorRef dout, ConstTensorRef inp,
                               ConstTensorRef w, const float* rstd, int n, int c) override;
  bool gelu_forward_native(TensorRef out, ConstTensorRef inp, long n) override;
  bool gelu_backward_native(TensorRef dinp, ConstTensorRef inp, ConstTensorRef dout, long n) override;
  bool swiglu_forward_native(TensorRef out, ConstTensorRef inp, int n, int f) override;
  bool swiglu_backward_native(TensorRef dinp, ConstTensorRef inp, ConstTensorRef dout, int n, int f) override;
  bool rope_native(TensorRef x, const std::int32_t* positions, int n, int row_stride, int heads, int hd, int rot_dims,
                   float theta, bool backward) override;
  bool kv_repeat_forward_native(TensorRef out, ConstTensorRef inp, int n, int nh, int kv, int hd) override;
  bool kv_repeat_backward_native(TensorRef dinp, ConstTensorRef dout, int n, int nh, int kv, int hd) override;
  bool sparse_attention_forward_native(TensorRef out, TensorRef att, ConstTensorRef qkv, int b, int t, int c, int nh,
                                       const kernels::BlockLayout& layout) override;
  bool sparse_attention_backward_native(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv, ConstTensorRef att,
                                        int b, int t, int c, int nh, const kernels::BlockLayout& layout) override;
  bool ce_row_max_native(float* row_max, ConstTensorRef logits, int n, int v) override;
  bool ce_row_sumexp_native(float* row_sum, ConstTensorRef logits, const float* row_max, int n, int v) override;
  bool ce_target_logit_native(float* tl, ConstTensorRef logits, const std::int32_t* targets, int n, int v,
                              int vocab_begin) override;
  bool ce_backward_native(TensorRef dlogits, ConstTensorRef logits, const float* row_max, const float* row_sum,
                          const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin) override;
  bool add_native(TensorRef out, ConstTensorRef a, ConstTensorRef b, long n) override;
  bool accumulate_native(TensorRef dst, ConstTensorRef src, long n) override;
  bool scale_native(TensorRef x, float s, long n) override;
  bool add_bias_native(TensorRef x, ConstTensorRef bias, int n, int c) override;
  bool bias_backward_native(TensorRef dbias, ConstTensorRef dout, int n, int c) override;
  bool sum_squares_native(double* result, ConstTensorRef x, long n) override;
  bool quantize_dequantize_native(TensorRef x, long n, int bits, long group) override;
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
  /// One kc::adamw_chunked launch over a device chunk table, uploaded when the
  /// span list or the dtypes differ from the last call (a training run's never
  /// do), the states at their own dtypes (16-bit ones each fp32 or the
  /// parameters' type: adam_states_native); other type mixes take Backend's
  /// staged path.
  void adamw_fused_impl(std::span<const AdamWSpan> spans, StorageDtype grad_dtype, StorageDtype param_dtype,
                        const kernels::AdamWParams& h, float grad_scale, AdamWStates states) override;
  [[nodiscard]] std::size_t staged_adam_chunk() const override { return ztune::staged_adam_chunk(ExecBackend::cuda); }
  void add_impl(float* out, const float* a, const float* b, long n) override;
  void accumulate_impl(float* dst, const float* src, long n) override;
  void scale_impl(float* x, float s, long n) override;
  void quantize_dequantize_impl(float* x, long n, int bits, long group) override;
  void add_bias_impl(float* x, const float* bias, int n, int c) override;
  void bias_backward_impl(float* dbias, const float* dout, int n, int c) override;
  double sum_squares_impl(const float* x, long n) override;

 private:
  /// A device buffer from the allocator for the duration of one call (stream-ordered reuse).
  class Scratch;
  const std::int32_t* device_ids(const std::int32_t* ids, int n, Scratch& scratch);
  void run_gemm(const kernels::GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c,
                const float* bias);

  CudaBackendOptions options_;
  cudaStream_t compute_ = nullptr;
  CachingAllocator allocator_;
  std::unique_ptr<kernels::cuda::Gemm> gemm_;
  /// The plan's flash attention: cuDNN's fused SDPA for 16-bit storage, the flash
  /// kernels otherwise (this backend's fp32 storage always takes them; issue 24).
  std::unique_ptr<kernels::cuda::CudnnAttention> flash_;
  /// The block layout's CSR arrays on the device, uploaded when a call brings
  /// another layout than the last one (every chunk of a plan uses one).
  const kernels::cuda::DeviceBlockLayout& device_layout(const kernels::BlockLayout& layout);
  kernels::BlockLayout layout_host_;
  kernels::cuda::DeviceBlockLayout layout_device_;
  int* layout_arrays_ = nullptr;   // row_ptr then cols, one cudaMalloc
  double* host_double_ = nullptr;  // pinned: sum_squares result
  int* host_flag_ = nullptr;       // pinned: overflow flag
  // adamw_fused's device table: the tensor list, then the chunk rows (one cudaMalloc).
  std::vector<AdamWSpan> fused_spans_;
  StorageDtype fused_grad_ = StorageDtype::fp32, fused_param_ = StorageDtype::fp32;
  AdamWStates fused_states_;
  void* fused_table_ = nullptr;
  std::size_t fused_chunk_offset_ = 0;  // bytes from fused_table_ to the chunk rows
  int fused_chunks_ = 0;
};

}  // namespace ztune::executor::cuda
