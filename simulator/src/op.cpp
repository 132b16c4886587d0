#include "ztune/simulator/op.hpp"

#include <array>

namespace ztune::sim {

const char* to_string(OpKind k) {
  static constexpr std::array<const char*, static_cast<std::size_t>(OpKind::count)> kNames{
      "forward",   "backward",  "recompute",    "embedding_fwd", "embedding_bwd", "head_fwd",
      "head_bwd",  "tp_comm",   "pp_send",      "dp_reduce",     "dp_param_gather", "zero3_gather",
      "pcie_d2h",  "pcie_h2d",  "nvme_read",    "nvme_write",    "optimizer_gpu", "optimizer_host",
      "overhead",  "dp_stall",  "zero3_stall",  "offload_stall", "cp_comm",
      "ulysses_comm"};
  return kNames[static_cast<std::size_t>(k)];
}

TimePart time_part_of(OpKind k) {
  switch (k) {
    case OpKind::forward:
    case OpKind::embedding_fwd:
    case OpKind::head_fwd: return TimePart::forward;
    case OpKind::backward:
    case OpKind::embedding_bwd:
    case OpKind::head_bwd: return TimePart::backward;
    case OpKind::recompute: return TimePart::recompute;
    case OpKind::tp_comm: return TimePart::tp_comm;
    case OpKind::pp_send: return TimePart::pp_comm;
    case OpKind::cp_comm: return TimePart::cp_comm;
    case OpKind::ulysses_comm: return TimePart::ulysses_comm;
    case OpKind::dp_reduce:
    case OpKind::dp_stall:
    case OpKind::dp_param_gather: return TimePart::dp_comm;
    case OpKind::zero3_gather:
    case OpKind::zero3_stall: return TimePart::zero3_gather;
    case OpKind::offload_stall:
    case OpKind::pcie_d2h:
    case OpKind::pcie_h2d:
    case OpKind::nvme_read:
    case OpKind::nvme_write: return TimePart::offload_stall;
    case OpKind::optimizer_gpu:
    case OpKind::optimizer_host: return TimePart::optimizer;
    case OpKind::overhead: return TimePart::overhead;
    case OpKind::count: break;
  }
  return TimePart::bubble;
}

std::string op_name(const Op& op) {
  std::string name = to_string(op.kind);
  if (op.microbatch >= 0) name += " mb" + std::to_string(op.microbatch);
  if (op.chunk >= 0) name += " c" + std::to_string(op.chunk);
  if (op.layer_begin >= 0) {
    name += " L" + std::to_string(op.layer_begin);
    if (op.layer_end > op.layer_begin + 1) name += "-" + std::to_string(op.layer_end - 1);
  }
  if (op.peer_stage >= 0) name += " ->s" + std::to_string(op.peer_stage);
  return name;
}

}  // namespace ztune::sim
