#pragma once
// Launch batching by CUDA graphs (issue 24 item 3): work whose shapes and
// pointers do not change from one call to the next (a micro-batch's forward and
// backward at fixed shapes) is captured once from its stream and replayed as one
// graph launch, so the per-kernel launch gaps the cost model charges
// (HardwareProfile::kernel_launch_s per kernel) are paid once per graph. If the
// capture fails (a host synchronisation, an allocation or a legacy-stream call
// inside the work, or cudaGraphInstantiate refusing it), the work runs eagerly
// from then on and reason() says why; ZTUNE_CUDA_GRAPHS=0 disables capture.
// Kernel arguments are frozen at capture: what changes per call (AdamW's step t)
// must stay outside. Compiled for sm_80/sm_90; never run on a GPU yet.
#include <cuda_runtime_api.h>

#include <functional>
#include <string>

namespace ztune::kernels::cuda {

class CapturedWork {
 public:
  CapturedWork() = default;
  ~CapturedWork();
  CapturedWork(const CapturedWork&) = delete;
  CapturedWork& operator=(const CapturedWork&) = delete;

  /// Enqueues `work` on `stream`: captured on the first call, replayed after.
  void run(cudaStream_t stream, const std::function<void()>& work);
  /// Drops the graph (shapes or pointers changed); the next run captures again.
  void reset();
  [[nodiscard]] bool captured() const { return exec_ != nullptr; }
  [[nodiscard]] bool eager() const { return eager_; }
  /// Why the work runs eagerly ("" while captured or not yet run).
  [[nodiscard]] const std::string& reason() const { return reason_; }
  [[nodiscard]] long replays() const { return replays_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
  bool eager_ = false;
  std::string reason_;
  long replays_ = 0;
};

}  // namespace ztune::kernels::cuda
