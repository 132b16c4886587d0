#pragma once
// The plan's `flash` attention through cuDNN's fused scaled-dot-product attention
// (issue 24 item 3). With cudnn_frontend's headers at build time
// (ZTUNE_HAVE_CUDNN_FRONTEND; the GPU bundle carries them) the graphs are its sdpa
// and sdpa_backward nodes (src/cudnn_sdpa_frontend.hpp), the patterns cuDNN's
// fused engines match. Without them, cuDNN 9's C backend graph API
// (cudnn_graph.h): kernels/sdpa_graph.hpp describes the causal forward and
// backward graphs as plain data; this class builds one cuDNN operation graph per
// (graph, shape, dtype), asks heuristics mode A for engine configurations, keeps
// the first of at most five whose execution plan finalizes, and caches it (or
// the refusal and its reason); a review against the frontend's lowering found
// that backward graph unlikely to be accepted. When choose() or cuDNN says no, the call runs the project's flash
// kernels (attention.hpp) instead and last_path()/last_reason() say so: the same
// contract either way (out, lse [B, NH, T]; backward dqkv += ∂L/∂qkv).
//
// Compiled for sm_80 and sm_90 with -Werror when the toolkit has cuDNN 9
// (ZTUNE_HAVE_CUDNN); without it every call takes the fallback, saying why.
// Never run on a GPU yet: tests/gpu/test_gpu_cudnn_attention.cpp checks it
// against the flash kernels when a device is lent.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>

#include "ztune/kernels/sdpa_graph.hpp"

namespace ztune::kernels::cuda {

class CudnnAttention {
 public:
  CudnnAttention();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  /// cudnnGetVersion() of the loaded library, 0 when cuDNN is not built in.
  [[nodiscard]] static long cudnn_version();
  /// Whether this build links cuDNN at all.
  [[nodiscard]] static bool built_with_cudnn();
  /// How the graphs are made: "cudnn_frontend 1.32 sdpa nodes", "hand-lowered
  /// backend graphs" or "no cuDNN" (said beside the benchmarks' figures).
  [[nodiscard]] static std::string graph_api();

  /// out [B, T, C], lse [B, NH, T] from qkv [B, T, 3C] (T = float, __half, __nv_bfloat16).
  template <typename T>
  void forward(T* out, float* lse, const T* qkv, int b, int t, int c, int nh, cudaStream_t stream);
  /// dqkv += ∂L/∂qkv. The cuDNN path needs B·T·3C elements of T and B·NH·T floats of
  /// workspace, taken from an internal buffer grown on demand.
  template <typename T>
  void backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int b, int t, int c, int nh,
                cudaStream_t stream);

  /// The path the last call took and, for the fallback, why.
  [[nodiscard]] sdpa::Path last_path() const { return last_path_; }
  [[nodiscard]] const std::string& last_reason() const { return last_reason_; }
  /// Plans built (accepted or refused) so far.
  [[nodiscard]] std::size_t cached_plans() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  sdpa::Path last_path_ = sdpa::Path::fallback;
  std::string last_reason_ = "no call yet";
};

}  // namespace ztune::kernels::cuda
