#pragma once
// DeepSpeed's own model-state memory estimators, as closed forms: what a user of
// DeepSpeed gets from estimate_zero2_model_states_mem_needs_all_cold and
// estimate_zero3_model_states_mem_needs_all_cold (deepspeed/runtime/zero/
// stage_1_and_2.py and stage3.py, DeepSpeed v0.19.8). `ztune memory` prints them
// beside ztune's own accounting (memory_model.hpp), which counts differently:
// DeepSpeed keeps fp32 gradient partitions (18 bytes a parameter, not the ZeRO
// paper's 16), adds 4 bytes × the largest module under ZeRO-3, and multiplies
// host memory by a safety factor (1.5 by default).
//
// Both estimators assume 16-bit mixed precision with Adam, count CPU offload only
// (no NVMe), and cover stages 2 and 3 (stage 1 runs the stage-2 code but has no
// estimator). Host figures are per node ("per CPU" in DeepSpeed's table).
#include <cstdint>
#include <string>

#include "ztune/vocab/transformer.hpp"

namespace ztune {

// Whole numbers of bytes, as Python's int() gives them, held in doubles: the
// host estimate multiplies Ψ by the GPU count and passes 2^63 for a
// billion-GPU job (Python's ints do not overflow; an int64 wrapped negative).
struct DeepSpeedEstimate {
  double gpu_bytes = 0;            // per GPU
  double host_bytes_per_node = 0;  // per node (DeepSpeed's "per CPU")
};

/// estimate_zero2_model_states_mem_needs: with optimizer offload the GPU keeps
/// the 16-bit parameters (2Ψ) and the host Ψ·max(4·gpus, 16)·factor; without,
/// 2Ψ + ⌊18Ψ/gpus⌋ per GPU and 4Ψ·gpus_per_node·factor on the host (loading).
[[nodiscard]] DeepSpeedEstimate deepspeed_zero2_estimate(double total_params, int gpus_per_node, int nodes,
                                                         bool cpu_offload, double buffer_factor = 1.5);

/// estimate_zero3_model_states_mem_needs: 4 bytes × the largest module on every
/// GPU (its gathered copy), plus the GPU's shard: ⌊18Ψ/gpus⌋ without offload,
/// ⌊2Ψ/gpus⌋ with optimizer offload, nothing with parameter offload too. The
/// host keeps 18Ψ (16Ψ without parameter offload) per node's share ÷ nodes × factor;
/// without zero.Init every rank first loads the whole model (4Ψ per GPU).
[[nodiscard]] DeepSpeedEstimate deepspeed_zero3_estimate(double total_params, double largest_layer_params,
                                                         int gpus_per_node, int nodes, bool cpu_offload,
                                                         bool cpu_offload_params, bool zero_init,
                                                         double buffer_factor = 1.5);

/// DeepSpeed's "largest layer": the most parameters any one module holds itself
/// (model_to_params: parameters(recurse=False) of every module), counted on
/// Megatron-LM's modules (fused QKV, fused SwiGLU gate and up projection, their
/// biases): the token embedding, the learned positions, the untied LM head or
/// one of the block's four linear layers. `separate_projections`: a Hugging
/// Face Llama-family model's modules, q/k/v and gate/up each a module of its
/// own (smaller than Megatron's fused ones: a 70B's largest is its embedding,
/// 262 M, not the fused gate and up projection, 470 M).
struct LargestModule {
  double params = 0;
  std::string name;  // "token embedding", "FC1", ...
};
[[nodiscard]] LargestModule deepspeed_largest_module(const Transformer& m, bool separate_projections = false);

}  // namespace ztune
