#pragma once
// The production cost source: every duration comes from model/op_costs.hpp
// (one source of truth with the analytical model), activation bytes from
// model/memory_model.hpp's Korthikanti formulas.
#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/simulator/cost_source.hpp"

namespace ztune::sim {

class ModelCostSource final : public CostSource {
 public:
  /// Keeps references: the arguments must outlive the source.
  ModelCostSource(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw);

  [[nodiscard]] LayerTimes layer() const override { return layer_; }
  [[nodiscard]] EdgeTimes edges() const override { return edges_; }
  [[nodiscard]] double p2p_s(bool crosses_nodes) const override;
  [[nodiscard]] double p2p_bytes() const override { return p2p_.bytes; }
  [[nodiscard]] double embedding_sync_s() const override { return embedding_sync_s_; }
  [[nodiscard]] double microbatch_overhead_s() const override { return microbatch_overhead_s_; }
  [[nodiscard]] double step_overhead_s() const override { return step_overhead_s_; }
  [[nodiscard]] double gradient_fold_s() const override { return gradient_fold_s_; }
  [[nodiscard]] double dp_collective_s(DpCollective kind, double bytes) const override;
  [[nodiscard]] double pcie_s(double bytes) const override;
  [[nodiscard]] double nvme_s(double bytes) const override;
  [[nodiscard]] double gpu_optimizer_s(double params) const override;
  [[nodiscard]] double host_optimizer_s(double params) const override;
  [[nodiscard]] double grad_bytes_per_param() const override { return grad_bytes_; }
  [[nodiscard]] double param_bytes_per_param() const override { return param_bytes_; }
  [[nodiscard]] double optimizer_state_bytes_per_param() const override { return 12; }
  // ZeRO++ (model/zeropp.hpp, as op_costs' zero3_gather_cost and dp_sync_cost
  // time it): int8 forward gathers with their quantization kernels, 16-bit
  // backward gathers inside the node (hpZ), int4 hierarchical gradient reduction (qgZ).
  [[nodiscard]] double zero3_gather_s(double params, bool backward) const override;
  [[nodiscard]] double zero3_gather_bytes(double params, bool backward) const override;
  [[nodiscard]] double zero3_reduce_s(double bytes) const override;
  [[nodiscard]] double replica_reduce_s(double bytes) const override;
  [[nodiscard]] bool replica_reduce_every_microbatch() const override;
  [[nodiscard]] bool prefetches_next_module() const override;
  // 1-bit Adam (model/onebit_adam.hpp onebit_adam_cost), scaled to the stage's parameters.
  [[nodiscard]] double onebit_exchange_s(double params) const override;
  [[nodiscard]] double onebit_kernels_s(double params) const override;
  [[nodiscard]] double dp_overlap_loss() const override { return 1.0 - hw_.engine.dp_overlap; }
  [[nodiscard]] double zero3_overlap_loss() const override { return 1.0 - hw_.engine.zero3_prefetch_overlap; }
  [[nodiscard]] double offload_overlap_loss() const override { return 1.0 - hw_.engine.offload_overlap; }

 private:
  const Plan& plan_;
  const Cluster& cluster_;
  const HardwareProfile& hw_;
  GroupLayout layout_;
  LayerTimes layer_;
  EdgeTimes edges_;
  PipelineP2P p2p_;
  double p2p_intra_s_ = 0;       // one send inside a node / across nodes, including the
  double p2p_inter_s_ = 0;       // tensor-parallel all-gather of Megatron's scatter-gather send
  double embedding_sync_s_ = 0;
  double microbatch_overhead_s_ = 0;
  double grad_bytes_ = 2;   // set from the plan (gradient_reduce_bytes)
  double param_bytes_ = 2;  // the training precision's (bytes_of)
  double gradient_fold_s_ = 0;
  double step_overhead_s_ = 0;
  double optimizer_params_ = 0;  // the partition optimizer_cost() times
  OptimizerCost optimizer_;
  double stage_params_ = 0;      // the most loaded stage's parameters (what onebit_adam_cost times)
  double onebit_exchange_s_ = 0;
  double onebit_kernels_s_ = 0;
};

}  // namespace ztune::sim
