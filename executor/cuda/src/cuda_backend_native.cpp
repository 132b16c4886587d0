// CudaBackend's 16-bit kernels on the stored values (issue 24 item 3): the
// Backend's *_native hooks. Each runs the bf16/fp16 instance of its kernel
// (kernels/cuda) when the op's activations, parameters and their gradients share
// one 16-bit type, and answers false otherwise (mixed types: Backend stages
// them through fp32, as the CPU backend always does). Kernels that sum a
// weight's or a table's gradient in fp32 (the norms', the bias gradient, the
// embedding's atomics) take it directly when it is fp32 and through an fp32
// copy, rounded back after, when it is 16-bit: those copies are a weight's
// size, the embedding's a table shard's. Statistics (LayerNorm's mean and rstd,
// the cross-entropy's row max and sum, the flash log-sum-exp) are fp32 as on
// the CPU, and every kernel's arithmetic is fp32: the results are the staged
// path's but for summation order.
#include <cuda_runtime.h>

#include <initializer_list>

#include "cuda_backend_internal.hpp"
#include "ztune/kernels/cuda/attention.hpp"
#include "ztune/kernels/cuda/cross_entropy.hpp"
#include "ztune/kernels/cuda/cudnn_attention.hpp"
#include "ztune/kernels/cuda/elementwise.hpp"
#include "ztune/kernels/cuda/embedding.hpp"
#include "ztune/kernels/cuda/gelu.hpp"
#include "ztune/kernels/cuda/gemm.hpp"
#include "ztune/kernels/cuda/kv_repeat.hpp"
#include "ztune/kernels/cuda/layernorm.hpp"
#include "ztune/kernels/cuda/quantize.hpp"
#include "ztune/kernels/cuda/rope.hpp"
#include "ztune/kernels/cuda/sparse_attention.hpp"
#include "ztune/kernels/cuda/swiglu.hpp"

namespace ztune::executor::cuda {

namespace kc = ztune::kernels::cuda;

namespace {
// The one 16-bit type every operand given (null ones aside) shares, or fp32
// when they do not (fp32 itself included): no native kernel then.
StorageDtype common_half(std::initializer_list<ConstTensorRef> refs) {
  StorageDtype d = StorageDtype::fp32;
  for (const ConstTensorRef& r : refs) {
    if (!r) continue;
    if (r.is_fp32() || (d != StorageDtype::fp32 && r.dtype != d)) return StorageDtype::fp32;
    d = r.dtype;
  }
  return d;
}
// A gradient the kernel sums in fp32: fp32 or the op's 16-bit type.
bool fp32_or(ConstTensorRef g, StorageDtype d) { return !g || g.is_fp32() || g.dtype == d; }
}  // namespace

bool CudaBackend::gemm_native(const kernels::GemmShape& s, float alpha, ConstTensorRef a, ConstTensorRef b,
                              float beta, TensorRef c) {
  if (a.is_fp32() || a.dtype != b.dtype || (!c.is_fp32() && c.dtype != a.dtype)) return false;
  with_half_type(a.dtype, [&](auto tag) {
    using H = decltype(tag);
    if (c.is_fp32()) gemm_->run<H, float>(s, alpha, as<H>(a), as<H>(b), beta, c.f32(), compute_);
    else gemm_->run<H, H>(s, alpha, as<H>(a), as<H>(b), beta, as<H>(c), compute_);
  });
  return true;
}

// out[n,oc] = inp[n,c]·w[c,oc] (+ bias through the epilogue), all of one 16-bit type.
bool CudaBackend::matmul_forward_native(TensorRef out, ConstTensorRef inp, ConstTensorRef w, ConstTensorRef bias,
                                        int n, int c, int oc) {
  const StorageDtype d = inp.dtype;
  if (d == StorageDtype::fp32 || w.dtype != d || out.dtype != d || (bias && bias.dtype != d)) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    const kc::GemmEpilogueArgs ep{bias ? kc::GemmEpilogue::bias : kc::GemmEpilogue::none, bias.ptr};
    gemm_->run<H, H>({false, false, n, oc, c, c, oc, oc}, 1.0f, as<H>(inp), as<H>(w), 0.0f, as<H>(out), compute_, ep);
  });
}

// dinp += dout·wᵀ and dw += inpᵀ·dout on the 16-bit values; dw and dbias may be
// fp32 (gradients kept in fp32). A 16-bit dbias sums through an fp32 copy (the
// bias-gradient kernel accumulates in fp32).
bool CudaBackend::matmul_backward_native(TensorRef dinp, TensorRef dw, TensorRef dbias, ConstTensorRef dout,
                                         ConstTensorRef inp, ConstTensorRef w, int n, int c, int oc) {
  const StorageDtype d = dout.dtype;
  if (d == StorageDtype::fp32 || inp.dtype != d || w.dtype != d || (dinp && dinp.dtype != d)) return false;
  if (!dw.is_fp32() && dw.dtype != d) return false;
  if (dbias && !dbias.is_fp32() && dbias.dtype != d) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    if (dinp) gemm_->run<H, H>({false, true, n, c, oc, oc, oc, c}, 1.0f, as<H>(dout), as<H>(w), 1.0f, as<H>(dinp),
                               compute_);
    const kernels::GemmShape wgrad{true, false, c, oc, n, c, oc, oc};
    if (dw.is_fp32()) gemm_->run<H, float>(wgrad, 1.0f, as<H>(inp), as<H>(dout), 1.0f, dw.f32(), compute_);
    else gemm_->run<H, H>(wgrad, 1.0f, as<H>(inp), as<H>(dout), 1.0f, as<H>(dw), compute_);
    if (!dbias) return;
    if (dbias.is_fp32()) {
      kc::bias_backward<H>(dbias.f32(), as<H>(dout), n, oc, compute_);
      return;
    }
    Scratch scratch(allocator_);
    float* wide = scratch.get<float>(static_cast<std::size_t>(oc));
    kc::cast<H, float>(wide, as<H>(dbias), oc, compute_);
    kc::bias_backward<H>(wide, as<H>(dout), n, oc, compute_);
    kc::cast<float, H>(as<H>(dbias), wide, oc, compute_);
  });
}

// Flash: cuDNN's fused attention (the log-sum-exp in fp32). Standard: the
// per-head cuBLASLt products on 16-bit tensor cores around the causal softmax,
// the probabilities kept in the storage type.
bool CudaBackend::attention_forward_native(TensorRef out, TensorRef att, ConstTensorRef qkv, int b, int t, int c,
                                           int nh, bool flash, int window) {
  const StorageDtype d = qkv.dtype;
  if (window > 0 || d == StorageDtype::fp32 || out.dtype != d || att.dtype != (flash ? StorageDtype::fp32 : d))
    return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    if (flash) {
      flash_->forward<H>(as<H>(out), att.f32(), as<H>(qkv), b, t, c, nh, compute_);
      return;
    }
    Scratch s(allocator_);
    H* ws = s.get<H>(kc::attention_workspace_elems(b, t, c, nh));
    kc::attention_forward<H>(*gemm_, as<H>(out), as<H>(att), as<H>(qkv), ws, b, t, c, nh, compute_);
  });
}

bool CudaBackend::attention_backward_native(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv, ConstTensorRef out,
                                            ConstTensorRef att, int b, int t, int c, int nh, bool flash, int window) {
  const StorageDtype d = qkv.dtype;
  if (window > 0 || d == StorageDtype::fp32 || out.dtype != d || dout.dtype != d || dqkv.dtype != d ||
      att.dtype != (flash ? StorageDtype::fp32 : d))
    return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    if (flash) {
      flash_->backward<H>(as<H>(dqkv), as<H>(dout), as<H>(qkv), as<H>(out), att.f32(), b, t, c, nh, compute_);
      return;
    }
    Scratch s(allocator_);
    H* ws = s.get<H>(kc::attention_workspace_elems(b, t, c, nh));
    kc::attention_backward<H>(*gemm_, as<H>(dqkv), as<H>(dout), as<H>(qkv), as<H>(att), ws, b, t, c, nh, compute_);
  });
}

bool CudaBackend::embedding_forward_native(TensorRef out, const std::int32_t* ids, ConstTensorRef table, int n, int c,
                                           int row_begin, int rows) {
  return on_half(common_half({out, table}), [&](auto tag) {
    using H = decltype(tag);
    Scratch s(allocator_);
    kc::embedding_forward<H>(as<H>(out), device_ids(ids, n, s), as<H>(table), n, c, row_begin, rows, compute_);
  });
}
// The table's gradient sums repeated ids in fp32 atomics: a 16-bit shard goes
// through an fp32 copy (rows × c), the output gradient is read as stored.
bool CudaBackend::embedding_backward_native(TensorRef dtable, ConstTensorRef dout, const std::int32_t* ids, int n,
                                            int c, int row_begin, int rows) {
  const StorageDtype d = common_half({dout});
  if (d == StorageDtype::fp32 || !fp32_or(dtable, d)) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    StagedOut table(*this, dtable, static_cast<std::size_t>(rows) * static_cast<std::size_t>(c), true);
    Scratch s(allocator_);
    kc::embedding_backward<H>(table, as<H>(dout), device_ids(ids, n, s), n, c, row_begin, rows, compute_);
    table.commit();
  });
}

bool CudaBackend::layernorm_forward_native(TensorRef out, float* mean, float* rstd, ConstTensorRef inp,
                                           ConstTensorRef w, ConstTensorRef b, int n, int c, float eps) {
  return on_half(common_half({out, inp, w, b}), [&](auto tag) {
    using H = decltype(tag);
    kc::layernorm_forward<H>(as<H>(out), mean, rstd, as<H>(inp), as<H>(w), as<H>(b), n, c, eps, compute_);
  });
}
bool CudaBackend::layernorm_backward_native(TensorRef dinp, TensorRef dw, TensorRef db, ConstTensorRef dout,
                                            ConstTensorRef inp, ConstTensorRef w, const float* mean,
                                            const float* rstd, int n, int c) {
  const StorageDtype d = common_half({dinp, dout, inp, w});
  if (d == StorageDtype::fp32 || !dinp || !dw || !fp32_or(dw, d) || !fp32_or(db, d)) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    const auto cs = static_cast<std::size_t>(c);
    StagedOut gw(*this, dw, cs, true), gb(*this, db, cs, true);
    kc::layernorm_backward<H>(as<H>(dinp), gw, gb, as<H>(dout), as<H>(inp), as<H>(w), mean, rstd, n, c, compute_);
    gw.commit();
    gb.commit();
  });
}
bool CudaBackend::rmsnorm_forward_native(TensorRef out, float* rstd, ConstTensorRef inp, ConstTensorRef w, int n,
                                         int c, float eps) {
  return on_half(common_half({out, inp, w}), [&](auto tag) {
    using H = decltype(tag);
    kc::rmsnorm_forward<H>(as<H>(out), rstd, as<H>(inp), as<H>(w), n, c, eps, compute_);
  });
}
bool CudaBackend::rmsnorm_backward_native(TensorRef dinp, TensorRef dw, ConstTensorRef dout, ConstTensorRef inp,
                                          ConstTensorRef w, const float* rstd, int n, int c) {
  const StorageDtype d = common_half({dinp, dout, inp, w});
  if (d == StorageDtype::fp32 || !dinp || !dw || !fp32_or(dw, d)) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    StagedOut gw(*this, dw, static_cast<std::size_t>(c), true);
    kc::rmsnorm_backward<H>(as<H>(dinp), gw, as<H>(dout), as<H>(inp), as<H>(w), rstd, n, c, compute_);
    gw.commit();
  });
}

bool CudaBackend::gelu_forward_native(TensorRef out, ConstTensorRef inp, long n) {
  return on_half(common_half({out, inp}), [&](auto tag) {
    using H = decltype(tag);
    kc::gelu_forward<H>(as<H>(out), as<H>(inp), n, compute_);
  });
}
bool CudaBackend::gelu_backward_native(TensorRef dinp, ConstTensorRef inp, ConstTensorRef dout, long n) {
  const StorageDtype d = common_half({dinp, inp, dout});
  if (d == StorageDtype::fp32 || !dinp) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    kc::gelu_backward<H>(as<H>(dinp), as<H>(inp), as<H>(dout), n, compute_);
  });
}
bool CudaBackend::swiglu_forward_native(TensorRef out, ConstTensorRef inp, int n, int f) {
  return on_half(common_half({out, inp}), [&](auto tag) {
    using H = decltype(tag);
    kc::swiglu_forward<H>(as<H>(out), as<H>(inp), n, f, compute_);
  });
}
bool CudaBackend::swiglu_backward_native(TensorRef dinp, ConstTensorRef inp, ConstTensorRef dout, int n, int f) {
  const StorageDtype d = common_half({dinp, inp, dout});
  if (d == StorageDtype::fp32 || !dinp) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    kc::swiglu_backward<H>(as<H>(dinp), as<H>(inp), as<H>(dout), n, f, compute_);
  });
}
bool CudaBackend::rope_native(TensorRef x, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                              int rot_dims, float theta, bool backward) {
  return on_half(common_half({x}), [&](auto tag) {
    using H = decltype(tag);
    Scratch s(allocator_);
    const std::int32_t* pos = device_ids(positions, n, s);
    if (backward) kc::rope_backward<H>(as<H>(x), pos, n, row_stride, heads, hd, theta, rot_dims, compute_);
    else kc::rope_forward<H>(as<H>(x), pos, n, row_stride, heads, hd, theta, rot_dims, compute_);
  });
}
bool CudaBackend::kv_repeat_forward_native(TensorRef out, ConstTensorRef inp, int n, int nh, int kv, int hd) {
  return on_half(common_half({out, inp}), [&](auto tag) {
    using H = decltype(tag);
    kc::kv_repeat_forward<H>(as<H>(out), as<H>(inp), n, nh, kv, hd, compute_);
  });
}
bool CudaBackend::kv_repeat_backward_native(TensorRef dinp, ConstTensorRef dout, int n, int nh, int kv, int hd) {
  const StorageDtype d = common_half({dinp, dout});
  if (d == StorageDtype::fp32 || !dinp) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    kc::kv_repeat_backward<H>(as<H>(dinp), as<H>(dout), n, nh, kv, hd, compute_);
  });
}

// The sparse kernels keep their probabilities in fp32 whatever the storage: a
// 16-bit `att` (GptStage keeps the sparse state in the storage type) goes
// through an fp32 copy of the layout's blocks.
bool CudaBackend::sparse_attention_forward_native(TensorRef out, TensorRef att, ConstTensorRef qkv, int b, int t,
                                                  int c, int nh, const kernels::BlockLayout& layout) {
  const StorageDtype d = common_half({out, qkv});
  if (d == StorageDtype::fp32 || !fp32_or(att, d)) return false;
  const auto& dl = device_layout(layout);
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    StagedOut probs(*this, att, kc::sparse_attention_att_elems(b, nh, dl), false);
    kc::sparse_attention_forward<H>(as<H>(out), probs, as<H>(qkv), b, t, c, nh, dl, compute_);
    probs.commit();
  });
}
bool CudaBackend::sparse_attention_backward_native(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv,
                                                   ConstTensorRef att, int b, int t, int c, int nh,
                                                   const kernels::BlockLayout& layout) {
  const StorageDtype d = common_half({dqkv, dout, qkv});
  if (d == StorageDtype::fp32 || !fp32_or(att, d)) return false;
  const auto& dl = device_layout(layout);
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    const std::size_t elems = kc::sparse_attention_att_elems(b, nh, dl);
    const StagedIn probs(*this, att, elems);
    Scratch s(allocator_);
    float* ws = s.get<float>(elems);
    kc::sparse_attention_backward<H>(as<H>(dqkv), ws, as<H>(dout), as<H>(qkv), probs, b, t, c, nh, dl, compute_);
  });
}

bool CudaBackend::ce_row_max_native(float* row_max, ConstTensorRef logits, int n, int v) {
  return on_half(common_half({logits}), [&](auto tag) {
    using H = decltype(tag);
    kc::ce_row_max<H>(row_max, as<H>(logits), n, v, compute_);
  });
}
bool CudaBackend::ce_row_sumexp_native(float* row_sum, ConstTensorRef logits, const float* row_max, int n, int v) {
  return on_half(common_half({logits}), [&](auto tag) {
    using H = decltype(tag);
    kc::ce_row_sumexp<H>(row_sum, as<H>(logits), row_max, n, v, compute_);
  });
}
bool CudaBackend::ce_target_logit_native(float* tl, ConstTensorRef logits, const std::int32_t* targets, int n, int v,
                                         int vocab_begin) {
  return on_half(common_half({logits}), [&](auto tag) {
    using H = decltype(tag);
    Scratch s(allocator_);
    kc::ce_target_logit<H>(tl, as<H>(logits), device_ids(targets, n, s), n, v, vocab_begin, compute_);
  });
}
bool CudaBackend::ce_backward_native(TensorRef dlogits, ConstTensorRef logits, const float* row_max,
                                     const float* row_sum, const std::int32_t* targets, const float* dloss, int n,
                                     int v, int vocab_begin) {
  const StorageDtype d = common_half({dlogits, logits});
  if (d == StorageDtype::fp32 || !dlogits) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    Scratch s(allocator_);
    kc::ce_backward<H>(as<H>(dlogits), as<H>(logits), row_max, row_sum, device_ids(targets, n, s), dloss, n, v,
                       vocab_begin, compute_);
  });
}

bool CudaBackend::add_native(TensorRef out, ConstTensorRef a, ConstTensorRef b, long n) {
  const StorageDtype d = common_half({out, a, b});
  if (d == StorageDtype::fp32 || !out || !a || !b) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    kc::add<H>(as<H>(out), as<H>(a), as<H>(b), n, compute_);
  });
}
bool CudaBackend::accumulate_native(TensorRef dst, ConstTensorRef src, long n) {
  const StorageDtype d = common_half({dst, src});
  if (d == StorageDtype::fp32 || !dst || !src) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    kc::accumulate<H>(as<H>(dst), as<H>(src), n, compute_);
  });
}
bool CudaBackend::scale_native(TensorRef x, float s, long n) {
  return on_half(common_half({x}), [&](auto tag) {
    using H = decltype(tag);
    kc::scale<H>(as<H>(x), s, n, compute_);
  });
}
bool CudaBackend::add_bias_native(TensorRef x, ConstTensorRef bias, int n, int c) {
  const StorageDtype d = common_half({x, bias});
  if (d == StorageDtype::fp32 || !x || !bias) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    kc::add_bias<H>(as<H>(x), as<H>(bias), n, c, compute_);
  });
}
bool CudaBackend::bias_backward_native(TensorRef dbias, ConstTensorRef dout, int n, int c) {
  const StorageDtype d = common_half({dout});
  if (d == StorageDtype::fp32 || !dbias || !fp32_or(dbias, d)) return false;
  return on_half(d, [&](auto tag) {
    using H = decltype(tag);
    StagedOut db(*this, dbias, static_cast<std::size_t>(c), true);
    kc::bias_backward<H>(db, as<H>(dout), n, c, compute_);
    db.commit();
  });
}
bool CudaBackend::sum_squares_native(double* result, ConstTensorRef x, long n) {
  const bool ran = on_half(common_half({x}), [&](auto tag) {
    using H = decltype(tag);
    Scratch s(allocator_);
    double* acc = s.get<double>(1);
    ZT_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(double), compute_));
    kc::sum_squares<H>(acc, as<H>(x), n, compute_);
    ZT_CUDA_CHECK(cudaMemcpyAsync(host_double_, acc, sizeof(double), cudaMemcpyDeviceToHost, compute_));
    ZT_CUDA_CHECK(cudaStreamSynchronize(compute_));
    *result = *host_double_;
  });
  return ran;
}

// ZeRO++'s qwZ/qgZ numerics on a 16-bit bucket in place (the group's scale
// from the widened values, as the staged path computes it).
bool CudaBackend::quantize_dequantize_native(TensorRef x, long n, int bits, long group) {
  return on_half(common_half({x}), [&](auto tag) {
    using H = decltype(tag);
    kc::quantize_dequantize<H>(as<H>(x), n, bits, group, compute_);
  });
}

}  // namespace ztune::executor::cuda
