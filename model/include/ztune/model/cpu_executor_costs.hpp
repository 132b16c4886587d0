#pragma once
// What ztune's own CPU executor (executor/src/gpt_stage.cpp over
// executor/src/cpu_backend.cpp and kernels/src/*_cpu.cpp) computes outside its
// GEMMs, counted kernel by kernel: the time model's compute flavour on CPU
// ranks. layer_cost and edge_cost (op_costs.cpp) select it once, by the
// cluster's device kind, beside the GPU engines' fused flavour; both flavours
// take the same GEMMs and return the same parts (model/src/layer_parts.hpp:
// cpu_layer_compute and cpu_edge_compute live in cpu_executor_costs.cpp), as
// memory_model.cpp's executor_lines() is the memory model's.
//
// Why not the GPU accounting: layer_cost() counts a fused Megatron/DeepSpeed
// layer in 16-bit (fused bias-dropout-add, fused softmax, fused Adam). The CPU
// executor runs unfused fp32 kernels with passes of its own (separate bias add
// and residual add, the cross entropy in five kernels, AdamW plus a norm pass),
// and its "memory-bound" loops are mostly compute-bound on a CPU core: GeLU's
// tanh or the softmax's exp costs far more per element than the bytes it moves.
//
// So each kernel carries two figures per element:
//  - `bytes`: its minimum fp32 traffic, read + write (the calibration
//    benchmark's convention, calibration/bench/src/memory_bench.cpp), a
//    hand-countable fact about the code;
//  - `work_bytes`: the bytes that would take as long at the profile's
//    memory-bound rate (hbm_bandwidth · memory_bandwidth_efficiency, what
//    `ztune calibrate` fits to its copy/add/scale/GeLU/LayerNorm/AdamW mix), so
//    memory_bound_time(work_bytes, …) prices it. These are measured ratios (see
//    cpu_executor_costs.cpp); calibration rescales them all through the rate.
//
// Example: cpu_layer_work(tiny, plan with micro_batch 2).fwd.bytes ==
//   56·128·64 + 8·128·256 = 720,896 (tests/model/test_cpu_executor_costs.cpp).
#include <optional>
#include <string_view>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

/// A group of CPU-executor kernel calls (each one Backend::… call, timed as one op).
struct CpuKernelWork {
  double bytes = 0;       // minimum fp32 traffic, read + write (bytes)
  double work_bytes = 0;  // equivalent bytes at the profile's memory-bound rate
  int kernels = 0;        // calls (each pays the profile's kernel_launch_s)
};

/// One transformer block, one micro-batch, one rank (GptStage::forward_block /
/// backward_block); rows are s·b (÷tp with sequence parallelism).
struct CpuLayerWork {
  CpuKernelWork fwd;          // memory_bound kind: 2 LayerNorms, 2 bias adds, 2 residual adds, GeLU (7 calls)
  CpuKernelWork bwd;          // memory_bound kind: 2 bias gradients, GeLU backward, 2 LayerNorm backwards (5 calls)
  CpuKernelWork gemm_bias_fwd;  // gemm kind: the bias loop inside matmul_forward (QKV, FC1)
  CpuKernelWork gemm_bias_bwd;  // gemm kind: the dbias loop inside matmul_backward (QKV, FC1)
  CpuKernelWork softmax_bwd;  // attention kind: attention_backward's softmax-gradient passes
  double attention_fwd_flops = 0;  // attention_forward: QKᵀ and P·V over the full s×s square, 4·b·s²·h/t
  double attention_bwd_flops = 0;  // attention_backward: dP, dV, dQ, dK, 8·b·s²·h/t
  // flash_attention_backward's recomputed QKᵀ and its exp (0 for the standard kernel)
  double attention_bwd_recompute_flops = 0;
};
[[nodiscard]] CpuLayerWork cpu_layer_work(const Transformer& m, const Plan& p);

/// The first stage's embedding and the last stage's head + loss (memory_bound
/// kind only; the logits GEMMs are edge_cost's), one micro-batch, one rank.
struct CpuEdgeWork {
  CpuKernelWork embedding_fwd;  // token rows, position rows, their sum (3 calls)
  CpuKernelWork embedding_bwd;  // scatter-add into wpe and wte (2 calls)
  CpuKernelWork head_fwd;       // final LayerNorm, row max, row Σexp, target logit, loss (5 calls)
  CpuKernelWork head_bwd;       // cross-entropy backward, final LayerNorm backward (2 calls)
};
[[nodiscard]] CpuEdgeWork cpu_edge_work(const Transformer& m, const Plan& p);

/// Once per step on one rank without optimizer offload (ParamStore): the
/// gradient-norm pass over the owned gradients, AdamW over the owned
/// partition, and with ZeRO 2/3 the accumulation of each micro-batch's
/// reduce-scattered piece. `params` is stage_params() (before ZeRO).
[[nodiscard]] CpuKernelWork cpu_optimizer_work(const Transformer& m, const Plan& p, double params);

/// The work per byte of traffic (work_bytes / bytes) of a memory-bound kernel
/// of `ztune calibrate`'s sweep ("add", "scale", "gelu_forward",
/// "layernorm_forward", "adamw") as this accounting prices it on CPU ranks, so
/// that the fit of the memory-bound rate and the time model count alike;
/// nullopt for any other name (the plain copy is the memory figure itself).
/// E.g. GeLU 31/8: its tanh, not its 8 bytes, bounds it.
[[nodiscard]] std::optional<double> cpu_benchmark_work_per_byte(std::string_view kernel);

/// Time of `w` at the profile's memory-bound rate plus its calls.
[[nodiscard]] double cpu_work_time(const CpuKernelWork& w, const GpuSpec& cpu, const HardwareProfile& hw);

}  // namespace ztune
