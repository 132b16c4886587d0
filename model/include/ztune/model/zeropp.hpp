#pragma once
// ZeRO++ in the cost model (Wang et al. 2023, "ZeRO++: Extremely Efficient
// Collective Communication for Giant Model Training", arXiv:2306.10209, §3;
// DeepSpeed flags zero_quantized_weights, zero_hpz_partition_size,
// zero_quantized_gradients). Three changes to ZeRO-3's per-micro-batch traffic
// of M = 2Ψ bytes (16-bit parameters of the GPU's stage, Ψ elements):
//
//  qwZ  forward all-gather of the weights in int8 with block scales: M → M/2.
//  hpZ  a secondary copy of the 16-bit weights partitioned over the GPUs of
//       ONE node (zero_hpz_partition_size = GPUs per node), built during the
//       forward gather; the backward all-gather then stays inside the node:
//       cross-node M → 0. Cost: 2Ψ/g extra bytes per GPU, g = the data-parallel
//       ranks per node (paper §3.2; kept in fp16).
//  qgZ  gradients reduced by a hierarchical all-to-all in int4 instead of a
//       16-bit reduce-scatter: an intra-node all-to-all of the whole gradient
//       (Ψ/2 bytes), a local reduction, then an inter-node all-to-all of the
//       node's 1/g share (Ψ/(2g) bytes per GPU): cross-node M → M/4.
//
// Cross-node volume per micro-batch (bytes a node sends off-node, the bus
// bytes the cost model divides by the node's NIC bandwidth), N data-parallel
// ranks over k nodes of g:
//   ZeRO-3   3·M·(N−1)/N
//   ZeRO++   M/2·(N−1)/N + 0 + M/4·(k−1)/k          (≈ 0.75·M: the paper's 3M → 0.75M)
#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

/// Bytes per element on the wire: int8 weights with one fp32 scale per
/// 2048-element block (DeepSpeed's quantized weight group), int4 gradients
/// with one fp32 scale per 2048-element group.
inline constexpr double kZeroppWeightBytes = 1.0 + 4.0 / 2048.0;
inline constexpr double kZeroppGradBytes = 0.5 + 4.0 / 2048.0;

/// What qwZ's weight gathers and qgZ's gradient reduction put on the wire per
/// element: kZeroppWeightBytes and kZeroppGradBytes, or the stored type's
/// (the gradients' reduction type's) for ztune's executor
/// (EngineProfile::executor), which reproduces ZeRO++'s numerics by
/// quantizing and dequantizing in place and then moves the stored values
/// (executor/src/param_store.cpp start_gather, executor/zeropp_reduce.hpp).
[[nodiscard]] double zeropp_weight_wire_bytes(const Plan& p, const EngineProfile& e);
[[nodiscard]] double zeropp_grad_wire_bytes(const Plan& p, const EngineProfile& e);

/// Cross-node bytes per node per micro-batch of the three ZeRO-3 collectives.
struct Zero3CrossNodeBytes {
  double forward_gather = 0;
  double backward_gather = 0;
  double gradient_reduce = 0;
  [[nodiscard]] double total() const { return forward_gather + backward_gather + gradient_reduce; }
};
/// 0 unless zero_stage is 3 and the data-parallel group spans nodes.
[[nodiscard]] Zero3CrossNodeBytes zero3_cross_node_bytes(const Transformer& m, const Plan& p, const Cluster& c);

/// hpZ's secondary partition per GPU: the stored weights' bytes·Ψ/g (2Ψ/g in 16-bit,
/// the plan's precision on every engine and ztune's executor) when zeropp is on and the data-parallel group spans nodes
/// (inside one node it is the primary one).
[[nodiscard]] double zeropp_secondary_bytes(const Transformer& m, const Plan& p, const Cluster& c);

/// ztune's executor's two-level qgZ across nodes (executor/src/zeropp_reduce.cpp,
/// ParamStore::launch_reduction), while one gradient bucket of `bucket_elems`
/// reduces: its fp32 copy regrouped by node (the bucket's elements) and the
/// node's fp32 partial (bucket / g, g the data-parallel ranks of a node), and
/// with 16-bit gradients (`grads`, the dtype the executor stores them in) the
/// fp32 copies its int4 arithmetic reads and writes (the bucket and its dp-th
/// piece), 4 bytes each. 0 unless zeropp is on and the data-parallel group
/// spans nodes.
[[nodiscard]] double executor_qgz_bytes(const Plan& p, const Cluster& c, double bucket_elems, Precision grads);

/// Link time of qgZ's gradient reduction of `grad_bytes` bytes of gradients
/// (gradient_reduce_bytes' dtype) on the data-parallel group (intra-node
/// all-to-all + inter-node all-to-all, int4 on the wire: zeropp_grad_wire_bytes),
/// plus its quantize / dequantize-reduce kernels.
[[nodiscard]] double zeropp_gradient_reduce_time(double grad_bytes, const Plan& p, const Cluster& c,
                                                 const HardwareProfile& hw);

/// qwZ's kernels around one forward gather: quantize the GPU's own shard
/// (`shard_elems`) to int8, dequantize the `gathered_elems` it receives.
[[nodiscard]] double zeropp_weight_quantize_time(double gathered_elems, double shard_elems, const Cluster& c,
                                                 const HardwareProfile& hw);

}  // namespace ztune
