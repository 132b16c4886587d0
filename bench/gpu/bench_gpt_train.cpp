// GPT training throughput on one GPU in bf16 (fp32 master weights, fp32 gradients,
// AdamW): GPT-2 124M (L12 C768 H12), 350M (L24 C1024 H16) and GPT-3 XL 1.3B (L24
// C2048 H16), sequence 1024, vocabulary 50304 (50257 padded to a multiple of 64),
// tied embeddings, the llm.c layer layout. One step = forward, fused cross-entropy,
// backward, AdamW. Timed over 10 steps after 2 warm-up steps with CUDA events.
// MFU uses model FLOPs per iteration 72·B·s·L·h²·(1 + s/(6h) + V/(12·h·L))
// (Korthikanti et al. 2022, eq. 3; no recomputation here) against the datasheet
// dense bf16 peak (989 TFLOP/s for H100/H200 SXM, override with ZTUNE_PEAK_TFLOPS)
// and against the GEMM ceiling measured on this device.
// The weights are a tiled random pattern: the loss (printed) must stay finite,
// learning quality is not what this measures.
// Options (issue 24 item 3; each prints the path it took, never run yet):
//   --attention=cudnn  cuDNN fused attention (CudnnAttention; the flash kernels when
//                      cuDNN refuses) instead of the unfused GEMM attention
//   --graph            forward + backward captured once as a CUDA graph, replayed
//                      per step (CapturedWork; eager when capture fails)
//   --fused-adamw      AdamW over every tensor in one launch (adamw_chunked)
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "ztune/kernels/cuda/adamw.hpp"
#include "ztune/kernels/cuda/attention.hpp"
#include "ztune/kernels/cuda/cross_entropy.hpp"
#include "ztune/kernels/cuda/cudnn_attention.hpp"
#include "ztune/kernels/cuda/graph_capture.hpp"
#include "ztune/kernels/multi_tensor.hpp"
#include "ztune/kernels/cuda/elementwise.hpp"
#include "ztune/kernels/cuda/embedding.hpp"
#include "ztune/kernels/cuda/gemm.hpp"
#include "ztune/kernels/cuda/layernorm.hpp"
#include "ztune/kernels/layernorm.hpp"
#include "ztune/kernels/cuda/gelu.hpp"

using namespace ztune;
using bf16 = __nv_bfloat16;
namespace kc = ztune::kernels::cuda;
using bench::Device;

namespace {

// GPT-2's LayerNorm epsilon (the model this benchmark trains).
constexpr float kEps = ztune::kernels::cpu::kLayerNormEps;

struct Config {
  const char* name;
  int layers, channels, heads, batch;
};

struct Options {
  bool cudnn_attention = false, graph = false, fused_adamw = false;
};

// One weight tensor: bf16 copy for compute, fp32 master/m/v, fp32 gradient.
struct Weight {
  std::unique_ptr<Device<bf16>> w;
  std::unique_ptr<Device<float>> master, m, v, g;
  long n;
};

class Gpt {
 public:
  Gpt(const Config& cfg, int t, int v, cudaStream_t s, kc::Gemm& gemm, const Options& opt = {})
      : L(cfg.layers), C(cfg.channels), NH(cfg.heads), B(cfg.batch), T(t), V(v), N(cfg.batch * t), s_(s),
        gemm_(gemm), opt_(opt) {
    wte_ = add(static_cast<long>(V) * C);
    wpe_ = add(static_cast<long>(T) * C);
    lnf_w_ = add(C);
    lnf_b_ = add(C);
    for (int l = 0; l < L; ++l) {
      Layer ly;
      ly.ln1_w = add(C);
      ly.ln1_b = add(C);
      ly.qkv_w = add(static_cast<long>(C) * 3 * C);
      ly.qkv_b = add(3L * C);
      ly.proj_w = add(static_cast<long>(C) * C);
      ly.proj_b = add(C);
      ly.ln2_w = add(C);
      ly.ln2_b = add(C);
      ly.fc_w = add(static_cast<long>(C) * 4 * C);
      ly.fc_b = add(4L * C);
      ly.fcp_w = add(static_cast<long>(4) * C * C);
      ly.fcp_b = add(C);
      layers_.push_back(ly);
    }
    init_weights();
    const auto nc = static_cast<std::size_t>(N) * C;
    for (int l = 0; l <= L; ++l) {
      acts_.push_back({std::make_unique<Device<bf16>>(nc), std::make_unique<Device<bf16>>(nc),
                       std::make_unique<Device<bf16>>(3 * nc), std::make_unique<Device<bf16>>(nc),
                       std::make_unique<Device<bf16>>(static_cast<std::size_t>(B) * NH * T * T),
                       std::make_unique<Device<bf16>>(nc), std::make_unique<Device<bf16>>(nc),
                       std::make_unique<Device<bf16>>(4 * nc), std::make_unique<Device<bf16>>(4 * nc),
                       std::make_unique<Device<float>>(N), std::make_unique<Device<float>>(N),
                       std::make_unique<Device<float>>(N), std::make_unique<Device<float>>(N)});
    }
    lnf_ = std::make_unique<Device<bf16>>(nc);
    logits_ = std::make_unique<Device<bf16>>(static_cast<std::size_t>(N) * V);
    losses_ = std::make_unique<Device<float>>(N);
    tmp_ = std::make_unique<Device<bf16>>(nc);
    dx_ = std::make_unique<Device<bf16>>(nc);
    dbig_ = std::make_unique<Device<bf16>>(4 * nc);
    dbig2_ = std::make_unique<Device<bf16>>(4 * nc);
    ws_ = std::make_unique<Device<bf16>>(kc::attention_workspace_elems(B, T, C, NH));
    std::vector<std::int32_t> ids(N), targets(N), pos(N);
    for (int i = 0; i < N; ++i) {
      ids[i] = (i * 7919) % 50257;
      targets[i] = (i * 104729 + 1) % 50257;
      pos[i] = i % T;
    }
    if (opt_.cudnn_attention)
      for (int l = 0; l < L; ++l) lse_.push_back(std::make_unique<Device<float>>(static_cast<std::size_t>(B) * NH * T));
    ids_ = upload(ids);
    targets_ = upload(targets);
    pos_ = upload(pos);
  }

  [[nodiscard]] long parameters() const {
    long p = 0;
    for (const auto& w : weights_) p += w.n;
    return p;
  }

  // One training step; the mean loss is read back (a host sync) only when asked:
  // the timed steps leave the device queue full, as PyTorch's loop does.
  float step(int t, bool read_loss = true) {
    if (opt_.graph && t > 1) {  // step 1 runs eagerly: the GEMMs' workspaces are allocated there
      graph_.run(s_, [&] {
        forward();
        backward();
      });
    } else {
      forward();
      backward();
    }
    optimizer(t);
    return read_loss ? mean_loss() : 0.0f;
  }

  // The last step's mean loss (waits for the stream).
  float mean_loss() {
    std::vector<float> losses(N);
    ZT_CUDA_CHECK(cudaMemcpyAsync(losses.data(), losses_->get(), N * sizeof(float), cudaMemcpyDeviceToHost, s_));
    ZT_CUDA_CHECK(cudaStreamSynchronize(s_));
    double mean = 0;
    for (float l : losses) mean += l / static_cast<double>(N);
    return static_cast<float>(mean);
  }

  void forward() {
    // x0 = wte[ids] + wpe[pos]
    kc::embedding_forward<bf16>(acts_[0].res->get(), ids_->get(), w(wte_), N, C, 0, V, s_);
    kc::embedding_forward<bf16>(tmp_->get(), pos_->get(), w(wpe_), N, C, 0, T, s_);
    kc::add<bf16>(acts_[0].res->get(), acts_[0].res->get(), tmp_->get(), static_cast<long>(N) * C, s_);
    for (int l = 0; l < L; ++l) {
      const Layer& ly = layers_[l];
      Acts& a = acts_[l];
      bf16* x = a.res->get();
      kc::layernorm_forward<bf16>(a.ln1->get(), a.mean1->get(), a.rstd1->get(), x, w(ly.ln1_w), w(ly.ln1_b), N, C,
                                  kEps, s_);
      linear(a.qkv->get(), a.ln1->get(), ly.qkv_w, ly.qkv_b, C, 3 * C, kc::GemmEpilogue::bias, nullptr);
      if (opt_.cudnn_attention)
        attention_.forward<bf16>(a.atty->get(), lse_[l]->get(), a.qkv->get(), B, T, C, NH, s_);
      else
        kc::attention_forward<bf16>(gemm_, a.atty->get(), a.att->get(), a.qkv->get(), ws_->get(), B, T, C, NH, s_);
      linear(tmp_->get(), a.atty->get(), ly.proj_w, ly.proj_b, C, C, kc::GemmEpilogue::bias, nullptr);
      kc::add<bf16>(a.res2->get(), x, tmp_->get(), static_cast<long>(N) * C, s_);
      kc::layernorm_forward<bf16>(a.ln2->get(), a.mean2->get(), a.rstd2->get(), a.res2->get(), w(ly.ln2_w),
                                  w(ly.ln2_b), N, C, kEps, s_);
      linear(a.fch_gelu->get(), a.ln2->get(), ly.fc_w, ly.fc_b, C, 4 * C, kc::GemmEpilogue::gelu_aux_bias,
             a.fch->get());
      linear(tmp_->get(), a.fch_gelu->get(), ly.fcp_w, ly.fcp_b, 4 * C, C, kc::GemmEpilogue::bias, nullptr);
      kc::add<bf16>(acts_[l + 1].res->get(), a.res2->get(), tmp_->get(), static_cast<long>(N) * C, s_);
    }
    Acts& top = acts_[L];
    kc::layernorm_forward<bf16>(lnf_->get(), top.mean1->get(), top.rstd1->get(), top.res->get(), w(lnf_w_),
                                w(lnf_b_), N, C, kEps, s_);
    gemm_.run<bf16>({false, true, N, V, C, C, C, V}, 1.0f, lnf_->get(), w(wte_), 0.0f, logits_->get(), s_);
    kc::ce_fused_forward_backward<bf16>(losses_->get(), logits_->get(), logits_->get(), targets_->get(), 1.0f / static_cast<float>(N), N,
                                        V, s_);
  }

  void backward() {
    for (auto& wt : weights_) ZT_CUDA_CHECK(cudaMemsetAsync(wt.g->get(), 0, wt.n * sizeof(float), s_));
    const long nc = static_cast<long>(N) * C;
    Acts& top = acts_[L];
    // LM head (tied): dlnf = dlogits·wte, dwte += dlogitsᵀ·lnf.
    gemm_.run<bf16>({false, false, N, C, V, V, C, C}, 1.0f, logits_->get(), w(wte_), 0.0f, tmp_->get(), s_);
    gemm_.run<bf16, float>({true, false, V, C, N, V, C, C}, 1.0f, logits_->get(), lnf_->get(), 1.0f, g(wte_), s_);
    ZT_CUDA_CHECK(cudaMemsetAsync(dx_->get(), 0, nc * sizeof(bf16), s_));
    kc::layernorm_backward<bf16>(dx_->get(), g(lnf_w_), g(lnf_b_), tmp_->get(), top.res->get(), w(lnf_w_),
                                 top.mean1->get(), top.rstd1->get(), N, C, s_);
    for (int l = L - 1; l >= 0; --l) {
      const Layer& ly = layers_[l];
      Acts& a = acts_[l];
      // MLP: dx is d(res_{l+1}) = d(res2) through the residual.
      linear_backward(dbig_->get(), dx_->get(), a.fch_gelu->get(), ly.fcp_w, ly.fcp_b, 4 * C, C);
      ZT_CUDA_CHECK(cudaMemsetAsync(dbig2_->get(), 0, 4 * nc * sizeof(bf16), s_));
      kc::gelu_backward<bf16>(dbig2_->get(), a.fch->get(), dbig_->get(), 4 * nc, s_);
      linear_backward(tmp_->get(), dbig2_->get(), a.ln2->get(), ly.fc_w, ly.fc_b, C, 4 * C);
      kc::layernorm_backward<bf16>(dx_->get(), g(ly.ln2_w), g(ly.ln2_b), tmp_->get(), a.res2->get(), w(ly.ln2_w),
                                   a.mean2->get(), a.rstd2->get(), N, C, s_);
      // Attention.
      linear_backward(tmp_->get(), dx_->get(), a.atty->get(), ly.proj_w, ly.proj_b, C, C);
      ZT_CUDA_CHECK(cudaMemsetAsync(dbig_->get(), 0, 3 * nc * sizeof(bf16), s_));
      if (opt_.cudnn_attention)
        attention_.backward<bf16>(dbig_->get(), tmp_->get(), a.qkv->get(), a.atty->get(), lse_[l]->get(), B, T, C, NH,
                                  s_);
      else
        kc::attention_backward<bf16>(gemm_, dbig_->get(), tmp_->get(), a.qkv->get(), a.att->get(), ws_->get(), B, T,
                                     C, NH, s_);
      linear_backward(tmp_->get(), dbig_->get(), a.ln1->get(), ly.qkv_w, ly.qkv_b, C, 3 * C);
      kc::layernorm_backward<bf16>(dx_->get(), g(ly.ln1_w), g(ly.ln1_b), tmp_->get(), a.res->get(), w(ly.ln1_w),
                                   a.mean1->get(), a.rstd1->get(), N, C, s_);
    }
    kc::embedding_backward<bf16>(g(wte_), dx_->get(), ids_->get(), N, C, 0, V, s_);
    kc::embedding_backward<bf16>(g(wpe_), dx_->get(), pos_->get(), N, C, 0, T, s_);
  }

  void optimizer(int t) {
    if (opt_.fused_adamw) {
      if (adamw_table_ == nullptr) {  // the tensor list and chunk table, uploaded once
        std::vector<kc::AdamWTensor<float, bf16>> list;
        std::vector<std::int64_t> sizes;
        for (auto& wt : weights_) {
          list.push_back({wt.master->get(), wt.m->get(), wt.v->get(), wt.g->get(), wt.w->get(), wt.n});
          sizes.push_back(wt.n);
        }
        const auto chunks = ztune::kernels::build_chunk_table(sizes, kc::kAdamWChunkElems);
        adamw_list_ = std::make_unique<Device<kc::AdamWTensor<float, bf16>>>(list.size());
        adamw_table_ = std::make_unique<Device<ztune::kernels::TensorChunk>>(chunks.size());
        ZT_CUDA_CHECK(cudaMemcpy(adamw_list_->get(), list.data(), list.size() * sizeof(list[0]), cudaMemcpyHostToDevice));
        ZT_CUDA_CHECK(cudaMemcpy(adamw_table_->get(), chunks.data(), chunks.size() * sizeof(chunks[0]),
                                 cudaMemcpyHostToDevice));
        adamw_chunks_ = static_cast<int>(chunks.size());
      }
      kc::adamw_chunked<float, bf16>(adamw_list_->get(), adamw_table_->get(), adamw_chunks_,
                                     {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, t}, 1.0f, s_);
      return;
    }
    std::vector<kc::AdamWTensor<float, bf16>> list;
    for (auto& wt : weights_) list.push_back({wt.master->get(), wt.m->get(), wt.v->get(), wt.g->get(), wt.w->get(), wt.n});
    kc::adamw_multi_tensor<float, bf16>(list.data(), static_cast<int>(list.size()), {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, t},
                                        1.0f, s_);
  }

 private:
  struct Layer {
    int ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcp_w, fcp_b;
  };
  struct Acts {
    std::unique_ptr<Device<bf16>> res, ln1, qkv, atty, att, res2, ln2, fch, fch_gelu;
    std::unique_ptr<Device<float>> mean1, rstd1, mean2, rstd2;
  };

  int add(long n) {
    weights_.push_back({std::make_unique<Device<bf16>>(n), std::make_unique<Device<float>>(n),
                        std::make_unique<Device<float>>(n), std::make_unique<Device<float>>(n),
                        std::make_unique<Device<float>>(n), n});
    return static_cast<int>(weights_.size()) - 1;
  }
  bf16* w(int i) { return weights_[i].w->get(); }
  float* g(int i) { return weights_[i].g->get(); }

  // out[N,oc] = inp[N,ic]·W[ic,oc] + b (epilogue).
  void linear(bf16* out, const bf16* inp, int wi, int bi, int ic, int oc, kc::GemmEpilogue ep, bf16* aux) {
    gemm_.run<bf16>({false, false, N, oc, ic, ic, oc, oc}, 1.0f, inp, w(wi), 0.0f, out, s_, {ep, w(bi), aux, oc});
  }
  // dinp = dout·Wᵀ (written), dW += inpᵀ·dout (fp32), db += Σ dout.
  void linear_backward(bf16* dinp, const bf16* dout, const bf16* inp, int wi, int bi, int ic, int oc) {
    gemm_.run<bf16>({false, true, N, ic, oc, oc, oc, ic}, 1.0f, dout, w(wi), 0.0f, dinp, s_);
    gemm_.run<bf16, float>({true, false, ic, oc, N, ic, oc, oc}, 1.0f, inp, dout, 1.0f, g(wi), s_);
    kc::bias_backward<bf16>(g(bi), dout, N, oc, s_);
  }

  void init_weights() {
    // A 1M-value normal(0, 0.02) pattern tiled over every tensor; norms' weights 1.
    std::mt19937 gen(42);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> pattern(1 << 20);
    for (auto& p : pattern) p = dist(gen);
    Device<float> dp(pattern.size());
    ZT_CUDA_CHECK(cudaMemcpy(dp.get(), pattern.data(), pattern.size() * sizeof(float), cudaMemcpyHostToDevice));
    for (auto& wt : weights_) {
      for (long off = 0; off < wt.n; off += static_cast<long>(pattern.size())) {
        const long len = std::min<long>(static_cast<long>(pattern.size()), wt.n - off);
        ZT_CUDA_CHECK(cudaMemcpyAsync(wt.master->get() + off, dp.get(), len * sizeof(float), cudaMemcpyDeviceToDevice,
                                      s_));
      }
      kc::cast<float, bf16>(wt.w->get(), wt.master->get(), wt.n, s_);
    }
    ZT_CUDA_CHECK(cudaStreamSynchronize(s_));
  }

  std::unique_ptr<Device<std::int32_t>> upload(const std::vector<std::int32_t>& v) {
    auto d = std::make_unique<Device<std::int32_t>>(v.size());
    ZT_CUDA_CHECK(cudaMemcpy(d->get(), v.data(), v.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
    return d;
  }

  int L, C, NH, B, T, V, N;
  cudaStream_t s_;
  kc::Gemm& gemm_;
  std::vector<Weight> weights_;
  std::vector<Layer> layers_;
  std::vector<Acts> acts_;
  int wte_, wpe_, lnf_w_, lnf_b_;
  std::unique_ptr<Device<bf16>> lnf_, logits_, tmp_, dx_, dbig_, dbig2_, ws_;
  std::unique_ptr<Device<float>> losses_;
  std::unique_ptr<Device<std::int32_t>> ids_, targets_, pos_;
  Options opt_;
  kc::CudnnAttention attention_;
  std::vector<std::unique_ptr<Device<float>>> lse_;
  kc::CapturedWork graph_;
  std::unique_ptr<Device<kc::AdamWTensor<float, bf16>>> adamw_list_;
  std::unique_ptr<Device<ztune::kernels::TensorChunk>> adamw_table_;
  int adamw_chunks_ = 0;

 public:
  /// What the options did: the attention path and the graph capture, with reasons.
  [[nodiscard]] std::string paths() const {
    std::string p;
    if (opt_.cudnn_attention)
      p += std::string(" attention=") +
           (attention_.last_path() == ztune::kernels::sdpa::Path::cudnn
                ? "cudnn (" + ztune::kernels::cuda::CudnnAttention::graph_api() + ")"
                : "flash (" + attention_.last_reason() + ")");
    if (opt_.graph) p += graph_.captured() ? " graph=captured" : " graph=eager (" + graph_.reason() + ")";
    if (opt_.fused_adamw) p += " adamw=one launch";
    return p;
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Line by line into gpu-check.sh's pipe: a budget's SIGTERM keeps the rows already printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!bench::require_device()) return 77;
  const int t = 1024, v = 50304;
  const double peak = std::getenv("ZTUNE_PEAK_TFLOPS") != nullptr ? std::atof(std::getenv("ZTUNE_PEAK_TFLOPS")) : 989.0;
  std::vector<Config> configs{{"gpt2-124M", 12, 768, 12, 16}, {"gpt2-350M", 24, 1024, 16, 16},
                              {"gpt3-1.3B", 24, 2048, 16, 8}};
  Options opt;
  std::vector<Config> chosen;
  for (int i = 1; i < argc; ++i) {  // options, then a subset by name
    const std::string a = argv[i];
    if (a == "--attention=cudnn") opt.cudnn_attention = true;
    else if (a == "--attention=unfused") opt.cudnn_attention = false;
    else if (a == "--graph") opt.graph = true;
    else if (a == "--fused-adamw") opt.fused_adamw = true;
    else {
      bool found = false;
      for (const auto& c : configs)
        if (a == c.name) {
          chosen.push_back(c);
          found = true;
        }
      if (!found) {
        std::fprintf(stderr,
                     "bench_gpt_train: argument %d '%s': expected --attention=cudnn|unfused, --graph, --fused-adamw "
                     "or a model (gpt2-124M, gpt2-350M, gpt3-1.3B)\n",
                     i, a.c_str());
        return 2;
      }
    }
  }
  if (!chosen.empty()) configs = chosen;
  cudaStream_t s = nullptr;
  ZT_CUDA_CHECK(cudaStreamCreate(&s));
  kc::Gemm gemm;
  std::printf("%-10s %8s %6s %10s %12s %8s %10s %10s\n", "model", "params", "batch", "step ms", "tokens/s",
              "MFU", "loss[0]", "loss[end]");
  for (const auto& cfg : configs) {
    Gpt model(cfg, t, v, s, gemm, opt);
    float first = model.step(1);
    model.step(2);
    const int steps = 10;
    int step = 3;
    const double sec = bench::time_per_call(s, [&] { model.step(step++, false); }, steps, 0);
    const float last = model.mean_loss();
    const double tokens = static_cast<double>(cfg.batch) * t;
    const double h = cfg.channels, L = cfg.layers;
    const double flops = 72.0 * tokens * L * h * h * (1.0 + t / (6.0 * h) + v / (12.0 * h * L));
    const double mfu = flops / sec / (peak * 1e12);
    std::printf("%-10s %7.0fM %6d %10.1f %12.0f %7.1f%% %10.4f %10.4f%s\n", cfg.name, static_cast<double>(model.parameters()) / 1e6,
                cfg.batch, sec * 1e3, tokens / sec, 100 * mfu, first, last,
                std::isfinite(last) ? "" : "  (NOT FINITE)");
    if (opt.cudnn_attention || opt.graph || opt.fused_adamw) std::printf("  %s:%s\n", cfg.name, model.paths().c_str());
  }
  std::printf("MFU against %.0f TFLOP/s dense bf16 (ZTUNE_PEAK_TFLOPS to change)\n", peak);
  cudaStreamDestroy(s);
  return 0;
}
