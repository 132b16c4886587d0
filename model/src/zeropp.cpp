#include "ztune/model/zeropp.hpp"

#include <cmath>

#include "ztune/model/op_costs.hpp"

namespace ztune {

namespace {

// HBM bytes per gradient element of qgZ's kernels: quantize the 16-bit
// gradient to int4 (read 2, write 0.5), dequantize the g received chunks and
// reduce them in fp32, requantize the node's share (≈ read 0.5 + 2, write 0.5),
// and the final dequantize-reduce of the k inter-node chunks (≈ 0.5).
constexpr double kQgzBytesPerElem = 6.0;
// qwZ: quantize the GPU's own shard (read 2, write 1, per shard element) and
// dequantize the gathered weights (read 1, write 2, per gathered element).
constexpr double kQwzDequantBytesPerElem = 3.0;

}  // namespace

Zero3CrossNodeBytes zero3_cross_node_bytes(const Transformer& m, const Plan& p, const Cluster& c) {
  Zero3CrossNodeBytes x;
  if (p.zero_stage != 3 || p.dp <= 1) return x;
  const GroupLayout l = place_groups(p, c);
  if (!l.dp.crosses_nodes()) return x;
  const double psi = stage_params(m, p);
  const double k = l.dp.nodes();
  const double ring = bus_factor(Collective::all_gather, l.dp.size);  // (n-1)/n, a ring's share
  if (!p.zeropp) {
    const double M = 2.0 * psi;
    x.forward_gather = M * ring;
    x.backward_gather = M * ring;
    x.gradient_reduce = M * ring;
    return x;
  }
  x.forward_gather = kZeroppWeightBytes * psi * ring;          // qwZ
  x.backward_gather = 0;                                        // hpZ: inside the node
  x.gradient_reduce = kZeroppGradBytes * psi * (k - 1) / k;     // qgZ: the node's share, once
  return x;
}

// ztune's executor (EngineProfile::executor) moves its stored values, the
// plan's precision, after quantizing them in place.
double zeropp_weight_wire_bytes(const Plan& p, const EngineProfile& e) {
  return e.executor ? bytes_of(storage_precision(p)) : kZeroppWeightBytes;
}
double zeropp_grad_wire_bytes(const Plan& p, const EngineProfile& e) {
  return e.executor ? gradient_reduce_bytes(p, e) : kZeroppGradBytes;
}

double zeropp_secondary_bytes(const Transformer& m, const Plan& p, const Cluster& c) {
  if (!p.zeropp || p.zero_stage != 3 || p.dp <= 1) return 0;
  const GroupLayout l = place_groups(p, c);
  if (!l.dp.crosses_nodes()) return 0;
  return bytes_of(storage_precision(p)) * stage_params(m, p) / l.dp.per_node;  // the stored weights
}

double executor_qgz_bytes(const Plan& p, const Cluster& c, double bucket_elems, Precision grads) {
  if (!p.zeropp || p.zero_stage != 3 || p.dp <= 1) return 0;
  const GroupLayout l = place_groups(p, c);
  if (!l.dp.crosses_nodes()) return 0;
  const double padded = std::ceil(bucket_elems / p.dp) * p.dp;
  double bytes = 4.0 * padded * (1.0 + 1.0 / l.dp.per_node);                // regrouped, the node's partial
  if (grads != Precision::fp32) bytes += 4.0 * padded * (1.0 + 1.0 / p.dp);  // staged in and out
  return bytes;
}

double zeropp_gradient_reduce_time(double grad_bytes, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  if (grad_bytes <= 0 || p.dp <= 1) return 0;
  const GroupLayout l = place_groups(p, c);
  const int g = l.dp.per_node;
  const int k = l.dp.nodes();
  const double elems = grad_bytes / gradient_reduce_bytes(p, hw.engine);
  const double q = zeropp_grad_wire_bytes(p, hw.engine) * elems;
  double t = 0;
  if (g > 1) t += collective_time(Collective::all_to_all, q, GroupPlacement{g, g}, c, hw);
  if (k > 1) t += collective_time(Collective::all_to_all, q / g, GroupPlacement{k, 1}, c, hw);
  t += memory_bound_time(kQgzBytesPerElem * elems, c.node.gpu, hw, 4);
  return t;
}

double zeropp_weight_quantize_time(double gathered_elems, double shard_elems, const Cluster& c, const HardwareProfile& hw) {
  return memory_bound_time(kQwzDequantBytesPerElem * (gathered_elems + shard_elems), c.node.gpu, hw, 2);
}

}  // namespace ztune
