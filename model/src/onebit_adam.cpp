#include "ztune/model/onebit_adam.hpp"

#include <algorithm>
#include <cmath>

#include "ztune/model/op_costs.hpp"
#include "ztune/model/prediction.hpp"

namespace ztune {

namespace {

// HBM bytes per parameter of the compression work, fp32 momentum and errors
// (DeepSpeed NcclBackend.compressed_allreduce):
//  worker: read m and the worker error, write m + error (12); norm for the
//          scale (read 4); sign pack (read 4, write 1/8); new worker error
//          (read 4, write 4)                                         → 28
//  server (its Ψ/n chunk): unpack n sign chunks and average (n·1/8 read, 4
//          write), add the server error (read 8, write 4), norm (4), pack
//          (4 + 1/8), new server error (8)                           → ≈ 32 per chunk element
//  final: unpack the gathered signs into the momentum (1/8 read, 4 write) → 4
constexpr double kWorkerBytesPerParam = 28.0;
constexpr double kServerBytesPerChunkElem = 32.0;
constexpr double kUnpackBytesPerParam = 4.0;
constexpr int kCompressionKernels = 10;
constexpr double kScaleBytes = 4.0;  // one fp32 scale per chunk

}  // namespace

OnebitAdamCost onebit_adam_cost(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  OnebitAdamCost o;
  const double psi = stage_params(m, p);
  const int n = p.dp;
  const double b = bytes_of(storage_precision(p));
  o.warmup_bytes = b * psi;
  if (n <= 1) return o;
  const GroupLayout l = place_groups(p, c);
  const double nn = n;
  // Warm-up: plain data parallelism's bucketed all-reduce.
  const int buckets = std::max(1, static_cast<int>(std::ceil(psi / p.reduce_bucket_elems)));
  o.warmup_allreduce_s = buckets * collective_time(Collective::all_reduce, o.warmup_bytes / buckets, l.dp, c, hw);
  o.warmup_wire_bytes = bus_factor(Collective::all_reduce, n) * o.warmup_bytes;
  if (!p.onebit_adam) return o;
  // Compression phase: one all-to-all of the packed signs (+ the n chunk
  // scales) and one all-gather of the servers' signs (+ their scales), each
  // over the whole momentum in one flat buffer.
  const double signs = psi / 8.0;
  const double scales = kScaleBytes * nn;
  const double a2a = signs + scales;
  const double ag = signs + scales;
  o.compressed_bytes = a2a + ag;
  o.compressed_s = collective_time(Collective::all_to_all, a2a, l.dp, c, hw) +
                   collective_time(Collective::all_gather, ag, l.dp, c, hw);
  o.compressed_wire_bytes = bus_factor(Collective::all_to_all, n) * a2a + bus_factor(Collective::all_gather, n) * ag;
  const double kernel_bytes = (kWorkerBytesPerParam + kUnpackBytesPerParam) * psi + kServerBytesPerChunkElem * psi / nn;
  o.compress_kernels_s = memory_bound_time(kernel_bytes, c.node.gpu, hw, kCompressionKernels);
  // DeepSpeed OnebitAdam state: worker_error (the padded flat momentum) and
  // server_error (one chunk), fp32 like the momentum.
  o.error_feedback_bytes = 4.0 * psi + 4.0 * psi / nn;
  o.sign_buffer_bytes = 3.0 * signs;
  return o;
}

OnebitAdamPhases onebit_adam_phases(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  OnebitAdamPhases ph;
  Plan warm = p;
  warm.onebit_adam = false;
  Plan comp = p;
  comp.onebit_adam = true;
  ph.warmup_iteration_s = predict_time(m, warm, c, hw).iteration_s;
  ph.compressed_iteration_s = predict_time(m, comp, c, hw).iteration_s;
  const double tokens_per_step = static_cast<double>(p.global_batch) * m.seq_len;
  if (m.train_tokens > 0 && tokens_per_step > 0) {
    ph.run_steps = std::ceil(m.train_tokens / tokens_per_step);
    ph.warmup_fraction = std::min(1.0, p.onebit_freeze_step / ph.run_steps);
  }
  const double w = ph.warmup_fraction;
  ph.average_iteration_s = w * ph.warmup_iteration_s + (1.0 - w) * ph.compressed_iteration_s;
  const OnebitAdamCost o = onebit_adam_cost(m, comp, c, hw);
  if (o.warmup_wire_bytes > 0) {
    ph.volume_ratio = o.compressed_wire_bytes / o.warmup_wire_bytes;
    ph.average_volume_reduction = 1.0 / (w + (1.0 - w) * ph.volume_ratio);
  }
  return ph;
}

}  // namespace ztune
