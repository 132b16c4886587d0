#pragma once
// The parts of one transformer layer's cost that both compute flavours share
// (private to model/src): the layer's shape on one rank, its GEMMs and their
// times, the ring attention of context parallelism. layer_cost (op_costs.cpp)
// computes these once, hands them to the flavour its cluster selects - the
// GPU engines' fused layer (gpu_layer_compute, op_costs.cpp) or ztune's own
// CPU executor (cpu_layer_compute, cpu_executor_costs.cpp) - and then adds
// what is the same for both: recomputation, Ulysses, host dispatch and the
// tensor-parallel collectives. Why two flavours: cpu_executor_costs.hpp.
#include "ztune/model/op_costs.hpp"

namespace ztune {

struct LayerShape {
  double s, b, h, a, t, d, kvd, f_in, f_out, tokens;
  double sl;  // this rank's rows of each sequence: s, or s/cp with context parallelism, s/u with Ulysses
  double sa;  // query rows of the attention core: s/cp (Ulysses' all-to-all gives it the whole s)
  double u;   // Ulysses ranks: the attention core holds heads/u of them
  bool sp;
};
[[nodiscard]] LayerShape shape_of(const Transformer& m, const Plan& p);

/// The HBM bandwidth a kernel achieves: the datasheet's at the profile's efficiency.
[[nodiscard]] inline double achieved_hbm(const GpuSpec& gpu, const HardwareProfile& hw) {
  return gpu.hbm_bandwidth_gbps * 1e9 * hw.memory_bandwidth_efficiency;
}
/// A linear layer's backward GEMMs from its forward m×k·k×n: the input's
/// gradient (m×n·n×k) and the weight's (k×m·m×n).
[[nodiscard]] inline GemmShape dgrad_of(const GemmShape& g) { return {g.m, g.k, g.n, g.batch}; }
[[nodiscard]] inline GemmShape wgrad_of(const GemmShape& g) { return {g.k, g.n, g.m, g.batch}; }

// Forward, dgrad and wgrad of one linear layer share their FLOPs but not their
// output's shape (m×n, m×k, k×n): three efficiencies, three rooflines.
struct LinearTimes {
  double fwd = 0, dgrad = 0, wgrad = 0;
};
[[nodiscard]] LinearTimes linear_times(const GemmShape& g, Precision p, const GpuSpec& gpu, const HardwareProfile& hw);
/// The same GEMMs with FP8 inputs (plan.fp8): at the GPU's FP8 peak, 1-byte
/// inputs and `out`-typed outputs (fp8_linear_times in fp8_costs.cpp says how
/// its efficiency is read).
[[nodiscard]] LinearTimes fp8_linear_times(const GemmShape& g, Precision out, const GpuSpec& gpu,
                                           const HardwareProfile& hw);

/// The FP8 casts of one layer's linear GEMMs `g` and one micro-batch, as the
/// engine's library runs them (Fp8Library): HBM bytes and kernels each way.
/// Zero without plan.fp8.
struct Fp8CastTraffic {
  double fwd_bytes = 0, bwd_bytes = 0;
  int fwd_kernels = 0, bwd_kernels = 0;
};
[[nodiscard]] Fp8CastTraffic fp8_cast_traffic(const Plan& p, const LinearGemms& g, Fp8Library lib);


/// One layer's GEMMs on one rank and their times: the four linear layers
/// (Megatron: QKV and FC1 column-parallel, projection and FC2 row-parallel)
/// and the attention core's two batched products.
struct LayerGemms {
  GemmShape qkv, proj, fc1, fc2, qk, pv;
  LinearTimes t_qkv, t_proj, t_fc1, t_fc2;
  double t_qk = 0, t_pv = 0;
  double heads_local = 0;  // b·a/(t·u) heads of this rank's attention core
  double density = 1;      // block-sparse attention's share of the score blocks
  /// The four linear layers' forward, dgrad and wgrad times, summed in one
  /// order for both flavours.
  [[nodiscard]] double fwd_s() const { return t_qkv.fwd + t_proj.fwd + t_fc1.fwd + t_fc2.fwd; }
  [[nodiscard]] double dgrad_s() const { return t_qkv.dgrad + t_proj.dgrad + t_fc1.dgrad + t_fc2.dgrad; }
  [[nodiscard]] double wgrad_s() const { return t_qkv.wgrad + t_proj.wgrad + t_fc1.wgrad + t_fc2.wgrad; }
};

/// Ring attention of context parallelism (cp > 1): sets lc's forward attention
/// time and ring fields, returns the backward attention compute time.
double context_parallel_attention(const Plan& p, const Cluster& c, const HardwareProfile& hw, const LayerShape& x,
                                  LayerCost& lc);

/// The ring's exchanges around block steps of `step_fwd` and `step_bwd`
/// seconds (each exchange hides behind one step, as both the engines and
/// ztune's executor overlap them: executor/src/ring_attention.cpp starts the
/// next chunk's send and receive before the block): sets lc's cp fields.
void ring_exchange(const Plan& p, const Cluster& c, const HardwareProfile& hw, const LayerShape& x, double step_fwd,
                   double step_bwd, LayerCost& lc);

/// What every flavour function is handed: the model, plan, cluster, profile
/// and the layer's shape on one rank.
struct CostInputs {
  const Transformer& m;
  const Plan& p;
  const Cluster& c;
  const HardwareProfile& hw;
  const LayerShape& x;
};

/// A layer's flavour gets its GEMMs and the host-op facts layer_cost has
/// already settled (elementwise kernels per pass, Megatron's unfused softmax
/// fallback).
struct LayerParts : CostInputs {
  const LayerGemms& g;
  int elem_kernels = 5;
  bool softmax_fallback = false;
  Fp8CastTraffic casts{};  // plan.fp8's casts (fp8_cast_traffic); zero without FP8
};

/// The compute of one layer as a flavour runs it: lc's forward and backward
/// GEMM, attention and elementwise times and their sums (and with cp > 1 the
/// ring's fields).
void gpu_layer_compute(const LayerParts& in, LayerCost& lc);
void cpu_layer_compute(const LayerParts& in, LayerCost& lc);

/// The embedding's and the head's memory-bound work around the logits GEMMs
/// `t_logits` (logit_elems logits of 16-bit or fp32 activations).
struct EdgeParts : CostInputs {
  const LinearTimes& t_logits;
  double logit_elems = 0;
};
void gpu_edge_compute(const EdgeParts& in, EdgeCost& e);
void cpu_edge_compute(const EdgeParts& in, EdgeCost& e);

}  // namespace ztune
