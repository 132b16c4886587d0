#include "ztune/model/op_costs.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "ztune/model/cpu_executor_costs.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/sparse_attention.hpp"
#include "ztune/model/time_model.hpp"
#include "layer_parts.hpp"

namespace ztune {

double bytes_of(Precision p) { return p == Precision::fp32 ? 4.0 : 2.0; }

Precision storage_precision(const Plan& p) {
  return p.precision;
}

Precision attention_precision(const Plan& p, const EngineProfile& e) {
  return e.executor && (p.cp > 1 || p.ulysses > 1) ? Precision::fp32 : p.precision;
}

// The kernels' times and the transformer layer's and the edges' costs
// (collectives: collective_costs.cpp; FP8 GEMMs and casts: fp8_costs.cpp;
// data parallelism, ZeRO and the optimizer: dp_sync_costs.cpp).

// ---------------------------------------------------------------- kernels

namespace {

// Roofline of one kernel call: bound by the slower of its FLOPs (at `eff` of
// the peak) and its HBM traffic, plus one launch.
double roofline_time(double flops, double eff, double bytes, Precision p, const GpuSpec& gpu,
                     const HardwareProfile& hw) {
  return std::max(flops / (gpu.peak_flops(p) * eff), bytes / achieved_hbm(gpu, hw)) + hw.kernel_launch_s;
}

struct ScorePasses {
  double fwd_bytes = 0;
  double bwd_bytes = 0;
  int kernels = 0;  // each way
};
// Standard attention's passes over the scores besides its two GEMMs: forward the
// fused scale-mask-softmax (read, write) and the dropout (read, write, a 1-byte
// mask); backward the dropout's and the softmax's. Without dropout
// (Transformer::dropout 0) PyTorch's dropout returns its input: the softmax's
// passes alone.
ScorePasses score_passes(const Transformer& m, double scores, double eb) {
  if (!m.has_dropout()) return {scores * eb * 2.0, scores * eb * 3.0, 1};
  return {scores * eb * 2.0 + scores * (eb * 2.0 + 1.0), scores * (eb * 3.0 + 1.0) + scores * eb * 3.0, 2};
}

}  // namespace

double gemm_time(const GemmShape& g, Precision p, const GpuSpec& gpu, const HardwareProfile& hw, bool attention) {
  const double flops = g.flops();
  if (flops <= 0) return 0;
  double eff = hw.gemm_efficiency_of(g.m, g.n, g.k, g.batch);
  if (attention) eff *= hw.attention_gemm_factor;
  return roofline_time(flops, eff, g.elements() * bytes_of(p), p, gpu, hw);
}

double fused_attention_time(double flops, double bytes, Precision p, const GpuSpec& gpu, const HardwareProfile& hw,
                            AttentionKernel kernel) {
  const double factor = kernel == AttentionKernel::cudnn ? hw.cudnn_attention_factor : hw.attention_gemm_factor;
  return roofline_time(flops, hw.gemm_efficiency_at(flops) * factor, bytes, p, gpu, hw);
}

double memory_bound_time(double bytes, const GpuSpec& gpu, const HardwareProfile& hw, int kernels) {
  return bytes / achieved_hbm(gpu, hw) + kernels * hw.kernel_launch_s;
}

// ---------------------------------------------------------------- transformer layer

LayerShape shape_of(const Transformer& m, const Plan& p) {
  LayerShape x{};
  x.s = m.seq_len;
  x.sl = x.s / p.seq_split();
  x.sa = x.s / p.cp;
  x.u = p.ulysses;
  x.b = p.micro_batch;
  x.h = m.hidden;
  x.a = m.heads;
  x.t = p.tp;
  x.d = m.head_dim();
  x.kvd = static_cast<double>(m.kv_heads) * m.head_dim();
  x.f_out = m.ffn_hidden;
  x.f_in = m.activation == Activation::swiglu ? 2.0 * m.ffn_hidden : m.ffn_hidden;  // FC1 width
  x.tokens = x.sl * x.b;  // every linear, elementwise and TP cost runs on this rank's rows
  x.sp = p.sequence_parallel;
  return x;
}

// Backward of C = A·B (A activations m×k, B weights k×n): dA = dC·Bᵀ (m×k, inner n)
// and dB = Aᵀ·dC (k×n, inner m); each has the forward's FLOPs.
LinearTimes linear_times(const GemmShape& g, Precision p, const GpuSpec& gpu, const HardwareProfile& hw) {
  LinearTimes t;
  const double flops = g.flops();
  if (flops <= 0) return t;
  // gemm_efficiency_of(shape) for each, its table lookup (the same FLOPs) done once.
  const double full_wave = hw.gemm_efficiency_at(flops);
  auto time_of = [&](const GemmShape& s) {
    return roofline_time(flops, full_wave * hw.gemm_waves.utilization(s.m, s.n, s.k, s.batch),
                         s.elements() * bytes_of(p), p, gpu, hw);
  };
  // ztune's executor runs its 16-bit storage's GEMMs on the stored values
  // (CudaBackend's *_native hooks): no operand casts, as any 16-bit engine.
  t.fwd = time_of(g);
  t.dgrad = time_of(dgrad_of(g));
  t.wgrad = time_of(wgrad_of(g));
  return t;
}

double linear_weight_elements(const LinearGemms& g) {
  return g.qkv.k * g.qkv.n + g.proj.k * g.proj.n + g.fc1.k * g.fc1.n + g.fc2.k * g.fc2.n;
}

// Ring attention of context parallelism (cp > 1): sets lc's forward attention
// time and ring fields, returns the backward attention compute time.
//
// Megatron-Core's context parallelism (NVIDIA Megatron-Core docs, "context
// parallelism"; AttnFuncWithCPAndKVP2P in Transformer Engine) splits each
// sequence into 2·cp chunks, rank i holding chunks i and 2cp−1−i, so that under
// the causal mask every rank does the same work. Attention runs in cp block
// steps: step j computes the local queries (s/cp rows) against the K/V chunk
// of rank i−j while that chunk is sent on to rank i+1 and the next one
// received (p2p, 2·b·(s/cp)·kv_dim/t elements each way). Before step 0 (the
// local chunk) the first exchange is already launched, so each of the cp−1
// exchanges hides behind one block step: exposed max(0, exchange − step).
// Backward rotates K/V again and dK/dV with them (twice the bytes per step),
// and the last dK/dV must travel one more hop home after the last block:
// nothing is left to hide that one.
// Block work: a flash kernel skips the masked half (the diagonal step's two
// causal chunk pairs and one full pair; every other step exactly one half of
// the (s/cp)² block), so each step does (s/cp)²/2 of work and a rank its
// causal share s²/(2cp). The unfused standard path computes every block whole
// and masks it, as without cp: cp blocks of (s/cp)², s²/cp per rank.
double context_parallel_attention(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                                  const LayerShape& x, LayerCost& lc) {
  const GpuSpec& gpu = c.node.gpu;
  const Precision prec = attention_precision(p, hw.engine);
  const double eb = bytes_of(prec);
  const double heads_local = x.b * x.a / x.t;
  const double cp = p.cp;
  double step_fwd = 0, step_bwd = 0;
  if (fused_attention(p.attention)) {
    const double flops = 4.0 * x.sl * x.sl * x.d * heads_local * 0.5;  // QKᵀ and PV over half the block
    const double head_bytes = x.sl * x.d * heads_local * eb;           // one of Q, K, V, O of the local rows
    step_fwd = fused_attention_time(flops, 4.0 * head_bytes, prec, gpu, hw, p.attention);
    step_bwd = fused_attention_time(2.5 * flops, 8.0 * head_bytes, prec, gpu, hw, p.attention);
  } else {
    const GemmShape qk{x.sl, x.sl, x.d, heads_local};
    const GemmShape pv{x.sl, x.d, x.sl, heads_local};
    const double t_qk = gemm_time(qk, prec, gpu, hw, true);
    const double t_pv = gemm_time(pv, prec, gpu, hw, true);
    const ScorePasses sp = score_passes(m, heads_local * x.sl * x.sl, eb);  // one block's score elements
    step_fwd = t_qk + t_pv + memory_bound_time(sp.fwd_bytes, gpu, hw, sp.kernels);
    step_bwd = 2.0 * (t_qk + t_pv) + memory_bound_time(sp.bwd_bytes, gpu, hw, sp.kernels);
  }
  lc.fwd_attention_s = cp * step_fwd;
  ring_exchange(p, c, hw, x, step_fwd, step_bwd, lc);
  return cp * step_bwd;
}

void ring_exchange(const Plan& p, const Cluster& c, const HardwareProfile& hw, const LayerShape& x, double step_fwd,
                   double step_bwd, LayerCost& lc) {
  const double cp = p.cp;
  const GroupLayout l = place_groups(p, c);
  const bool crosses = l.cp.crosses_nodes();
  // K and V of the local rows, un-repeated under grouped-query attention (at
  // least one head per tensor-parallel rank).
  const double kv_local = std::max(x.kvd / x.t, x.d);
  lc.cp_steps = p.cp;
  lc.cp_bytes = 2.0 * x.b * x.sl * kv_local * bytes_of(storage_precision(p));
  const double kv_s = p2p_time(lc.cp_bytes, crosses, c, hw);
  const double kv_dkv_s = p2p_time(2.0 * lc.cp_bytes, crosses, c, hw);
  lc.cp_step_fwd_s = step_fwd;
  lc.cp_step_bwd_s = step_bwd;
  lc.cp_fwd_link_s = (cp - 1.0) * kv_s;
  lc.cp_bwd_link_s = (cp - 1.0) * kv_dkv_s + kv_s;
  lc.cp_fwd_s = (cp - 1.0) * std::max(0.0, kv_s - step_fwd);
  lc.cp_bwd_s = (cp - 1.0) * std::max(0.0, kv_dkv_s - step_bwd) + kv_s;
}


bool megatron_fused_softmax_available(double attn_batches, double sq, double sk, Precision p) {
  if (p != Precision::fp16 && p != Precision::bf16) return false;
  if (!(sk > 16 && sk <= 4096)) return false;
  auto multiple = [](double v, double of) { return std::fmod(v, of) == 0.0; };
  if (!multiple(sq, 4) || !multiple(sk, 4) || !multiple(attn_batches, 4)) return false;
  const double next_pow2 = std::exp2(std::ceil(std::log2(sk)));
  const double warp = std::min(next_pow2, 32.0);
  const double batches_per_warp = next_pow2 <= 128 ? 2 : 1;
  const double batches_per_block = (128.0 / warp) * batches_per_warp;
  return multiple(attn_batches, batches_per_block);
}

double attention_score_elements(const Transformer& m, const Plan& p) {
  const LayerShape x = shape_of(m, p);
  return x.b * x.a / (x.t * x.u) * x.sa * x.s;
}

bool megatron_softmax_fallback(const Transformer& m, const Plan& p, const HardwareProfile& hw) {
  if (p.attention != AttentionKernel::standard || p.cp != 1 || !hw.engine.megatron_softmax_rule ||
      p.sparse_attention != SparseLayout::none)
    return false;
  const LayerShape x = shape_of(m, p);
  return !megatron_fused_softmax_available(x.b * x.a / (x.t * x.u), x.sa, x.s, p.precision);
}

namespace {
// What running the bias fusions' ops apart adds (plan.bias_fusion false);
// zero with them fused.
double unfused_bias_bytes(const Transformer& m, const Plan& p, const LayerShape& x, double eb) {
  if (p.bias_fusion) return 0;
  // Against the fused kernels' one pass each (gpu_layer_compute's bda_bytes and
  // act_bytes). Bias-dropout-add, twice a layer on the hidden state hs: the
  // row-parallel output's bias add (read, write), dropout (read, write, a
  // 1-byte mask) and the residual add (two reads, a write) are 7·hs·eb + hs
  // where the fused kernel is 3·hs·eb + hs: 4·hs·eb more each (2·hs·eb for a
  // model without biases, whose dropout and add still run apart). The MLP's
  // input projection: a bias add of its own over the f_in outputs (read,
  // write) before the activation, which for GeLU is one kernel either way
  // (the 2019 Megatron-LM's gelu_impl is torch.jit.script'ed); SwiGLU's
  // silu(a)·b runs as silu (read, write f_out) and a product (two reads, a
  // write), 5·f_out against the fused f_in + f_out = 3·f_out: 2·f_out more.
  // Without dropout its kernel does not run: the bias add's 2·hs·eb alone.
  const double hs = x.tokens * x.h / (x.sp ? x.t : 1.0);
  const double apart = m.has_dropout() ? (m.bias ? 4.0 : 2.0) : (m.bias ? 2.0 : 0.0);
  const double bda = 2.0 * apart * hs * eb;
  const double bias = m.bias ? 2.0 * x.f_in / x.t * x.tokens * eb : 0.0;
  const double act = m.activation == Activation::swiglu ? 2.0 * x.f_out / x.t * x.tokens * eb : 0.0;
  return bda + bias + act;
}

int unfused_bias_kernels(const Transformer& m, const Plan& p) {
  if (p.bias_fusion) return 0;
  // Each bias-dropout-add becomes three kernels (+2, twice; without biases two,
  // +1; without dropout one fewer); the MLP's bias add is a kernel of its own,
  // and so is SwiGLU's product.
  const int per_bda = (m.bias ? 2 : 1) - (m.has_dropout() ? 0 : 1);
  return 2 * per_bda + (m.bias ? 1 : 0) + (m.activation == Activation::swiglu ? 1 : 0);
}

// The kernels (and host ops) Megatron's unfused softmax fallback adds each way
// (megatron_softmax_fallback; priced in gpu_layer_compute, dispatched in layer_cost).
constexpr int kFallbackOps = 4;
}  // namespace

void gpu_layer_compute(const LayerParts& in, LayerCost& lc) {
  const Transformer& m = in.m;
  const Plan& p = in.p;
  const Cluster& c = in.c;
  const HardwareProfile& hw = in.hw;
  const LayerShape& x = in.x;
  const GpuSpec& gpu = c.node.gpu;
  const double eb = bytes_of(storage_precision(p));       // their traffic per element
  const double heads_local = in.g.heads_local;
  const double density = in.g.density;
  const double t_qk = in.g.t_qk;
  const double t_pv = in.g.t_pv;
  const int elem_kernels = in.elem_kernels;
  const bool softmax_fallback = in.softmax_fallback;
  lc.fwd_gemm_s = in.g.fwd_s();
  const double scores = heads_local * x.sa * x.s * density;  // attention score elements computed
  // Fused scale-mask-softmax (read + write) and dropout (read, write, 1-byte mask).
  const ScorePasses score_traffic = score_passes(m, scores, eb);
  lc.fwd_attention_s = t_qk + t_pv + memory_bound_time(score_traffic.fwd_bytes, gpu, hw, score_traffic.kernels);
  // Eager: the scaling and the masking run as their own kernels before the
  // softmax, each a read and a write of the scores (Megatron's unfused path,
  // --no-masked-softmax-fusion: scores·scale, then masked_fill; Hugging Face
  // eager attention the same), and each has a backward of its own, a read
  // and a write of the scores' gradient (the fused kernel's backward applies
  // both in its one pass). Megatron-LM 2019 (mpu/transformer.py, as kept in
  // DeepSpeedExamples/Megatron-LM) runs a third forward pass, the masked
  // scores' subtraction scores·mask − 10000·(1 − mask), whose gradient is the
  // identity; not counted. What autograd saves is what the fused kernel
  // saves (mask broadcast, softmax output).
  double eager_bwd_s = 0;
  if (p.attention == AttentionKernel::eager) {
    eager_bwd_s = memory_bound_time(2.0 * 2.0 * scores * eb, gpu, hw, 2);  // the same two passes each way
    lc.fwd_attention_s += eager_bwd_s;
  }
  // Megatron's fused softmax refused by the shape (an engine with its rule):
  // forward_torch_softmax runs input.float(), ·scale, masked_fill, softmax and
  // .half() as five kernels over the scores in fp32 where the fused kernel
  // reads and writes them once in 16-bit: (eb+4) + 3·8 + (4+eb) − 2·eb = 32
  // more bytes per score forward. Backward: the gradient to fp32, softmax
  // backward (reads output and gradient, writes one, fp32), the mask's and the
  // scale's backward, back to 16-bit, against the fused backward's 3·eb:
  // 36 − eb more. Four more kernels and four more host ops each way.
  double fallback_bwd_s = 0;
  if (softmax_fallback) {
    lc.fwd_attention_s += memory_bound_time(32.0 * scores, gpu, hw, kFallbackOps);
    fallback_bwd_s = memory_bound_time((36.0 - eb) * scores, gpu, hw, kFallbackOps);
  }

  double flash_bwd_s = 0;
  if (fused_attention(p.attention) && p.cp == 1) {  // cp > 1: the ring's blocks, below
    // One fused kernel each way (Dao 2023, FlashAttention-2): no s×s tensor
    // reaches HBM, which sees only Q, K, V and O (forward) and those, dO, dQ,
    // dK and dV (backward). A causal kernel skips the key blocks above the
    // diagonal: n(n+1)/2 of the n² blocks of kFlashBlock rows (n = s/kFlashBlock).
    // Backward runs five block products where forward runs two (QKᵀ again,
    // dV = PᵀdO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q): 2.5× the forward's work.
    // Both run at the profile's attention GEMM efficiency for their FLOPs.
    // With a sliding window of w tokens, a block row also skips the key
    // blocks wholly before its window: it touches min(i + 1, k) of them,
    // k = ⌈(w − 1)/kFlashBlock⌉ + 1 (FlashAttention-2's window_size).
    constexpr double kFlashBlock = 128;
    const double n = std::ceil(x.s / kFlashBlock);
    const double k = m.windowed() ? std::ceil((m.attention_window - 1) / kFlashBlock) + 1.0 : n;
    double blocks = 0;
    for (double i = 0; i < n; ++i) blocks += std::min(i + 1.0, k);
    const double fwd_flops = 4.0 * x.s * x.s * x.d * heads_local * blocks / (n * n);
    const Precision attention = attention_precision(p, hw.engine);
    const double head_bytes = x.s * x.d * heads_local * bytes_of(attention);  // one of Q, K, V, O per micro-batch
    lc.fwd_attention_s = fused_attention_time(fwd_flops, 4.0 * head_bytes, attention, gpu, hw, p.attention);
    flash_bwd_s = fused_attention_time(2.5 * fwd_flops, 8.0 * head_bytes, attention, gpu, hw, p.attention);
  }

  double cp_bwd_attention_s = 0;
  if (p.cp > 1) cp_bwd_attention_s = context_parallel_attention(m, p, c, hw, x, lc);

  // Elementwise: the hidden-state ops run on s·b·h (÷t with sequence parallelism).
  const double hs = x.tokens * x.h / (x.sp ? x.t : 1.0);
  const double norm_bytes = 2.0 * hs * eb;                 // read + write
  const double mask_bytes = m.has_dropout() ? hs : 0.0;     // a 1-byte mask; none without dropout
  const double bda_bytes = 3.0 * hs * eb + mask_bytes;     // bias-dropout-add: 2 reads, 1 write, mask
  const double act_bytes = (x.f_in + x.f_out) / x.t * x.tokens * eb;  // activation read f_in, write f_out
  const double rope_bytes =
      m.position == PositionEmbedding::rotary ? 2.0 * x.tokens * (x.h + x.kvd) / x.t * eb : 0.0;
  // Megatron's fused kernels move this traffic once; an eager engine runs each
  // op as its own kernel over the whole tensor (engine elementwise_traffic).
  // Without the bias fusions (plan.bias_fusion false) the engine's own kernels
  // run apart: unfused_bias_bytes counts what they add.
  const double elem_fwd_bytes =
      (2.0 * norm_bytes + 2.0 * bda_bytes + act_bytes + rope_bytes + unfused_bias_bytes(m, p, x, eb)) *
      hw.engine.elementwise_traffic;
  // FP8 casts (plan.fp8): fused kernels of their own, at the fused traffic.
  const Fp8CastTraffic& casts = in.casts;
  lc.fwd_elementwise_s = memory_bound_time(elem_fwd_bytes + casts.fwd_bytes, gpu, hw, elem_kernels + casts.fwd_kernels);
  lc.fwd_s = lc.fwd_gemm_s + lc.fwd_attention_s + lc.fwd_elementwise_s;

  // Backward: dgrad of every GEMM, both attention GEMM gradients per forward
  // GEMM, softmax/dropout backward (read grad + saved output, write grad),
  // elementwise backward ≈ twice the forward traffic.
  const double bwd_dgrad = in.g.dgrad_s();
  const double bwd_attention =
      p.cp > 1 ? cp_bwd_attention_s
      : fused_attention(p.attention)
          ? flash_bwd_s
          : 2.0 * (t_qk + t_pv) + memory_bound_time(score_traffic.bwd_bytes, gpu, hw, score_traffic.kernels) +
                eager_bwd_s + fallback_bwd_s;
  const double bwd_elem =
      memory_bound_time(2.0 * elem_fwd_bytes + casts.bwd_bytes, gpu, hw, elem_kernels + casts.bwd_kernels);
  lc.bwd_input_s = bwd_dgrad + bwd_attention + bwd_elem;
  lc.bwd_weight_s = in.g.wgrad_s();
  lc.bwd_s = lc.bwd_input_s + lc.bwd_weight_s;
  lc.bwd_gemm_s = bwd_dgrad + lc.bwd_weight_s;
  lc.bwd_attention_s = bwd_attention;
  lc.bwd_elementwise_s = bwd_elem;
}

LinearGemms layer_linear_gemms(const Transformer& m, const Plan& p) {
  const LayerShape x = shape_of(m, p);
  return {GemmShape{x.tokens, (x.h + 2.0 * x.kvd) / x.t, x.h}, GemmShape{x.tokens, x.h, x.h / x.t},
          GemmShape{x.tokens, x.f_in / x.t, x.h}, GemmShape{x.tokens, x.h, x.f_out / x.t}};
}

GemmShape logits_gemm(const Transformer& m, const Plan& p) {
  const LayerShape x = shape_of(m, p);
  return {x.tokens * m.head_token_fraction, static_cast<double>(m.vocab) / x.t, x.h};
}

LayerCost layer_cost(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  const LayerShape x = shape_of(m, p);
  const GpuSpec& gpu = c.node.gpu;
  const Precision prec = p.precision;  // the linear GEMMs' tensor-core type
  const Precision stored = storage_precision(p);
  const double eb = bytes_of(stored);  // what the collectives move
  LayerCost lc;

  LayerGemms g;
  const LinearGemms lin = layer_linear_gemms(m, p);
  g.qkv = lin.qkv;
  g.proj = lin.proj;
  g.fc1 = lin.fc1;
  g.fc2 = lin.fc2;
  // Attention core: b·a/t heads, QKᵀ (s×s, inner d) and PV (s×d, inner s).
  // Block-sparse attention computes only the layout's blocks (DeepSpeed's
  // SDD and DSD block-sparse matmuls): nnz blocks of block×block per head.
  // With Ulysses: the whole sequence of heads/u of this rank's heads.
  g.heads_local = x.b * x.a / (x.t * x.u);
  g.density = attention_density(m, p);
  // With context parallelism: this rank's s/cp query rows against all s keys
  // (cp ring blocks; context_parallel_attention prices them step by step).
  g.qk = GemmShape{x.sa, x.s, x.d, g.heads_local};
  g.pv = GemmShape{x.sa, x.d, x.s, g.heads_local};
  if (p.sparse_attention != SparseLayout::none) {
    const double blk = p.sparse_block;
    const double blocks = g.density * (x.s / blk) * (x.s / blk);
    g.qk = GemmShape{blk, blk, x.d, g.heads_local * blocks};
    g.pv = GemmShape{blk, x.d, blk, g.heads_local * blocks};
  }
  // The four linear layers' GEMMs: FP8 tensor cores with plan.fp8 (the
  // attention core and the LM head stay 16-bit, as in Megatron-Core, whose
  // output layer is not a Transformer Engine module, and torchtitan, whose
  // float8 recipes filter "output").
  auto linear = [&](const GemmShape& s) {
    return p.fp8 != Fp8Recipe::none ? fp8_linear_times(s, prec, gpu, hw) : linear_times(s, prec, gpu, hw);
  };
  g.t_qkv = linear(g.qkv);
  g.t_proj = linear(g.proj);
  g.t_fc1 = linear(g.fc1);
  g.t_fc2 = linear(g.fc2);
  // The standard attention core's products (fp32 in ztune's executor).
  const Precision attention = attention_precision(p, hw.engine);
  g.t_qk = gemm_time(g.qk, attention, gpu, hw, true);
  g.t_pv = gemm_time(g.pv, attention, gpu, hw, true);

  // Host-op facts of the layer, the same whichever flavour computes it: the
  // elementwise kernels of a pass, and Megatron's softmax fallback (below).
  const int bias_kernels = unfused_bias_kernels(m, p);  // 0 with Megatron's bias fusions
  const int elem_kernels = (m.position == PositionEmbedding::rotary ? 6 : 5) + bias_kernels;
  const bool softmax_fallback = megatron_softmax_fallback(m, p, hw);
  // FP8 casts (priced in gpu_layer_compute, dispatched below); none on CPU ranks (check_plan).
  const Fp8CastTraffic casts = fp8_cast_traffic(p, lin, hw.engine.fp8);
  const LayerParts parts{{m, p, c, hw, x}, g, elem_kernels, softmax_fallback, casts};
  // The compute flavour, selected once: ztune's CPU executor on CPU ranks,
  // the GPU engines' fused layer elsewhere (cpu_executor_costs.hpp says why).
  (c.device_kind == DeviceKind::cpu ? cpu_layer_compute : gpu_layer_compute)(parts, lc);

  // FLOPs on this GPU: 24·s·b·h²/t + 4·s²·b·h/t for GPT (Korthikanti eq. 7 per layer).
  lc.fwd_flops = g.qkv.flops() + g.proj.flops() + g.fc1.flops() + g.fc2.flops() + g.qk.flops() + g.pv.flops();
  switch (p.recompute) {
    case Recompute::none: break;
    case Recompute::selective:
      switch (p.recompute_policy) {
        case SelectivePolicy::attention:  // the attention core only (Korthikanti §4.2)
          lc.recompute_s = lc.fwd_attention_s;
          lc.recompute_flops = g.qk.flops() + g.pv.flops();
          break;
        case SelectivePolicy::alternate_mm: {
          // torchtitan's "save every other mm": wk, wo and w3 (gated MLP) or w2
          // recomputed, with the elementwise ops; the attention output is saved.
          const GemmShape wk{x.tokens, x.kvd / x.t, x.h};
          const bool gated = m.activation == Activation::swiglu;
          const GemmShape mlp = gated ? GemmShape{x.tokens, x.f_in / (2.0 * x.t), x.h} : g.fc2;
          lc.recompute_s = linear(wk).fwd + g.t_proj.fwd + linear(mlp).fwd +
                           lc.fwd_elementwise_s;
          lc.recompute_flops = wk.flops() + g.proj.flops() + mlp.flops();
          break;
        }
        case SelectivePolicy::mlp_in:  // MaxText save_dot_except_mlpwi: wi, the attention core, elementwise
          lc.recompute_s = g.t_fc1.fwd + lc.fwd_attention_s + lc.fwd_elementwise_s;
          lc.recompute_flops = g.fc1.flops() + g.qk.flops() + g.pv.flops();
          break;
        case SelectivePolicy::dots:  // JAX dots_saveable (PaxML SAVE_DOT_ONLY): the attention core, elementwise
          lc.recompute_s = lc.fwd_attention_s + lc.fwd_elementwise_s;
          lc.recompute_flops = g.qk.flops() + g.pv.flops();
          break;
        case SelectivePolicy::alternate_layers:  // every k-th layer whole: a k-th of a forward per layer
          lc.recompute_s = whole_layer_recompute_share(p) * lc.fwd_s;
          lc.recompute_flops = whole_layer_recompute_share(p) * lc.fwd_flops;
          break;
      }
      break;
    case Recompute::full:
      lc.recompute_s = lc.fwd_s;
      lc.recompute_flops = lc.fwd_flops;
      break;
  }
  // Recomputing the attention core (selective or full) runs its ring again.
  if (p.cp > 1) lc.cp_recompute_s = attention_recompute_share(p) * lc.cp_fwd_s;

  // DeepSpeed-Ulysses' all-to-alls (deepspeed/sequence/layer.py
  // DistributedAttention: one each for Q, K, V before the local attention,
  // one for its output after; autograd runs each one's transpose backward).
  // K and V are un-repeated under GQA (check_plan_shape: u divides the KV
  // heads of a tp rank). Over the Ulysses group, priced as every collective.
  if (p.ulysses > 1) {
    const GroupLayout l = place_groups(p, c);
    lc.ulysses_a2a_fwd = 4;
    lc.ulysses_a2a_bwd = 4;
    lc.ulysses_q_bytes = x.tokens * x.h / x.t * eb;
    lc.ulysses_kv_bytes = x.tokens * x.kvd / x.t * eb;
    const double q = collective_time(Collective::all_to_all, lc.ulysses_q_bytes, l.ulysses, c, hw);
    const double kv = collective_time(Collective::all_to_all, lc.ulysses_kv_bytes, l.ulysses, c, hw);
    lc.ulysses_fwd_s = 2.0 * q + 2.0 * kv;
    lc.ulysses_bwd_s = 2.0 * q + 2.0 * kv;
    lc.ulysses_recompute_s = whole_layer_recompute_share(p) * lc.ulysses_fwd_s;
  }

  // Host dispatch: a Megatron GPT layer's forward issues about kHostOpsForward
  // ops (4 GEMMs, 2 attention bmm, softmax, dropouts, norms, bias-GeLU, views
  // and copies, TP collectives); autograd's backward about twice as many.
  constexpr double kHostOpsForward = 20;
  constexpr double kHostOpsSelective = 6;  // QKᵀ, softmax, dropout, PV and their views
  const double fallback_ops = softmax_fallback ? kFallbackOps : 0.0;
  // Unfused bias kernels: each its own op forward, and its own backward op.
  const double bias_ops = bias_kernels;
  // FP8 casts: each its own op (Transformer Engine's cast_transpose calls,
  // torchao's scale and cast).
  lc.host_fwd_s = (kHostOpsForward + fallback_ops + bias_ops + casts.fwd_kernels) * hw.engine.host_op_s;
  lc.host_bwd_s = (2.0 * kHostOpsForward + fallback_ops + bias_ops + casts.bwd_kernels) * hw.engine.host_op_s;
  // Ops the backward issues again per layer: the policies other than the
  // attention core's recompute their GEMMs (3 or 2) and the elementwise
  // kernels instead of (alternate_mm) or beside (mlp_in) the core; the
  // every-k-th-layer policy a k-th of a forward.
  auto recompute_ops = [&]() -> double {
    switch (p.recompute) {
      case Recompute::none: return 0.0;
      case Recompute::full: return kHostOpsForward + bias_ops + casts.fwd_kernels;
      case Recompute::selective: break;
    }
    switch (p.recompute_policy) {
      case SelectivePolicy::attention: return kHostOpsSelective;
      case SelectivePolicy::alternate_mm: return 3.0 + elem_kernels;
      case SelectivePolicy::mlp_in: return kHostOpsSelective + 2.0 + elem_kernels;
      case SelectivePolicy::dots: return kHostOpsSelective + elem_kernels;
      case SelectivePolicy::alternate_layers: return whole_layer_recompute_share(p) * kHostOpsForward;
    }
    return kHostOpsSelective;
  };
  // The softmax fallback's ops run again wherever the attention core does.
  lc.host_recompute_s = (recompute_ops() + attention_recompute_share(p) * fallback_ops) * hw.engine.host_op_s;

  // Tensor-parallel collectives (Megatron; Korthikanti §4.2.2): S = s·b·h 16-bit.
  if (p.tp > 1) {
    const GroupLayout l = place_groups(p, c);
    lc.tp_bytes = x.tokens * x.h * eb;
    // Parallel blocks (GPT-J/NeoX): attention and MLP read the same input, so
    // their row-parallel partial sums are added before one reduction and
    // backward gathers their shared output gradient once (SP); the two input
    // gradients are still reduced apart.
    const double outputs = m.parallel_residual ? 1.0 : 2.0;  // reductions of block outputs per layer
    if (!x.sp) {
      // forward: all-reduce after attention and after MLP (g); backward: the
      // all-reduce of the column-parallel input gradient (f), issued async
      // alongside the weight-gradient GEMM.
      const double ar = collective_time(Collective::all_reduce, lc.tp_bytes, l.tp, c, hw);
      lc.tp_kind_fwd = Collective::all_reduce;
      lc.tp_collectives_fwd = static_cast<int>(outputs);
      lc.tp_collectives_bwd = 2;
      lc.tp_fwd_s = outputs * ar;
      lc.tp_bwd_s = 0;
      lc.tp_bwd_async_s = 2.0 * ar;
    } else {
      // forward: all-gather before QKV and FC1, reduce-scatter after projection
      // and FC2. backward: all-gather of the output gradient (blocking), and,
      // async, the reduce-scatter of the input gradient plus the re-gather of the
      // input for the weight gradient. Transformer Engine under delayed FP8
      // scaling gathers FP8 (layernorm_linear.py, linear.py with sequence
      // parallelism: the norms' FP8 outputs, the output gradients cast before
      // their gather, the saved FP8 inputs): 1 byte an element; its
      // reduce-scatters stay 16-bit.
      const bool fp8_gathers = p.fp8 == Fp8Recipe::delayed && hw.engine.fp8 == Fp8Library::transformer_engine;
      const double ag =
          collective_time(Collective::all_gather, fp8_gathers ? x.tokens * x.h : lc.tp_bytes, l.tp, c, hw);
      const double rs = collective_time(Collective::reduce_scatter, lc.tp_bytes, l.tp, c, hw);
      lc.tp_kind_fwd = Collective::all_gather;
      lc.tp_collectives_fwd = 2 + static_cast<int>(outputs);
      lc.tp_collectives_bwd = 4 + static_cast<int>(outputs);
      lc.tp_fwd_s = 2.0 * ag + outputs * rs;
      lc.tp_bwd_s = outputs * ag;
      lc.tp_bwd_async_s = 2.0 * (ag + rs);
      if (p.tp_comm_overlap) {
        // Transformer Engine's userbuffers (Megatron-Core --tp-comm-overlap; Wang
        // et al. 2023, §3): each blocking collective is cut into chunks
        // pipelined with the one GEMM it feeds or follows, so it hides behind
        // that GEMM only: the all-gathers before QKV and FC1 behind their
        // forward GEMMs, the reduce-scatters after the projection and FC2 behind
        // theirs (one behind both with parallel blocks), the backward's
        // all-gathers of the output gradient behind those GEMMs' dgrad. The
        // engine's tp_comm_overlap is the fraction hidden. The async backward
        // collectives keep their own window (tp_overlap).
        const double f = hw.engine.tp_comm_overlap;
        const double rs_fwd = outputs > 1.0 ? exposed(rs, g.t_proj.fwd, f) + exposed(rs, g.t_fc2.fwd, f)
                                            : exposed(rs, g.t_proj.fwd + g.t_fc2.fwd, f);
        lc.tp_fwd_s = exposed(ag, g.t_qkv.fwd, f) + exposed(ag, g.t_fc1.fwd, f) + rs_fwd;
        lc.tp_bwd_s = outputs > 1.0 ? exposed(ag, g.t_proj.dgrad, f) + exposed(ag, g.t_fc2.dgrad, f)
                                    : exposed(ag, g.t_proj.dgrad + g.t_fc2.dgrad, f);
      }
    }
    lc.tp_bwd_window_s = g.t_qkv.wgrad + g.t_fc1.wgrad + (x.sp ? g.t_qkv.dgrad + g.t_fc1.dgrad : 0.0);
    if (p.recompute == Recompute::full) {
      lc.tp_collectives_recompute = lc.tp_collectives_fwd;
      lc.tp_recompute_s = lc.tp_fwd_s;
      // ZeRO-R Pa: the layer's saved input, split over the tp ranks, is
      // all-gathered (s·b·h 16-bit) before the layer is recomputed; DeepSpeed's
      // checkpointing issues it synchronously (Rajbhandari et al. 2020 §8: one
      // all-gather of s·h per block beside Megatron's 12·s·h of all-reduces).
      if (p.partition_activations) {
        lc.tp_collectives_recompute += 1;
        lc.tp_recompute_s += collective_time(Collective::all_gather, lc.tp_bytes, l.tp, c, hw);
      }
    } else {
      // torchtitan's every-k-th-layer policy: a k-th of the layers repeat
      // their forward collectives (per layer, a k-th of them on average).
      lc.tp_recompute_s = whole_layer_recompute_share(p) * lc.tp_fwd_s;
    }
  }
  return lc;
}

CrossEntropyCost cross_entropy_cost(CrossEntropyKernels k, double eb) {
  switch (k) {
    case CrossEntropyKernels::megatron_fp32:
      // Megatron's gpt_model post_language_model_processing calls
      // vocab_parallel_cross_entropy(output.float(), labels)
      // (tensor_parallel/cross_entropy.py): the cast (eb read, 4 written), the
      // row max (4), the max subtracted (4 + 4), exp (4 + 4), the row sum (4),
      // the division into the softmax it saves (4 + 4); backward, the softmax
      // times the loss gradient in place (4 + 4) and the cast back (4 + eb).
      // Live at once: the logits and the fp32 buffer every step works in place.
      return {eb + 36.0, 12.0 + eb, 6, 2, eb + 4.0};
    case CrossEntropyKernels::megatron_fused:
      // Megatron-Core's fused_vocab_parallel_cross_entropy
      // (fusions/fused_cross_entropy.py, jit_fuser = torch.compile): the
      // cast fused into the row max (eb read, 4 written), exp and the row sum
      // in place (4 + 4), the division into the saved softmax (4 + 4);
      // backward, the scatter, multiply and cast in one graph (4 + 4 + eb).
      // Live at once: the logits and the saved fp32 softmax.
      return {eb + 20.0, 8.0 + eb, 3, 1, eb + 4.0};
    case CrossEntropyKernels::torch_fp32:
      // F.cross_entropy(logits.float()) = log_softmax + nll_loss: the cast
      // (eb + 4); cunn_SoftMaxForward reads a vocabulary-long row three times
      // (max, sum of exponentials, output) and writes it once (16);
      // backward, nll_loss_backward zero-fills the fp32 gradient (4),
      // log_softmax's backward reads it twice and the output once and writes
      // (16), and the cast back (4 + eb).
      // Live at once, at the backward's start: the saved fp32 log_softmax,
      // nll_loss's fp32 gradient and log_softmax's (12; torchtitan deletes
      // the 16-bit logits before backward). The forward's eb + 8 (the logits,
      // the fp32 copy, the log_softmax) is less. torchtitan's published peaks
      // (Llama 3.1 8B, 8 and 128 H100: 82.4 and 67.0 GiB) need these 12.
      return {eb + 20.0, eb + 24.0, 3, 4, std::max(12.0, eb + 8.0)};
    case CrossEntropyKernels::fused:
      break;
  }
  // Row statistics over the 16-bit logits with fp32 probabilities, then one
  // gradient pass: eb + 8 in 3 kernels, 4 + eb in 1; the logits and one fp32
  // row of probabilities live.
  return {eb + 8.0, 4.0 + eb, 3, 1, eb + 4.0};
}

void gpu_edge_compute(const EdgeParts& in, EdgeCost& e) {
  const Transformer& m = in.m;
  const LayerShape& x = in.x;
  const GpuSpec& gpu = in.c.node.gpu;
  const HardwareProfile& hw = in.hw;
  const double eb = bytes_of(storage_precision(in.p));  // the kernels' traffic per element
  const double hs = x.tokens * x.h;
  const double hs_local = hs / (x.sp ? x.t : 1.0);
  const LinearTimes& t_logits = in.t_logits;
  const double logit_elems = in.logit_elems;
  // Embedding: gather rows (+ learned positions): read + write s·b·h each.
  const double pos = m.position == PositionEmbedding::learned ? 2.0 : 0.0;
  e.embedding_fwd_s = memory_bound_time((2.0 + pos) * hs * eb, gpu, hw, pos > 0 ? 2 : 1);
  e.embedding_bwd_s = memory_bound_time((2.0 + pos) * hs * eb, gpu, hw, pos > 0 ? 2 : 1);
  // Head: final norm, logits GEMM, the engine's softmax cross entropy.
  const CrossEntropyCost ce = cross_entropy_cost(hw.engine.cross_entropy, eb);
  e.head_fwd_s = memory_bound_time(2.0 * hs_local * eb, gpu, hw) + t_logits.fwd +
                 memory_bound_time(logit_elems * ce.fwd_bytes, gpu, hw, ce.fwd_kernels);
  e.head_bwd_s = memory_bound_time(4.0 * hs_local * eb, gpu, hw) + t_logits.dgrad + t_logits.wgrad +
                 memory_bound_time(logit_elems * ce.bwd_bytes, gpu, hw, ce.bwd_kernels);
}

EdgeCost edge_cost(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  const LayerShape x = shape_of(m, p);
  const GpuSpec& gpu = c.node.gpu;
  const Precision prec = p.precision;  // the logits GEMM's tensor-core type
  const double eb = bytes_of(storage_precision(p));  // what the collectives move
  const double hs = x.tokens * x.h;
  EdgeCost e;
  // Head: the logits GEMM (vocab-parallel) on the positions that predict (all
  // of them but in a masked LM); the embedding's and the loss's memory-bound
  // work is the flavour's, selected once (cpu_executor_costs.hpp says why).
  const GemmShape logits = logits_gemm(m, p);
  const LinearTimes t_logits = linear_times(logits, prec, gpu, hw);
  const EdgeParts parts{{m, p, c, hw, x}, t_logits, logits.m * m.vocab / x.t};
  (c.device_kind == DeviceKind::cpu ? cpu_edge_compute : gpu_edge_compute)(parts, e);
  e.head_gemm_s = t_logits.fwd + t_logits.dgrad + t_logits.wgrad;
  e.fwd_flops = logits.flops();
  if (p.tp > 1) {
    const GroupLayout l = place_groups(p, c);
    const double bytes = hs * eb;
    // Vocab-parallel embedding: partial sums all-reduced (reduce-scattered with SP).
    e.embedding_tp_s = collective_time(x.sp ? Collective::reduce_scatter : Collective::all_reduce, bytes, l.tp, c, hw);
    // Head: SP all-gathers the input (and reduce-scatters its gradient); without
    // SP the input gradient is all-reduced. Cross-entropy max/sum/target
    // all-reduces are s·b fp32 each (3 of them).
    const double head_in = x.sp ? collective_time(Collective::all_gather, bytes, l.tp, c, hw) +
                                      collective_time(Collective::reduce_scatter, bytes, l.tp, c, hw)
                                : collective_time(Collective::all_reduce, bytes, l.tp, c, hw);
    e.head_tp_s = head_in + 3.0 * collective_time(Collective::all_reduce, x.tokens * 4.0, l.tp, c, hw);
  }
  return e;
}

LayerCostKey layer_cost_key(const Plan& p) {
  LayerCostKey k;
  k.tp = p.tp;
  k.cp = p.cp;
  k.ulysses = p.ulysses;
  k.micro_batch = p.micro_batch;
  k.sparse_block = p.sparse_attention == SparseLayout::none ? 0 : p.sparse_block;
  k.precision = p.precision;
  k.attention = p.attention;
  k.recompute = p.recompute;
  k.recompute_policy = p.recompute == Recompute::selective ? p.recompute_policy : SelectivePolicy::attention;
  k.recompute_every = k.recompute_policy == SelectivePolicy::alternate_layers ? p.recompute_every : 2;
  k.sparse_attention = p.sparse_attention;
  k.sequence_parallel = p.sequence_parallel;
  k.tp_comm_overlap = p.tp_comm_overlap;
  k.partition_activations = p.partition_activations;
  k.fp8 = p.fp8;
  return k;
}

PipelineP2P pipeline_p2p(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  PipelineP2P r;
  if (p.pp <= 1) return r;
  const GroupLayout l = place_groups(p, c);
  // Megatron's scatter-gather optimisation sends 1/t of the tensor and
  // all-gathers it inside the node; with SP the tensor is already split.
  r.bytes = static_cast<double>(m.seq_len) / p.seq_split() * p.micro_batch * m.hidden *
            bytes_of(storage_precision(p)) / p.tp;
  r.time_s = p2p_time(r.bytes, l.pp_crosses_nodes, c, hw);
  if (!p.sequence_parallel && p.tp > 1)
    r.time_s += collective_time(Collective::all_gather, r.bytes * p.tp, l.tp, c, hw);
  return r;
}

}  // namespace ztune
