#include "ztune/model/cpu_executor_costs.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>

#include "ztune/model/op_costs.hpp"
#include "ztune/model/sparse_attention.hpp"
#include "layer_parts.hpp"

namespace ztune {

namespace {

// One CPU kernel per element: its fp32 traffic (read + write, bytes) and its
// work in equivalent bytes at the memory-bound rate.
//
// Work: nanoseconds per element measured on the 2-core Intel Xeon development
// VM (2026-11-30; one rank, 1 thread, the tiny model's shapes, inputs in
// training's range; kernels/src/*_cpu.cpp built -O2), times the memory-bound
// rate `ztune calibrate --cluster local-cpu --np 2` fitted there in the same
// session, 4.12 GB/s (= 4.12 bytes/ns). E.g. GeLU 7.5 ns × 4.12 = 31 bytes
// for 8 bytes of traffic: std::tanh, not memory, bounds it. The ratios between
// kernels are instruction counts (tanh, exp, sqrt, a serial sum) and carry
// over between x86 cores far better than absolute rates, which calibration
// supplies; a machine whose ratios differ (another libm, AVX-512 tanh) should
// re-measure them.
struct Kernel {
  double bytes;  // fp32 traffic per element
  double work;   // equivalent bytes per element
};
// kernels/src/layernorm_cpu.cpp: forward reads x, writes out (1.6 ns); backward
// reads x and dout, adds into dinp (1.7 ns). Per-row mean/rstd and the per-column
// weights stay in cache and are not counted.
constexpr Kernel kLayerNormFwd{8, 6.6};
constexpr Kernel kLayerNormBwd{16, 7.0};
// kernels/src/elementwise_cpu.cpp: add_bias reads and writes x (0.37 ns),
// accumulate reads dst and src and writes dst (0.28 ns), bias_backward reads
// dout (0.39 ns), sum_squares reads x into a double (0.56 ns, serial sum).
constexpr Kernel kAddBias{8, 1.5};
constexpr Kernel kAccumulate{12, 1.15};
constexpr Kernel kBiasBwd{4, 1.6};
constexpr Kernel kSumSquares{4, 2.3};
// kernels/src/gelu_cpu.cpp: tanh per element; forward reads inp and writes out,
// backward reads inp and dout and adds into dinp. Isolated they take 7.5 and
// 9.8 ns; inside a training step (perf record of a 1-rank tiny run: glibc's
// tanhf/expm1f are 13% of all samples) about 1.35× that: 10.2 and 13.1 ns, the
// figures used (the 1-rank run's memory-bound time fixes that one factor).
constexpr double kGeluInTraining = 1.35;
constexpr Kernel kGeluFwdIsolated{8, 31.0};
constexpr Kernel kGeluFwd{8, 42.0};  // 31 × 1.35
constexpr Kernel kGeluBwd{16, 54.0};
static_assert(kGeluFwd.work - kGeluInTraining * kGeluFwdIsolated.work < 0.2 &&
              kGeluInTraining * kGeluFwdIsolated.work - kGeluFwd.work < 0.2);
// kernels/src/embedding_cpu.cpp: forward copies a row (0.15 ns), backward adds
// a gradient row into the table (0.44 ns).
constexpr Kernel kEmbeddingFwd{8, 0.6};
constexpr Kernel kEmbeddingBwd{12, 1.8};
// kernels/src/cross_entropy_cpu.cpp over the [N, V/tp] logits: row max reads
// (0.69 ns), row Σexp reads with an exp (2.05 ns), backward recomputes the exp,
// reads logits and adds into dlogits (2.31 ns). Per row: the target logit
// (read one logit, write one: 0.9 ns) and the loss (read three, write one, a log: 2.3 ns).
constexpr Kernel kCeRowMax{4, 2.8};
constexpr Kernel kCeRowSumExp{4, 8.4};
constexpr Kernel kCeBwd{12, 9.5};
constexpr Kernel kCeTargetRow{8, 3.7};
constexpr Kernel kCeLossRow{16, 9.6};
// kernels/src/adamw_cpu.cpp: reads p, g, m, v and writes p, m, v (28 bytes;
// 3.4 ns at 200k parameters on one rank, 4.2 ns with both ranks at once in
// calibrate's table at 65k: 3.8 ns).
constexpr Kernel kAdamW{28, 15.7};
// kernels/src/attention_cpu.cpp, attention_backward's softmax gradient per
// (batch, head): over the causal triangle a dot pass (reads P, dS) and an update
// pass (reads P, dS, writes dS); above it dS is zeroed (one write). 3.7 ns per
// triangle element: attention_backward's measured time (196 us, tiny, b = 2)
// less its four GEMMs at the GEMM rate (134 us), over 8·64·65/2 elements.
constexpr Kernel kSoftmaxBwdCausal{20, 15.2};
constexpr Kernel kSoftmaxBwdMasked{4, 1.2};

void add(CpuKernelWork& w, const Kernel& k, double elements, int calls = 1) {
  w.bytes += k.bytes * elements;
  w.work_bytes += k.work * elements;
  w.kernels += calls;
}

// Query tiles of the CPU flash kernel (kernels/src/attention_flash_cpu.cpp).
constexpr int kFlashCpuTileForward = 64;
constexpr int kFlashCpuTileBackward = 32;

// Score elements one head's flash pass computes: each tile of `tile` query
// rows against the keys up to its last row.
double flash_tile_scores(int t, int tile) {
  double n = 0;
  for (int i0 = 0; i0 < t; i0 += tile) {
    const int rows = std::min(tile, t - i0);
    n += static_cast<double>(rows) * (i0 + rows);
  }
  return n;
}

struct Dims {
  double n;     // tokens of the micro-batch, s·b (GptStage::N_)
  double rows;  // rows this rank holds between blocks: n, ÷tp with sequence parallelism (rows_)
  double c;     // hidden (C_)
  double f;     // FFN width on this rank, ffn_hidden/tp (Fl_)
  double v;     // vocabulary on this rank, vocab/tp (Vl_)
  double heads;  // b·heads/tp attention heads of the micro-batch on this rank
};

Dims dims_of(const Transformer& m, const Plan& p) {
  Dims d{};
  const double t = p.tp;
  d.n = static_cast<double>(m.seq_len) / p.seq_split() * p.micro_batch;  // this rank's s/cp (s/u) rows
  d.rows = p.sequence_parallel && p.tp > 1 ? d.n / t : d.n;
  d.c = m.hidden;
  d.f = m.ffn_hidden / t;
  d.v = m.vocab / t;
  // Ulysses: the attention core holds heads/u of them over the whole sequence.
  d.heads = static_cast<double>(p.micro_batch) * m.heads / t / p.ulysses;
  return d;
}

}  // namespace

CpuLayerWork cpu_layer_work(const Transformer& m, const Plan& p) {
  const Dims d = dims_of(m, p);
  const double hidden = d.rows * d.c;  // one residual-stream tensor on this rank
  CpuLayerWork w;
  // GptStage::forward_block: layernorm_forward(ln1); [QKV matmul, attention,
  // proj matmul]; add_bias(proj_b); accumulate(x2 += x); layernorm_forward(ln2);
  // [FC matmul]; gelu_forward over [N, F/tp]; [proj matmul]; add_bias(mproj_b);
  // accumulate(out += x2). 7 memory-bound calls.
  add(w.fwd, kLayerNormFwd, hidden);
  add(w.fwd, kAddBias, hidden);
  add(w.fwd, kAccumulate, hidden);
  add(w.fwd, kLayerNormFwd, hidden);
  add(w.fwd, kGeluFwd, d.n * d.f);
  add(w.fwd, kAddBias, hidden);
  add(w.fwd, kAccumulate, hidden);
  // GptStage::backward_block: bias_backward(mproj_b); gelu_backward;
  // layernorm_backward(ln2); bias_backward(proj_b); layernorm_backward(ln1).
  // Its copies (Backend::copy) are not timed as operations. 5 calls.
  add(w.bwd, kBiasBwd, hidden);
  add(w.bwd, kGeluBwd, d.n * d.f);
  add(w.bwd, kLayerNormBwd, hidden);
  add(w.bwd, kBiasBwd, hidden);
  add(w.bwd, kLayerNormBwd, hidden);
  // kernels/src/matmul_cpu.cpp: matmul_forward adds the bias row by row after
  // the GEMM, matmul_backward sums dbias, inside the gemm-kind call: QKV
  // (3C/tp wide) and FC (F/tp); proj and mproj pass no bias (add_bias above).
  const double biased = d.n * (3.0 * d.c / p.tp + d.f);
  w.gemm_bias_fwd.bytes = kAddBias.bytes * biased;
  w.gemm_bias_fwd.work_bytes = kAddBias.work * biased;
  w.gemm_bias_bwd.bytes = kBiasBwd.bytes * biased;
  w.gemm_bias_bwd.work_bytes = kBiasBwd.work * biased;
  // kernels/src/attention_cpu.cpp: per (batch, head) QKᵀ and P·V over the full
  // s×s square (the causal mask only zeroes), 2·s²·d FLOPs each; backward dP =
  // dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q. Block-sparse layouts (not run by
  // the executor) scale by the layout's density.
  const double s = m.seq_len, hd = m.head_dim();
  const double density = attention_density(m, p);
  const double causal = d.heads * s * (s + 1.0) / 2.0 * density;
  if (p.cp > 1) {
    // executor/src/ring_attention.cpp: the local s/cp query rows against every
    // rank's K/V chunk in cp steps. Standard computes each s/cp × s/cp block
    // whole and masks it; flash only the pairs a row attends (its causal
    // share, 1/cp of the triangle), recomputing QKᵀ in backward. Priced at the
    // attention kernel's calibrated rate; the ring's blocks are plain loops
    // over one head row at a time, not the kernel's GEMMs, and each of its
    // exchanges waits for the neighbour rank to be scheduled, so this
    // under-counts it (on the dev VM under load 9: tiny cp2 measured 0.35 s a
    // step where 0.026 s is predicted, dp2 0.22 s for 0.047 s; the load spoils
    // both) until calibrate times the ring.
    const double rows = s / p.cp;
    const double visited = fused_attention(p.attention) ? causal / p.cp : d.heads * rows * s;
    w.attention_fwd_flops = 2.0 * 2.0 * hd * visited;
    w.attention_bwd_flops = 4.0 * 2.0 * hd * visited;
    if (fused_attention(p.attention)) w.attention_bwd_recompute_flops = 2.0 * hd * visited;
    add(w.softmax_bwd, kSoftmaxBwdCausal, causal / p.cp, 0);
    add(w.softmax_bwd, kSoftmaxBwdMasked, std::max(0.0, visited - causal / p.cp), 0);
    return w;
  }
  if (fused_attention(p.attention)) {
    // kernels/src/attention_flash_cpu.cpp: tiles of query rows against the keys
    // up to the tile's last row; forward QKᵀ and P·V (exp inside), backward
    // the recomputed QKᵀ (and exp) plus dP, dV, dQ, dK; the dS pass over each
    // tile (masked entries only zeroed).
    const double fwd = d.heads * flash_tile_scores(m.seq_len, kFlashCpuTileForward);
    const double bwd = d.heads * flash_tile_scores(m.seq_len, kFlashCpuTileBackward);
    w.attention_fwd_flops = 2.0 * 2.0 * hd * fwd;
    w.attention_bwd_recompute_flops = 2.0 * hd * bwd;
    w.attention_bwd_flops = 4.0 * 2.0 * hd * bwd;
    add(w.softmax_bwd, kSoftmaxBwdCausal, causal, 0);
    add(w.softmax_bwd, kSoftmaxBwdMasked, bwd - causal, 0);
    return w;
  }
  w.attention_fwd_flops = 2.0 * 2.0 * s * s * hd * d.heads * density;
  w.attention_bwd_flops = 2.0 * w.attention_fwd_flops;
  const double masked = d.heads * s * (s - 1.0) / 2.0 * density;
  add(w.softmax_bwd, kSoftmaxBwdCausal, causal, 0);
  add(w.softmax_bwd, kSoftmaxBwdMasked, masked, 0);
  return w;
}

CpuEdgeWork cpu_edge_work(const Transformer& m, const Plan& p) {
  const Dims d = dims_of(m, p);
  CpuEdgeWork e;
  // GptStage::embedding_forward: token rows over all N rows (rows outside this
  // rank's vocabulary shard are zero-filled: still written), position rows over
  // this rank's rows, then accumulate(out += pos).
  add(e.embedding_fwd, kEmbeddingFwd, d.n * d.c);
  add(e.embedding_fwd, kEmbeddingFwd, d.rows * d.c);
  add(e.embedding_fwd, kAccumulate, d.rows * d.c);
  // GptStage::embedding_backward: positions over this rank's rows; tokens over
  // N rows, of which the 1/tp in this rank's shard are added.
  add(e.embedding_bwd, kEmbeddingBwd, d.rows * d.c);
  add(e.embedding_bwd, kEmbeddingBwd, d.n * d.c / p.tp);
  // GptStage::head_forward: layernorm_forward(ln_f); [logits GEMM]; ce_row_max,
  // ce_row_sumexp, ce_target_logit, ce_loss.
  add(e.head_fwd, kLayerNormFwd, d.rows * d.c);
  add(e.head_fwd, kCeRowMax, d.n * d.v);
  add(e.head_fwd, kCeRowSumExp, d.n * d.v);
  add(e.head_fwd, kCeTargetRow, d.n);
  add(e.head_fwd, kCeLossRow, d.n);
  // GptStage::head_backward: ce_backward; [dgrad and wgrad GEMMs]; layernorm_backward(ln_f).
  add(e.head_bwd, kCeBwd, d.n * d.v);
  add(e.head_bwd, kLayerNormBwd, d.rows * d.c);
  return e;
}

CpuKernelWork cpu_optimizer_work(const Transformer& m, const Plan& p, double params) {
  CpuKernelWork w;
  const double owned = params / p.shard_group();  // this rank's piece of every bucket (dp × cp ranks, or dp_shard)
  const double part = p.zero_stage >= 1 ? owned : params;
  const int buckets = std::max(1, static_cast<int>(std::ceil(params / p.reduce_bucket_elems)));
  // ParamStore::owned_grad_sq: sum_squares over the owned piece of each tensor
  // counted in the norm (every stage, ZeRO 0 included): one call per tensor
  // piece, about the most loaded stage's tensors (stage_parameter_tensors) ÷ dp.
  const double tensors = stage_parameter_tensors(m, p);
  add(w, kSumSquares, owned, std::max(1, static_cast<int>(std::lround(tensors / p.shard_group()))));
  // ParamStore::optimizer_step: AdamW once over everything (ZeRO 0) or once per
  // bucket over the owned piece (ZeRO ≥ 1). Gradient clipping's scale() runs
  // only in steps whose norm exceeds the clip and is not counted.
  add(w, kAdamW, part, p.zero_stage == 0 ? 1 : buckets);
  // ParamStore::finish_backward, ZeRO 2/3: every micro-batch adds each bucket's
  // reduce-scattered piece into the owned gradients (ZeRO-3 under a pipeline:
  // once, in the step's last backward).
  const int reductions = p.reduces_every_microbatch() ? p.grad_accum : 1;
  if (p.zero_stage >= 2) add(w, kAccumulate, owned * reductions, buckets * reductions);
  return w;
}

std::optional<double> cpu_benchmark_work_per_byte(std::string_view kernel) {
  // calibration/bench/src/memory_bench.cpp's kernels, each the CPU kernel its
  // loop is: `add` (z = x + y) is accumulate's loop, `scale` (x *= a) add_bias's;
  // they run in isolation, so GeLU at its isolated cost.
  const auto ratio = [](const Kernel& k) { return k.work / k.bytes; };
  if (kernel == "add") return ratio(kAccumulate);
  if (kernel == "scale") return ratio(kAddBias);
  if (kernel == "gelu_forward") return ratio(kGeluFwdIsolated);
  if (kernel == "layernorm_forward") return ratio(kLayerNormFwd);
  if (kernel == "adamw") return ratio(kAdamW);
  return std::nullopt;
}

double cpu_work_time(const CpuKernelWork& w, const GpuSpec& cpu, const HardwareProfile& hw) {
  return memory_bound_time(w.work_bytes, cpu, hw, w.kernels);
}

// ---------------------------------------------------------------- the flavour

void cpu_layer_compute(const LayerParts& in, LayerCost& lc) {
  // ztune's CPU executor, not a fused GPU layer (this file's header): its own
  // memory-bound calls, the bias loops inside its matmul calls, and its
  // attention core as the two calls it makes. attention_forward is the kernel
  // `ztune calibrate` times for the attention factor, counted as the benchmark
  // counts it (one call of 4·b·s²·h/t FLOPs, the softmax's exp inside), so no
  // separate softmax/dropout traffic. attention_backward's four GEMMs (twice
  // the forward FLOPs) run at the plain GEMM rate, its softmax gradient as
  // memory-bound work: the forward's exp is what the attention factor prices,
  // and the backward has none (measured on the dev VM: backward 1.16× the
  // forward, not 2×).
  const Plan& p = in.p;
  const HardwareProfile& hw = in.hw;
  const LayerShape& x = in.x;
  const LayerGemms& g = in.g;
  const GpuSpec& gpu = in.c.node.gpu;
  const Precision prec = p.precision;
  const CpuLayerWork w = cpu_layer_work(in.m, p);
  // One (batch, head) product: s×s×d, or one ring block (s/cp)² × d with cp.
  const double keys = p.cp > 1 ? x.sl : x.s;
  const double per_call = 2.0 * x.sa * keys * x.d;
  const GemmShape attn_fwd{x.sa, keys, x.d, w.attention_fwd_flops / per_call};
  const GemmShape attn_bwd{x.sa, keys, x.d, w.attention_bwd_flops / per_call};
  lc.fwd_gemm_s = g.fwd_s();
  lc.fwd_gemm_s += memory_bound_time(w.gemm_bias_fwd.work_bytes, gpu, hw, 0);
  lc.fwd_attention_s = gemm_time(attn_fwd, prec, gpu, hw, true);
  lc.fwd_elementwise_s = cpu_work_time(w.fwd, gpu, hw);
  lc.fwd_s = lc.fwd_gemm_s + lc.fwd_attention_s + lc.fwd_elementwise_s;
  const double bwd_dgrad = g.dgrad_s();
  lc.bwd_weight_s = g.wgrad_s();
  lc.bwd_weight_s += memory_bound_time(w.gemm_bias_bwd.work_bytes, gpu, hw, 0);
  lc.bwd_attention_s = gemm_time(attn_bwd, prec, gpu, hw) + cpu_work_time(w.softmax_bwd, gpu, hw);
  if (w.attention_bwd_recompute_flops > 0)
    lc.bwd_attention_s +=
        gemm_time(GemmShape{x.sa, keys, x.d, w.attention_bwd_recompute_flops / per_call}, prec, gpu, hw, true);
  lc.bwd_elementwise_s = cpu_work_time(w.bwd, gpu, hw);
  lc.bwd_input_s = bwd_dgrad + lc.bwd_attention_s + lc.bwd_elementwise_s;
  lc.bwd_s = lc.bwd_input_s + lc.bwd_weight_s;
  lc.bwd_gemm_s = bwd_dgrad + lc.bwd_weight_s;
  // The ring's exchanges hide behind the executor's own block steps (its
  // attention calls above, cp per pass), not behind a GPU kernel's.
  if (p.cp > 1) ring_exchange(p, in.c, hw, x, lc.fwd_attention_s / p.cp, lc.bwd_attention_s / p.cp, lc);
}

void cpu_edge_compute(const EdgeParts& in, EdgeCost& e) {
  // The executor's own calls: fp32 token and position rows and their sum; the
  // final LayerNorm and the five-kernel cross entropy around the same logits GEMMs.
  const GpuSpec& cpu = in.c.node.gpu;
  const CpuEdgeWork w = cpu_edge_work(in.m, in.p);
  e.embedding_fwd_s = cpu_work_time(w.embedding_fwd, cpu, in.hw);
  e.embedding_bwd_s = cpu_work_time(w.embedding_bwd, cpu, in.hw);
  e.head_fwd_s = cpu_work_time(w.head_fwd, cpu, in.hw) + in.t_logits.fwd;
  e.head_bwd_s = cpu_work_time(w.head_bwd, cpu, in.hw) + in.t_logits.dgrad + in.t_logits.wgrad;
}

}  // namespace ztune
