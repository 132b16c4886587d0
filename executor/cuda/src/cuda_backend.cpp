#include "ztune/executor/cuda/cuda_backend.hpp"

#include <stdexcept>
#include <cstring>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ztune/kernels/cuda/gelu.hpp"
#include "ztune/kernels/cuda/swiglu.hpp"
#include "ztune/kernels/cuda/adamw.hpp"
#include "ztune/kernels/cuda/attention.hpp"
#include "ztune/kernels/cuda/check.hpp"
#include "ztune/kernels/cuda/cross_entropy.hpp"
#include "ztune/kernels/cuda/cudnn_attention.hpp"
#include "ztune/kernels/cuda/elementwise.hpp"
#include "ztune/kernels/cuda/embedding.hpp"
#include "ztune/kernels/cuda/gemm.hpp"
#include "ztune/kernels/cuda/layernorm.hpp"
#include "ztune/kernels/cuda/kv_repeat.hpp"
#include "ztune/kernels/cuda/rope.hpp"
#include "ztune/kernels/cuda/loss_scale.hpp"
#include "ztune/kernels/cuda/quantize.hpp"
#include "ztune/kernels/cuda/sparse_attention.hpp"
#include "cuda_backend_internal.hpp"
#include "ztune/vocab/executor_support.hpp"

namespace ztune::executor::cuda {

namespace kc = ztune::kernels::cuda;

CudaBackend::CudaBackend(const CudaBackendOptions& options) : options_(options) {
  ZT_CUDA_CHECK(cudaSetDevice(options_.device));
  ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  ZT_CUDA_CHECK(cudaMallocHost(&host_double_, sizeof(double)));
  ZT_CUDA_CHECK(cudaMallocHost(&host_flag_, sizeof(int)));
  gemm_ = std::make_unique<kc::Gemm>();
  gemm_->set_allow_tf32(options_.gemm == GemmPrecision::tf32);
  flash_ = std::make_unique<kc::CudnnAttention>();
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(compute_);
  gemm_.reset();
  flash_.reset();
  if (layout_arrays_ != nullptr) cudaFree(layout_arrays_);
  if (fused_table_ != nullptr) cudaFree(fused_table_);
  cudaFreeHost(host_double_);
  cudaFreeHost(host_flag_);
  cudaStreamDestroy(compute_);
}

std::string CudaBackend::name() const {
  static constexpr const char* kNames[] = {"cuda-fp32", "cuda-tf32", "cuda-bf16gemm", "cuda-fp16gemm"};
  return kNames[static_cast<int>(options_.gemm)];
}

namespace {
// Offloaded optimizer states and staging copies live in pinned host memory, so
// the host Adam can read them and PCIe copies run at full speed.
bool on_host(MemCategory c) { return MemoryTracker::is_host(c); }
}  // namespace

float* CudaBackend::raw_allocate(std::size_t numel, MemCategory category) {
  if (on_host(category)) {
    void* h = nullptr;
    ZT_CUDA_CHECK(cudaHostAlloc(&h, numel * sizeof(float), cudaHostAllocDefault));
    std::memset(h, 0, numel * sizeof(float));  // Backend::allocate promises zeros
    return static_cast<float*>(h);
  }
  auto* p = static_cast<float*>(allocator_.allocate(numel * sizeof(float)));
  ZT_CUDA_CHECK(cudaMemsetAsync(p, 0, numel * sizeof(float), compute_));  // Backend::allocate promises zeros
  return p;
}

void CudaBackend::raw_free(float* data, std::size_t /*numel*/, MemCategory category) {
  if (on_host(category)) {
    cudaFreeHost(data);  // called from destructors: never throws, as allocator_.release
    return;
  }
  allocator_.release(data);
}

void CudaBackend::zero_bytes(void* x, std::size_t bytes) {
  if (bytes > 0) ZT_CUDA_CHECK(cudaMemsetAsync(x, 0, bytes, compute_));
}
void CudaBackend::copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0 && dst != src) ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, compute_));
}
// cudaMemcpyDefault (unified addressing): a "device" buffer may be one of the
// backend's host categories (offloaded ZeRO-3 partitions, pinned).
void CudaBackend::to_host_bytes(void* host, const void* device, std::size_t bytes) {
  if (bytes == 0) return;
  ZT_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDefault, compute_));
  ZT_CUDA_CHECK(cudaStreamSynchronize(compute_));
}
void CudaBackend::from_host_bytes(void* device, const void* host, std::size_t bytes) {
  if (bytes == 0) return;
  ZT_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyDefault, compute_));
  ZT_CUDA_CHECK(cudaStreamSynchronize(compute_));  // the caller may reuse `host` at once
}
// The cast kernels go to and from fp32; bf16 ↔ fp16 passes through fp32 scratch.
void CudaBackend::convert_impl(void* dst, StorageDtype dst_dtype, const void* src, StorageDtype src_dtype,
                               std::size_t n) {
  const auto len = static_cast<long>(n);
  if (n == 0) return;
  if (src_dtype == StorageDtype::fp32) {
    const auto* f = static_cast<const float*>(src);
    if (dst_dtype == StorageDtype::bf16) kc::cast<float, __nv_bfloat16>(static_cast<__nv_bfloat16*>(dst), f, len, compute_);
    else if (dst_dtype == StorageDtype::fp16) kc::cast<float, __half>(static_cast<__half*>(dst), f, len, compute_);
    else copy_bytes(dst, src, n * sizeof(float));
    return;
  }
  if (dst_dtype == StorageDtype::fp32) {
    auto* f = static_cast<float*>(dst);
    if (src_dtype == StorageDtype::bf16) kc::cast<__nv_bfloat16, float>(f, static_cast<const __nv_bfloat16*>(src), len, compute_);
    else kc::cast<__half, float>(f, static_cast<const __half*>(src), len, compute_);
    return;
  }
  if (dst_dtype == src_dtype) {
    copy_bytes(dst, src, n * storage_bytes(dst_dtype));
    return;
  }
  Scratch scratch(allocator_);
  float* f = scratch.get<float>(n);
  convert_impl(f, StorageDtype::fp32, src, src_dtype, n);
  convert_impl(dst, dst_dtype, f, StorageDtype::fp32, n);
}
void CudaBackend::fence() { ZT_CUDA_CHECK(cudaStreamSynchronize(compute_)); }

bool CudaBackend::unscale_and_check(float* grads, std::size_t n, float inv_scale) {
  Scratch s(allocator_);
  int* flag = s.get<int>(1);
  ZT_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), compute_));
  kc::unscale_check_finite<float>(grads, inv_scale, flag, static_cast<long>(n), compute_);
  ZT_CUDA_CHECK(cudaMemcpyAsync(host_flag_, flag, sizeof(int), cudaMemcpyDeviceToHost, compute_));
  ZT_CUDA_CHECK(cudaStreamSynchronize(compute_));
  return *host_flag_ != 0;
}

const std::int32_t* CudaBackend::device_ids(const std::int32_t* ids, int n, Scratch& scratch) {
  cudaPointerAttributes attr{};
  ZT_CUDA_CHECK(cudaPointerGetAttributes(&attr, ids));
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) return ids;
  auto* d = scratch.get<std::int32_t>(static_cast<std::size_t>(n));
  ZT_CUDA_CHECK(cudaMemcpyAsync(d, ids, static_cast<std::size_t>(n) * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                                compute_));
  return d;
}

// 16-bit GEMM precision: cast the stored operands (rows × row stride) into scratch.
void CudaBackend::run_gemm(const kernels::GemmShape& s, float alpha, const float* a, const float* b, float beta,
                           float* c, const float* bias) {
  const kc::GemmEpilogueArgs ep{bias != nullptr ? kc::GemmEpilogue::bias : kc::GemmEpilogue::none, bias};
  if (options_.gemm == GemmPrecision::fp32 || options_.gemm == GemmPrecision::tf32) {
    gemm_->run<float>(s, alpha, a, b, beta, c, compute_, ep);
    return;
  }
  const long a_elems = static_cast<long>(s.trans_a ? s.k : s.m) * s.lda;
  const long b_elems = static_cast<long>(s.trans_b ? s.n : s.k) * s.ldb;
  Scratch scratch(allocator_);
  const auto run16 = [&](auto tag) {
    using H = decltype(tag);
    H* a16 = scratch.get<H>(static_cast<std::size_t>(a_elems));
    H* b16 = scratch.get<H>(static_cast<std::size_t>(b_elems));
    kc::cast<float, H>(a16, a, a_elems, compute_);
    kc::cast<float, H>(b16, b, b_elems, compute_);
    gemm_->run<H, float>(s, alpha, a16, b16, beta, c, compute_, ep);
  };
  if (options_.gemm == GemmPrecision::bf16) {
    run16(__nv_bfloat16{});
  } else {
    run16(__half{});
  }
}

void CudaBackend::gemm_impl(const kernels::GemmShape& s, float alpha, const float* a, const float* b, float beta,
                            float* c) {
  run_gemm(s, alpha, a, b, beta, c, nullptr);
}

// out[n,oc] = inp[n,c]·w[c,oc] (+ bias through the epilogue).
void CudaBackend::matmul_forward_impl(float* out, const float* inp, const float* w, const float* bias, int n, int c,
                                      int oc) {
  run_gemm({false, false, n, oc, c, c, oc, oc}, 1.0f, inp, w, 0.0f, out, bias);
}

void CudaBackend::matmul_backward_impl(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                                       const float* w, int n, int c, int oc) {
  if (dinp != nullptr) run_gemm({false, true, n, c, oc, oc, oc, c}, 1.0f, dout, w, 1.0f, dinp, nullptr);
  run_gemm({true, false, c, oc, n, c, oc, oc}, 1.0f, inp, dout, 1.0f, dw, nullptr);
  if (dbias != nullptr) kc::bias_backward<float>(dbias, dout, n, oc, compute_);
}

void CudaBackend::embedding_forward_impl(float* out, const std::int32_t* ids, const float* table, int n, int c,
                                         int row_begin, int rows) {
  Scratch s(allocator_);
  kc::embedding_forward<float>(out, device_ids(ids, n, s), table, n, c, row_begin, rows, compute_);
}
void CudaBackend::embedding_backward_impl(float* dtable, const float* dout, const std::int32_t* ids, int n, int c,
                                          int row_begin, int rows) {
  Scratch s(allocator_);
  kc::embedding_backward<float>(dtable, dout, device_ids(ids, n, s), n, c, row_begin, rows, compute_);
}
void CudaBackend::layernorm_forward_impl(float* out, float* mean, float* rstd, const float* inp, const float* w,
                                         const float* b, int n, int c, float eps) {
  kc::layernorm_forward<float>(out, mean, rstd, inp, w, b, n, c, eps, compute_);
}
void CudaBackend::layernorm_backward_impl(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                          const float* w, const float* mean, const float* rstd, int n, int c) {
  kc::layernorm_backward<float>(dinp, dw, db, dout, inp, w, mean, rstd, n, c, compute_);
}
void CudaBackend::gelu_forward_impl(float* out, const float* inp, long n) {
  kc::gelu_forward<float>(out, inp, n, compute_);
}
void CudaBackend::gelu_backward_impl(float* dinp, const float* inp, const float* dout, long n) {
  kc::gelu_backward<float>(dinp, inp, dout, n, compute_);
}
void CudaBackend::rmsnorm_forward_impl(float* out, float* rstd, const float* inp, const float* w, int n, int c,
                                       float eps) {
  kc::rmsnorm_forward<float>(out, rstd, inp, w, n, c, eps, compute_);
}
void CudaBackend::rmsnorm_backward_impl(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                                        const float* rstd, int n, int c) {
  kc::rmsnorm_backward<float>(dinp, dw, dout, inp, w, rstd, n, c, compute_);
}
void CudaBackend::swiglu_forward_impl(float* out, const float* inp, int n, int f) {
  kc::swiglu_forward<float>(out, inp, n, f, compute_);
}
void CudaBackend::swiglu_backward_impl(float* dinp, const float* inp, const float* dout, int n, int f) {
  kc::swiglu_backward<float>(dinp, inp, dout, n, f, compute_);
}
void CudaBackend::rope_impl(float* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                            int rot_dims, float theta, bool backward) {
  Scratch s(allocator_);
  const std::int32_t* pos = device_ids(positions, n, s);
  if (backward) kc::rope_backward<float>(x, pos, n, row_stride, heads, hd, theta, rot_dims, compute_);
  else kc::rope_forward<float>(x, pos, n, row_stride, heads, hd, theta, rot_dims, compute_);
}
void CudaBackend::kv_repeat_forward_impl(float* out, const float* inp, int n, int nh, int kv, int hd) {
  kc::kv_repeat_forward<float>(out, inp, n, nh, kv, hd, compute_);
}
void CudaBackend::kv_repeat_backward_impl(float* dinp, const float* dout, int n, int nh, int kv, int hd) {
  kc::kv_repeat_backward<float>(dinp, dout, n, nh, kv, hd, compute_);
}
// flash: the fused kernel (kernels/cuda/attention.hpp), head sizes 64 and 128
// (unsupported_reason refuses other plans before a rank starts); it throws for
// others. standard: cuBLASLt batched GEMMs and a softmax kernel, probabilities kept.
void CudaBackend::attention_forward_impl(float* out, float* att, const float* qkv, int b, int t, int c, int nh,
                                         bool flash, int window) {
  // The CUDA kernels attend the whole causal prefix; unsupported_reason
  // refuses windowed models for this backend before a rank starts.
  if (window > 0) throw std::logic_error("CudaBackend: sliding-window attention is not implemented on CUDA");
  if (flash) {
    flash_->forward<float>(out, att, qkv, b, t, c, nh, compute_);  // fp32: the flash kernel
    return;
  }
  Scratch s(allocator_);
  float* ws = s.get<float>(kc::attention_workspace_elems(b, t, c, nh));
  kc::attention_forward<float>(*gemm_, out, att, qkv, ws, b, t, c, nh, compute_);
}
void CudaBackend::attention_backward_impl(float* dqkv, const float* dout, const float* qkv, const float* out,
                                          const float* att, int b, int t, int c, int nh, bool flash, int window) {
  if (window > 0) throw std::logic_error("CudaBackend: sliding-window attention is not implemented on CUDA");
  if (flash) {
    flash_->backward<float>(dqkv, dout, qkv, out, att, b, t, c, nh, compute_);  // fp32: the flash kernels
    return;
  }
  Scratch s(allocator_);
  float* ws = s.get<float>(kc::attention_workspace_elems(b, t, c, nh));
  kc::attention_backward<float>(*gemm_, dqkv, dout, qkv, att, ws, b, t, c, nh, compute_);
}
const kc::DeviceBlockLayout& CudaBackend::device_layout(const kernels::BlockLayout& l) {
  const bool same = layout_arrays_ != nullptr && l.block == layout_host_.block && l.blocks == layout_host_.blocks &&
                    l.row_ptr == layout_host_.row_ptr && l.cols == layout_host_.cols;
  if (same) return layout_device_;
  // Kernels already enqueued may still read the old arrays.
  ZT_CUDA_CHECK(cudaStreamSynchronize(compute_));
  if (layout_arrays_ != nullptr) ZT_CUDA_CHECK(cudaFree(layout_arrays_));
  const std::size_t n = l.row_ptr.size() + l.cols.size();
  ZT_CUDA_CHECK(cudaMalloc(&layout_arrays_, n * sizeof(int)));
  ZT_CUDA_CHECK(cudaMemcpy(layout_arrays_, l.row_ptr.data(), l.row_ptr.size() * sizeof(int), cudaMemcpyHostToDevice));
  ZT_CUDA_CHECK(cudaMemcpy(layout_arrays_ + l.row_ptr.size(), l.cols.data(), l.cols.size() * sizeof(int),
                           cudaMemcpyHostToDevice));
  layout_host_ = l;
  layout_device_ = {layout_arrays_, layout_arrays_ + l.row_ptr.size(), l.blocks, l.block, l.nnz()};
  return layout_device_;
}
void CudaBackend::sparse_attention_forward_impl(float* out, float* att, const float* qkv, int b, int t, int c, int nh,
                                                const kernels::BlockLayout& layout) {
  kc::sparse_attention_forward<float>(out, att, qkv, b, t, c, nh, device_layout(layout), compute_);
}
void CudaBackend::sparse_attention_backward_impl(float* dqkv, const float* dout, const float* qkv, const float* att,
                                                 int b, int t, int c, int nh, const kernels::BlockLayout& layout) {
  const auto& dl = device_layout(layout);
  Scratch s(allocator_);
  float* ws = s.get<float>(kc::sparse_attention_att_elems(b, nh, dl));
  kc::sparse_attention_backward<float>(dqkv, ws, dout, qkv, att, b, t, c, nh, dl, compute_);
}
void CudaBackend::ce_row_max_impl(float* row_max, const float* logits, int n, int v) {
  kc::ce_row_max<float>(row_max, logits, n, v, compute_);
}
void CudaBackend::ce_row_sumexp_impl(float* row_sum, const float* logits, const float* row_max, int n, int v) {
  kc::ce_row_sumexp<float>(row_sum, logits, row_max, n, v, compute_);
}
void CudaBackend::ce_target_logit_impl(float* tl, const float* logits, const std::int32_t* targets, int n, int v,
                                       int vocab_begin) {
  Scratch s(allocator_);
  kc::ce_target_logit<float>(tl, logits, device_ids(targets, n, s), n, v, vocab_begin, compute_);
}
void CudaBackend::ce_loss_impl(float* losses, const float* row_max, const float* row_sum, const float* tl, int n) {
  kc::ce_loss(losses, row_max, row_sum, tl, n, compute_);
}
void CudaBackend::ce_backward_impl(float* dlogits, const float* logits, const float* row_max, const float* row_sum,
                                   const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin) {
  Scratch s(allocator_);
  kc::ce_backward<float>(dlogits, logits, row_max, row_sum, device_ids(targets, n, s), dloss, n, v, vocab_begin,
                         compute_);
}
void CudaBackend::adamw_impl(float* p, const float* g, float* m, float* v, long n, const kernels::AdamWParams& h) {
  const kc::AdamWTensor<float, float> t{p, m, v, g, nullptr, n};
  kc::adamw_multi_tensor<float, float>(&t, 1, h, 1.0f, compute_);
}
namespace {
bool same_spans(std::span<const AdamWSpan> a, const std::vector<AdamWSpan>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].master != b[i].master || a[i].m != b[i].m || a[i].v != b[i].v || a[i].grad != b[i].grad ||
        a[i].param != b[i].param || a[i].n != b[i].n)
      return false;
  return true;
}
}  // namespace

// One kc::adamw_chunked launch for the step's states at their own dtypes
// (adam_states_native's set, which adamw.cu instantiates); other type mixes
// take Backend's staged path (fp32 copies, the same update).
void CudaBackend::adamw_fused_impl(std::span<const AdamWSpan> spans, StorageDtype grad_dtype,
                                   StorageDtype param_dtype, const kernels::AdamWParams& h, float grad_scale,
                                   AdamWStates states) {
  using G = StorageDtype;
  const bool native = (grad_dtype == G::fp32 || grad_dtype == param_dtype) &&
                      adam_states_native(ExecBackend::cuda, precision_of(param_dtype), precision_of(states.master),
                                         precision_of(states.moments));
  if (!native) {
    Backend::adamw_fused_impl(spans, grad_dtype, param_dtype, h, grad_scale, states);
    return;
  }
  if (spans.empty()) return;
  if (!(same_spans(spans, fused_spans_) && grad_dtype == fused_grad_ && param_dtype == fused_param_ &&
        states.master == fused_states_.master && states.moments == fused_states_.moments)) {
    // The table's layout is the same for every (G, P, M, S): AdamWTensor holds pointers and a length.
    using Row = kc::AdamWTensor<float, float>;
    static_assert(sizeof(kc::AdamWTensor<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, __half>) == sizeof(Row));
    std::vector<Row> tensors;
    std::vector<std::int64_t> sizes;
    for (const AdamWSpan& sp : spans) {
      ZT_REQUIRE(sp.n >= 0 && sp.master != nullptr && sp.m != nullptr && sp.v != nullptr && sp.grad != nullptr,
                 "CudaBackend::adamw_fused: a span needs master, m, v and grad");
      tensors.push_back(Row{static_cast<float*>(sp.master), static_cast<float*>(sp.m), static_cast<float*>(sp.v),
                            static_cast<const float*>(sp.grad), static_cast<float*>(sp.param), sp.n});
      sizes.push_back(sp.n);
    }
    const std::vector<kernels::TensorChunk> chunks = kernels::build_chunk_table(sizes, kc::kAdamWChunkElems);
    const std::size_t tensor_bytes = (tensors.size() * sizeof(Row) + 255) / 256 * 256;
    const std::size_t bytes = tensor_bytes + chunks.size() * sizeof(kernels::TensorChunk);
    ZT_CUDA_CHECK(cudaStreamSynchronize(compute_));  // a launch already enqueued may read the old table
    if (fused_table_ != nullptr) ZT_CUDA_CHECK(cudaFree(fused_table_));
    fused_table_ = nullptr;
    fused_spans_.clear();
    ZT_CUDA_CHECK(cudaMalloc(&fused_table_, bytes));
    auto* base = static_cast<unsigned char*>(fused_table_);
    ZT_CUDA_CHECK(cudaMemcpy(base, tensors.data(), tensors.size() * sizeof(Row), cudaMemcpyHostToDevice));
    if (!chunks.empty())
      ZT_CUDA_CHECK(cudaMemcpy(base + tensor_bytes, chunks.data(), chunks.size() * sizeof(kernels::TensorChunk),
                               cudaMemcpyHostToDevice));
    fused_chunk_offset_ = tensor_bytes;
    fused_chunks_ = static_cast<int>(chunks.size());
    fused_spans_.assign(spans.begin(), spans.end());
    fused_grad_ = grad_dtype;
    fused_param_ = param_dtype;
    fused_states_ = states;
  }
  auto* base = static_cast<unsigned char*>(fused_table_);
  const auto* chunks = reinterpret_cast<const kernels::TensorChunk*>(base + fused_chunk_offset_);
  const auto launch = [&](auto g_tag, auto p_tag, auto m_tag, auto s_tag) {
    using GT = decltype(g_tag);
    using PT = decltype(p_tag);
    using MT = decltype(m_tag);
    using ST = decltype(s_tag);
    kc::adamw_chunked<GT, PT, MT, ST>(reinterpret_cast<const kc::AdamWTensor<GT, PT, MT, ST>*>(base), chunks,
                                      fused_chunks_, h, grad_scale, compute_);
  };
  if (param_dtype == G::fp32) {  // fp32 training: fp32 gradients and master, moments fp32 or 16-bit
    if (states.moments == G::fp32) launch(float{}, float{}, float{}, float{});
    else with_half_type(states.moments, [&](auto s) { launch(float{}, float{}, float{}, s); });
    return;
  }
  with_half_type(param_dtype, [&](auto p) {
    using P = decltype(p);
    // A state's type: fp32, or the parameters' 16-bit type (adam_states_native).
    const auto state = [&](StorageDtype d, auto f) {
      if (d == G::fp32) f(float{});
      else f(P{});
    };
    state(states.master, [&](auto m) {
      state(states.moments, [&](auto s) {
        if (grad_dtype == G::fp32) launch(float{}, p, m, s);
        else launch(p, p, m, s);
      });
    });
  });
}

void CudaBackend::add_impl(float* out, const float* a, const float* b, long n) {
  kc::add<float>(out, a, b, n, compute_);
}
void CudaBackend::accumulate_impl(float* dst, const float* src, long n) {
  kc::accumulate<float>(dst, src, n, compute_);
}
void CudaBackend::scale_impl(float* x, float s, long n) { kc::scale<float>(x, s, n, compute_); }
void CudaBackend::add_bias_impl(float* x, const float* bias, int n, int c) {
  kc::add_bias<float>(x, bias, n, c, compute_);
}
void CudaBackend::quantize_dequantize_impl(float* x, long n, int bits, long group) {
  kc::quantize_dequantize(x, n, bits, group, compute_);
}
void CudaBackend::bias_backward_impl(float* dbias, const float* dout, int n, int c) {
  kc::bias_backward<float>(dbias, dout, n, c, compute_);
}
double CudaBackend::sum_squares_impl(const float* x, long n) {
  Scratch s(allocator_);
  double* d = s.get<double>(1);
  ZT_CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(double), compute_));
  kc::sum_squares<float>(d, x, n, compute_);
  ZT_CUDA_CHECK(cudaMemcpyAsync(host_double_, d, sizeof(double), cudaMemcpyDeviceToHost, compute_));
  ZT_CUDA_CHECK(cudaStreamSynchronize(compute_));
  return *host_double_;
}

}  // namespace ztune::executor::cuda
