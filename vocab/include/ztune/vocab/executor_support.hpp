#pragma once
// What ztune's executor (CPU or CUDA backend) can honour. Here, beside the
// plan vocabulary, so that the CLI can choose a plan the executor runs
// (`ztune --run`) without linking the executor. A plan it cannot run exactly is
// refused with the reason; it is never quietly weakened (STYLE.md anti-pattern 1).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

enum class ExecBackend : std::uint8_t { cpu, cuda };

/// The backend a cluster's ranks train on: GPU clusters cuda, CPU-rank clusters cpu.
[[nodiscard]] inline ExecBackend executor_backend_for(const Cluster& c) {
  return c.device_kind == DeviceKind::gpu ? ExecBackend::cuda : ExecBackend::cpu;
}
/// "cpu" or "cuda": ztune-worker's --backend value.
[[nodiscard]] inline const char* to_string(ExecBackend b) { return b == ExecBackend::cuda ? "cuda" : "cpu"; }

/// The rows of the vocabulary-parallel embedding (and the logits' columns) a
/// tensor-parallel rank holds: ceil(V/tp) each, the last rank the rest, so a
/// vocabulary tp does not divide (GPT-2's 50257) needs no padding and trains
/// exactly like the unsplit model. Megatron pads instead (its extra logits
/// enter the softmax); ztune keeps the model's own vocabulary.
struct VocabRange {
  int begin = 0;
  int rows = 0;
};
VocabRange vocab_range(int vocab, int tp, int tp_rank);

/// Elements of 16-bit optimizer states one step widens to fp32 at a time
/// (Backend::adamw_fused_impl stages them chunk by chunk, each state read
/// widened and written rounded), so their fp32 workspace stays bounded: small
/// on the CPU; on CUDA large enough that a chunk's few kernel launches do not
/// show beside its traffic. The memory model counts the same bound.
[[nodiscard]] constexpr std::size_t staged_adam_chunk(ExecBackend b) {
  return b == ExecBackend::cpu ? std::size_t{1} << 14 : std::size_t{1} << 22;
}

/// ZeRO-2/3 gradient reductions the executor's ParamStore lets run at once:
/// a bucket's full gradients are freed when its piece arrives, and the
/// backward waits for the oldest reduction beyond these (DeepSpeed's
/// overlap_comm double-buffers its reduction buckets alike). With the bucket
/// the backward is filling, kExecutorReductionsInFlight + 1 buckets' full
/// gradients are live at most; the memory model counts the same bound.
inline constexpr std::size_t kExecutorReductionsInFlight = 2;

/// Whether the backend's AdamW step updates the optimizer states at their own
/// dtypes in place (no fp32 staging, no staged_adam_chunk workspace): CUDA's
/// fused kernel (kernels/cuda adamw.hpp adamw_chunked) takes fp32 states with
/// any parameters, 16-bit parameters' states each fp32 or of the parameters'
/// type, and an fp32 model's 16-bit moments. The CPU stages every 16-bit state.
[[nodiscard]] constexpr bool adam_states_native(ExecBackend b, Precision params, Precision master,
                                                Precision moments) {
  if (master == Precision::fp32 && moments == Precision::fp32) return true;
  if (b != ExecBackend::cuda) return false;
  if (params == Precision::fp32) return master == Precision::fp32;
  const auto fp32_or_params = [params](Precision s) { return s == Precision::fp32 || s == params; };
  return fp32_or_params(master) && fp32_or_params(moments);
}

/// Whether the executor has a flash attention kernel for the model's heads: the
/// CPU kernel takes any head size; the CUDA one (kernels/cuda attention_flash.cu)
/// is instantiated for 64 and 128.
[[nodiscard]] inline bool executor_runs_flash(const Transformer& m, ExecBackend b) {
  return b == ExecBackend::cpu || m.head_dim() == 64 || m.head_dim() == 128;
}

/// The first reason the plan cannot run on `world_size` ranks of `backend`, or
/// nullopt. Messages name the plan field ("$.plan.precision: ..."). `ranks_per_node`:
/// the ranks one node runs (0: unknown, the job is taken to be on one node).
std::optional<std::string> unsupported_reason(const Plan& p, const Transformer& m, int world_size,
                                              ExecBackend backend = ExecBackend::cpu, int ranks_per_node = 0);

}  // namespace ztune
