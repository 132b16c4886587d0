// FP8 linear layers (plan.fp8): their GEMMs at the FP8 peak, the casts each
// engine's FP8 library runs, and the FP8 weight copies refreshed once a step.
// Part of op_costs.hpp's API (fp8_linear_times and fp8_cast_traffic: the
// private layer_parts.hpp).
#include <algorithm>

#include "ztune/model/op_costs.hpp"
#include "layer_parts.hpp"

namespace ztune {

LinearTimes fp8_linear_times(const GemmShape& g, Precision out, const GpuSpec& gpu, const HardwareProfile& hw) {
  LinearTimes t;
  const double flops = g.flops();
  const double peak = gpu.peak_tflops_fp8 * 1e12;
  if (flops <= 0 || peak <= 0) return t;
  // The 16-bit table read where a 16-bit GEMM runs as long: its fall-off with
  // size is fixed costs (launch, tail, waves) against run time, and an FP8
  // GEMM of F FLOPs runs as long as a 16-bit one of F·peak16/peak8 at the same
  // efficiency. No FP8 run is in data/validation to fit its own table.
  const double full_wave = hw.gemm_efficiency_at(flops * gpu.peak_flops(out) / peak);
  auto time_of = [&](const GemmShape& s) {
    const double eff = full_wave * hw.gemm_waves.utilization(s.m, s.n, s.k, s.batch);
    const double bytes = (s.m * s.k + s.k * s.n) * s.batch + s.m * s.n * s.batch * bytes_of(out);  // 1-byte inputs
    return std::max(flops / (peak * eff), bytes / achieved_hbm(gpu, hw)) + hw.kernel_launch_s;
  };
  t.fwd = time_of(g);
  t.dgrad = time_of(dgrad_of(g));
  t.wgrad = time_of(wgrad_of(g));
  return t;
}

Fp8CastTraffic fp8_cast_traffic(const Plan& p, const LinearGemms& g, Fp8Library lib) {
  Fp8CastTraffic f;
  if (p.fp8 == Fp8Recipe::none || lib == Fp8Library::none) return f;
  const double eb = bytes_of(storage_precision(p));
  auto input = [](const GemmShape& s) { return s.m * s.k * s.batch; };        // activation in
  auto grad_out = [](const GemmShape& s) { return s.m * s.n * s.batch; };     // its output's gradient
  const double inputs = input(g.qkv) + input(g.proj) + input(g.fc1) + input(g.fc2);
  const double grads = grad_out(g.qkv) + grad_out(g.proj) + grad_out(g.fc1) + grad_out(g.fc2);
  // Current scaling reads each tensor once more for its amax before the cast.
  const bool current = p.fp8 == Fp8Recipe::tensorwise;
  if (lib == Fp8Library::transformer_engine) {
    // Transformer Engine 1.x modules as Megatron-Core's layer spec composes
    // them (gpt_layer_specs: TELayerNormColumnParallelLinear for QKV and FC1,
    // TERowParallelLinear for the projection and FC2, Megatron's own
    // activation between FC1 and FC2). The norms write QKV's and FC1's
    // inputs in FP8 (no pass of their own); a TE Linear casts and
    // transposes its 16-bit input in one kernel (linear.py
    // fp8_cast_transpose_fused: read eb, write 2): the projection's, the
    // attention output, and FC2's, the activation's output. Backward: every
    // output gradient arrives in 16 bits and is cast and transposed (eb + 2),
    // and the FP8 inputs the norms wrote are transposed for wgrad
    // (fp8_transpose: 1 + 1 bytes). The weights' casts run once a step
    // (fp8_weight_cast_bytes).
    f.fwd_bytes = (eb + 2.0) * (input(g.proj) + input(g.fc2));
    f.fwd_kernels = 2;
    f.bwd_bytes = (eb + 2.0) * grads + 2.0 * (input(g.qkv) + input(g.fc1));
    f.bwd_kernels = 6;
  } else {
    // torchao's Float8Linear: each input and weight cast to FP8 in forward
    // (read eb, write 1); backward casts the output gradient both ways for
    // dgrad and wgrad (read eb, write 2), and casts the saved 16-bit input
    // and the weight again, transposed (eb + 1 each).
    const double weights = linear_weight_elements(g);
    f.fwd_bytes = (eb + 1.0) * (inputs + weights);
    f.fwd_kernels = 8;
    f.bwd_bytes = (eb + 2.0) * grads + (eb + 1.0) * (inputs + weights);
    f.bwd_kernels = 12;
    if (current) {
      f.fwd_bytes += eb * (inputs + weights);
      f.bwd_bytes += eb * (grads + inputs + weights);
      f.fwd_kernels += 8;
      f.bwd_kernels += 12;
    }
    return f;
  }
  if (current) {
    f.fwd_bytes += eb * inputs;
    f.bwd_bytes += eb * grads;
    f.fwd_kernels += 4;
    f.bwd_kernels += 4;
  }
  return f;
}

namespace {
// The linear weights on one rank of the stage with the most layers.
double most_layers_linear_weights(const Transformer& m, const Plan& p) {
  return linear_weight_elements(layer_linear_gemms(m, p)) * max_stage_layers(p, m.layers);
}
}  // namespace

double param_gather_bytes_per_param(const Transformer& m, const Plan& p) {
  // One mix for the plan (the simulator applies it to every stage): the
  // parameters of stage_params' largest stage against the linear weights of
  // the stage with the most layers. With uneven stages these can be two
  // stages: at most one layer's weights apart.
  const double eb = bytes_of(storage_precision(p));
  if (!p.fp8_param_gather) return eb;
  const double params = stage_params(m, p);
  const double linear = std::min(params, most_layers_linear_weights(m, p));
  return params > 0 ? (eb * (params - linear) + linear) / params : eb;
}

double fp8_weight_cast_bytes(const Transformer& m, const Plan& p, Fp8Library lib) {
  if (p.fp8 == Fp8Recipe::none || lib != Fp8Library::transformer_engine) return 0;
  // Transformer Engine refreshes each weight's FP8 copy and its transpose at
  // the step's first micro-batch (is_first_microbatch, one fused
  // cast-transpose: read eb, write 2), on the most loaded stage's layers;
  // current scaling reads the weight once more for its amax. With FP8
  // parameters (fp8_param_gather) the optimizer writes the FP8 weights
  // itself: the transpose alone is refreshed (read 1, write 1).
  const double weights = most_layers_linear_weights(m, p);
  if (p.fp8_param_gather) return 2.0 * weights;
  const double eb = bytes_of(storage_precision(p));
  return (eb + 2.0 + (p.fp8 == Fp8Recipe::tensorwise ? eb : 0.0)) * weights;
}

}  // namespace ztune
