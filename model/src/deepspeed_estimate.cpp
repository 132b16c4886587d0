#include "ztune/model/deepspeed_estimate.hpp"

#include <algorithm>
#include <cmath>

namespace ztune {
namespace {

/// Python's int() of a float: truncation toward zero, as the estimators return.
double py_int(double x) { return std::trunc(x); }

}  // namespace

DeepSpeedEstimate deepspeed_zero2_estimate(double total_params, int gpus_per_node, int nodes, bool cpu_offload,
                                           double buffer_factor) {
  const double total_gpus = static_cast<double>(nodes) * gpus_per_node;
  DeepSpeedEstimate e;
  if (cpu_offload) {
    e.gpu_bytes = py_int(2 * total_params);
    e.host_bytes_per_node = py_int(total_params * std::max(4 * total_gpus, 16.0) * buffer_factor);
  } else {
    // 2 = 16-bit params; 18 = 16-bit and fp32 gradients, fp32 params, momentum and variance.
    e.gpu_bytes = py_int(2 * total_params) + py_int(18 * total_params / total_gpus);
    e.host_bytes_per_node = py_int(total_params * 4 * gpus_per_node * buffer_factor);
  }
  return e;
}

DeepSpeedEstimate deepspeed_zero3_estimate(double total_params, double largest_layer_params, int gpus_per_node,
                                           int nodes, bool cpu_offload, bool cpu_offload_params, bool zero_init,
                                           double buffer_factor) {
  const double total_gpus = static_cast<double>(nodes) * gpus_per_node;
  const double gpus_factor = 1.0 / nodes;
  const double largest_layer_memory = 4 * largest_layer_params;
  double gpu = 0, cpu = 0;
  if (cpu_offload) {
    const double states = cpu_offload_params ? 18.0 : 16.0;
    gpu = cpu_offload_params ? largest_layer_memory : largest_layer_memory + py_int(2 * total_params / total_gpus);
    cpu = zero_init ? total_params * states * gpus_factor * buffer_factor
                    : total_params * std::max(4.0 * gpus_per_node, states * gpus_factor) * buffer_factor;
  } else {
    gpu = largest_layer_memory + py_int(18 * total_params / total_gpus);
    cpu = zero_init ? largest_layer_params * 4 * gpus_per_node * buffer_factor
                    : total_params * 4 * gpus_per_node * buffer_factor;
  }
  return {py_int(gpu), py_int(cpu)};
}

LargestModule deepspeed_largest_module(const Transformer& m, bool separate_projections) {
  const double h = m.hidden;
  const double kv = static_cast<double>(m.kv_heads) * m.head_dim();
  const double f_out = m.activation == Activation::swiglu ? 2.0 * m.ffn_hidden : m.ffn_hidden;
  const auto w = m.block_weight_params();  // QKV, output, FC1, FC2 weights
  const double qkv_bias = m.bias || m.qkv_bias ? h + 2 * kv : 0.0;
  LargestModule best{static_cast<double>(m.vocab) * h, "token embedding"};
  auto consider = [&](double n, const char* name) {
    if (n > best.params) best = {n, name};
  };
  if (m.position == PositionEmbedding::learned)
    consider(static_cast<double>(m.learned_position_rows()) * h, "position embedding");
  if (separate_projections) {
    consider(h * h + (m.bias || m.qkv_bias ? h : 0.0), "q_proj");
    consider(h * kv + (m.bias || m.qkv_bias ? kv : 0.0), "k_proj");
  } else {
    consider(w[0] + qkv_bias, "QKV projection");
  }
  consider(w[1] + (m.bias ? h : 0.0), "attention output projection");
  if (separate_projections && m.activation == Activation::swiglu)
    consider(h * m.ffn_hidden + (m.bias ? m.ffn_hidden : 0.0), "gate_proj (and up_proj, each)");
  else
    consider(w[2] + (m.bias ? f_out : 0.0), m.activation == Activation::swiglu ? "FC1 (gate and up)" : "FC1");
  consider(w[3] + (m.bias ? h : 0.0), "FC2");
  return best;  // an untied LM head is vocab × hidden, the token embedding's size
}

}  // namespace ztune
