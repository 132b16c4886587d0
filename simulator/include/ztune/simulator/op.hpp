#pragma once
// One operation of a simulated training iteration: a vertex of the operation
// graph. Plain data (no strings) so that a 100k-operation iteration builds and
// simulates in milliseconds; names are made on demand by op_name().
#include <cstdint>
#include <string>

#include "ztune/model/prediction.hpp"

namespace ztune::sim {

enum class OpKind : std::uint8_t {
  forward,           // forward compute of a layer group (one micro-batch, one model chunk)
  backward,          // backward compute (activation + weight gradients) of a layer group
  recompute,         // recomputed forward before the backward (selective or full recomputation)
  embedding_fwd,     // token (+ position) embedding, first virtual stage
  embedding_bwd,
  head_fwd,          // final norm, LM head, loss, last virtual stage
  head_bwd,
  tp_comm,           // tensor-parallel collectives of a layer group (AR, or AG+RS with SP)
  pp_send,           // pipeline activation (forward) or gradient (backward) send to a neighbour
  dp_reduce,         // data-parallel gradient bucket: all-reduce (ZeRO 0) or reduce-scatter (1-3)
  dp_param_gather,   // ZeRO-1/2 all-gather of updated parameters after the step
  zero3_gather,      // ZeRO-3 all-gather of a layer group's parameters before its use
  pcie_d2h,          // gradients device -> host (optimizer offload)
  pcie_h2d,          // parameters host -> device (optimizer or parameter offload)
  nvme_read,         // NVMe -> host (optimizer states or parameters)
  nvme_write,        // host -> NVMe
  optimizer_gpu,     // Adam step on the GPU
  optimizer_host,    // CPU Adam step on the host (ZeRO-Offload)
  overhead,          // the GPU waiting on the host: dispatch slower than the kernels, fixed framework costs
  dp_stall,          // compute-stream share of an overlapped gradient bucket (CostSource::dp_overlap_loss)
  zero3_stall,       // compute-stream share of a prefetched ZeRO-3 gather (zero3_overlap_loss)
  offload_stall,     // compute-stream share of an offload copy behind the backward (offload_overlap_loss)
  cp_comm,           // context-parallel ring exchange the attention blocks do not hide (holds the compute stream)
  ulysses_comm,      // DeepSpeed-Ulysses all-to-alls around attention (blocking: holds the compute stream)
  count
};

/// Short stable name of a kind ("forward", "tp_comm", ...), used in traces.
[[nodiscard]] const char* to_string(OpKind k);

/// The part of the iteration time an operation counts towards when it is on
/// the critical path of its stage (prediction.hpp's TimePart).
[[nodiscard]] TimePart time_part_of(OpKind k);

/// True for the operations that run on a GPU's compute stream.
[[nodiscard]] constexpr bool is_compute(OpKind k) {
  switch (k) {
    case OpKind::forward:
    case OpKind::backward:
    case OpKind::recompute:
    case OpKind::embedding_fwd:
    case OpKind::embedding_bwd:
    case OpKind::head_fwd:
    case OpKind::head_bwd:
    case OpKind::optimizer_gpu:
    case OpKind::overhead:
    case OpKind::dp_stall:
    case OpKind::zero3_stall:
    case OpKind::offload_stall:
    case OpKind::cp_comm:
    case OpKind::ulysses_comm: return true;
    default: return false;
  }
}

struct Op {
  OpKind kind = OpKind::forward;
  std::int32_t resource = 0;        // index into OpGraph::resources
  std::int16_t stage = 0;           // pipeline stage (GPU of the simulated replica) that issues it
  std::int16_t peer_stage = -1;     // pp_send: the receiving stage; otherwise -1
  std::int16_t chunk = -1;          // model chunk on the stage (interleaving), -1 when not per chunk
  std::int32_t microbatch = -1;     // -1 for per-step operations
  std::int32_t layer_begin = -1;    // first global layer index it covers, -1 when none
  std::int32_t layer_end = -1;      // one past the last
  double duration_s = 0;            // seconds alone on its resource (link time at full bandwidth)
  double bytes = 0;                 // bytes moved (communication), nccl-tests S for collectives
  // Memory effects on the issuing stage's GPU (bytes): positive deltas are
  // allocated when the operation starts, negative ones freed when it ends.
  double activation_delta = 0;      // stored activations (and recomputation working set)
  double gathered_param_delta = 0;  // ZeRO-3 gathered parameters
};

/// "F mb3 c1 L12-13", "dp_reduce s2 bucket", ...: a readable name for traces.
[[nodiscard]] std::string op_name(const Op& op);

}  // namespace ztune::sim
