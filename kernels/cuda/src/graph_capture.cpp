#include "ztune/kernels/cuda/graph_capture.hpp"

#include <cuda_runtime.h>

#include <cstdlib>
#include <exception>
#include <string>

#include "ztune/kernels/cuda/check.hpp"

namespace ztune::kernels::cuda {

CapturedWork::~CapturedWork() { reset(); }

void CapturedWork::reset() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
  eager_ = false;
  reason_.clear();
  replays_ = 0;
}

void CapturedWork::run(cudaStream_t stream, const std::function<void()>& work) {
  if (exec_ != nullptr) {
    ZT_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
    ++replays_;
    return;
  }
  if (eager_) {
    work();
    return;
  }
  const char* env = std::getenv("ZTUNE_CUDA_GRAPHS");
  if (env != nullptr && std::string(env) == "0") {
    eager_ = true;
    reason_ = "ZTUNE_CUDA_GRAPHS=0";
    work();
    return;
  }
  if (stream == nullptr) {  // the legacy default stream cannot be captured
    eager_ = true;
    reason_ = "the legacy default stream cannot be captured";
    work();
    return;
  }
  std::string failure;
  cudaGraph_t graph = nullptr;
  const cudaError_t begin = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (begin != cudaSuccess) {
    failure = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(begin);
  } else {
    try {
      work();
    } catch (const std::exception& e) {
      failure = std::string("the work threw during capture: ") + e.what();
    }
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (failure.empty() && end != cudaSuccess) failure = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(end);
  }
  if (failure.empty()) {
    const cudaError_t inst = cudaGraphInstantiate(&exec_, graph, 0);
    if (inst != cudaSuccess) {
      exec_ = nullptr;
      failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(inst);
    }
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (!failure.empty()) {
    (void)cudaGetLastError();  // a failed capture leaves a sticky-free error behind
    eager_ = true;
    reason_ = failure;
    work();  // nothing captured ran: run it now, eagerly
    return;
  }
  ZT_CUDA_CHECK(cudaGraphLaunch(exec_, stream));  // the capture itself ran nothing
  ++replays_;
}

}  // namespace ztune::kernels::cuda
