#pragma once
// Hand-set operation durations for simulator tests: every answer is then known
// in closed form. Communication is linear in bytes (no latency) unless set.
#include "ztune/simulator/cost_source.hpp"

namespace ztune::sim::test {

struct FixedCosts final : CostSource {
  LayerTimes layer_times;
  EdgeTimes edge_times;
  double p2p_intra_s = 0;
  double p2p_inter_s = 0;
  double p2p_size = 0;
  double embedding_sync = 0;
  double microbatch_overhead = 0;
  double step_overhead = 0;
  double dp_reduce_s_per_byte = 0;  // all-reduce and reduce-scatter
  double dp_gather_s_per_byte = 0;  // all-gather
  double pcie_s_per_byte = 0;
  double nvme_s_per_byte = 0;
  double gpu_optimizer_s_per_param = 0;
  double host_optimizer_s_per_param = 0;
  double dp_loss = 0, zero3_loss = 0, offload_loss = 0;  // overlap losses (default: ideal overlap)

  [[nodiscard]] LayerTimes layer() const override { return layer_times; }
  [[nodiscard]] EdgeTimes edges() const override { return edge_times; }
  [[nodiscard]] double p2p_s(bool crosses) const override { return crosses ? p2p_inter_s : p2p_intra_s; }
  [[nodiscard]] double p2p_bytes() const override { return p2p_size; }
  [[nodiscard]] double embedding_sync_s() const override { return embedding_sync; }
  [[nodiscard]] double microbatch_overhead_s() const override { return microbatch_overhead; }
  [[nodiscard]] double step_overhead_s() const override { return step_overhead; }
  [[nodiscard]] double dp_collective_s(DpCollective kind, double bytes) const override {
    return bytes * (kind == DpCollective::all_gather ? dp_gather_s_per_byte : dp_reduce_s_per_byte);
  }
  [[nodiscard]] double pcie_s(double bytes) const override { return bytes * pcie_s_per_byte; }
  [[nodiscard]] double nvme_s(double bytes) const override { return bytes * nvme_s_per_byte; }
  [[nodiscard]] double gpu_optimizer_s(double params) const override { return params * gpu_optimizer_s_per_param; }
  [[nodiscard]] double host_optimizer_s(double params) const override {
    return params * host_optimizer_s_per_param;
  }
  [[nodiscard]] double dp_overlap_loss() const override { return dp_loss; }
  [[nodiscard]] double zero3_overlap_loss() const override { return zero3_loss; }
  [[nodiscard]] double offload_overlap_loss() const override { return offload_loss; }
  [[nodiscard]] double grad_bytes_per_param() const override { return 2; }
  [[nodiscard]] double param_bytes_per_param() const override { return 2; }
  [[nodiscard]] double optimizer_state_bytes_per_param() const override { return 12; }
};

}  // namespace ztune::sim::test
