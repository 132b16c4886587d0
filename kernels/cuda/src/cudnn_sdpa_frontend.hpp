#pragma once
// cuDNN's fused attention through cudnn_frontend's sdpa and sdpa_backward nodes
// (NVIDIA's header-only C++ frontend, MIT licence; not a Debian package: the GPU
// bundle carries it, scripts/gpu-check.sh --prepare). The frontend lowers each
// node to the operation graph cuDNN's fused-attention engines are written to
// match (one score chain, the softmax sum of dO∘O inside the backward graph,
// reshape operations for the transposed products, dQ accumulated in fp32 in the
// workspace), which the hand-lowered graphs of kernels/sdpa_graph.hpp only
// approximate: a review against the frontend's lowering found the backward one
// unlikely to be accepted. CudnnAttention prefers this path when the build found
// the headers (ZTUNE_HAVE_CUDNN_FRONTEND); the hand-lowered graphs remain the
// path without them, and the flash kernels the fallback of both.
//
// Layouts are the executor's: Q, K, V are views of qkv [B, T, 3C] (strides
// T·3C, HD, 3C, 1 over dims B, NH, T, HD), O and dO of [B, T, C], Stats the
// log-sum-exp [B, NH, T] in fp32 the flash kernels keep, dQ, dK, dV views of a
// [B, T, 3C] buffer that is written, not accumulated. Never run on a GPU yet.
#include <cudnn.h>
#include <cudnn_frontend_version.h>

#include <cstdint>
#include <memory>
#include <string>

#include "ztune/kernels/sdpa_graph.hpp"

namespace ztune::kernels::cuda::fe_sdpa {

/// One built graph and its workspace, or why cuDNN cannot run it.
struct Built {
  std::shared_ptr<void> graph;  // a cudnn_frontend::graph::Graph
  std::int64_t workspace = 0;   // bytes
  std::string refused;          // non-empty: the frontend's or cuDNN's reason
};

/// The causal forward (O, Stats from Q, K, V) or backward (dQ, dK, dV). Never
/// throws for a refusal: it is said in `refused`.
Built build(cudnnHandle_t handle, const sdpa::Problem& p, bool backward);

/// Device pointers of one call (those of the other direction stay null).
struct Buffers {
  const void* qkv = nullptr;
  void* out = nullptr;        // forward: written
  float* stats = nullptr;     // forward: written; backward: read
  const void* dout = nullptr;
  void* dqkv = nullptr;       // backward: written
};

/// Enqueues the built graph on the handle's stream. A plan that was built and
/// fails to run is an error (std::runtime_error), not a fallback.
void execute(const Built& b, cudnnHandle_t handle, const sdpa::Problem& p, bool backward, const Buffers& buf,
             void* workspace);

}  // namespace ztune::kernels::cuda::fe_sdpa
