// cuDNN fused attention (kernels/cuda/cudnn_attention.hpp) against the project's
// flash kernels, the oracle (themselves checked against the CPU in
// test_gpu_attention.cpp): out, lse and dqkv from the same 16-bit inputs, causal,
// head sizes 64 and 128, T not a multiple of the tiles. On a device where
// choose() allows cuDNN (cuDNN 9, sm_80+), the test requires that cuDNN accepted
// the graphs, so a refused graph shows as a failure with cuDNN's reason rather
// than as a silent fallback. fp32 must take the fallback. Written without a
// device: never run yet.
#include <catch2/catch.hpp>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/attention.hpp"
#include "ztune/kernels/cuda/cudnn_attention.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

namespace {
// Outputs are convex combinations of values in [-1.5, 1.5] (test_gpu_attention.cpp):
// both paths round once to T; 4·eps absorbs that and the fp32 summation order.
template <typename T>
float atol16() {
  return 4 * eps_of<T>();
}
int device_sm() {
  int dev = 0, major = 0, minor = 0;
  ZT_CUDA_CHECK(cudaGetDevice(&dev));
  ZT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  ZT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return 10 * major + minor;
}
}  // namespace

TEMPLATE_TEST_CASE("cuDNN fused attention matches the flash kernels", "[gpu][attention][cudnn]", __half,
                   __nv_bfloat16) {
  using T = TestType;
  cuda::CudnnAttention att;
  for (int hd : {64, 128}) {
    const int b = 2, t = 77, nh = 3, c = nh * hd;
    INFO("head dim " << hd << ", " << type_name<T>() << ", cuDNN " << cuda::CudnnAttention::cudnn_version());
    const auto qkv = rounded<T>(uniform(static_cast<std::size_t>(b) * t * 3 * c, 1, -1.5f, 1.5f));
    const auto dout = rounded<T>(uniform(static_cast<std::size_t>(b) * t * c, 2));
    const auto dqkv0 = rounded<T>(uniform(qkv.size(), 3));
    const std::size_t rows = static_cast<std::size_t>(b) * nh * t;
    DeviceArray<T> d_qkv(qkv), d_dout(dout);
    // Oracle: the flash kernels.
    DeviceArray<T> f_out(static_cast<std::size_t>(b) * t * c), f_dqkv(dqkv0);
    DeviceArray<float> f_lse(rows), f_delta(rows);
    cuda::flash_attention_forward<T>(f_out.get(), f_lse.get(), d_qkv.get(), b, t, c, nh, nullptr);
    cuda::flash_attention_backward<T>(f_dqkv.get(), f_delta.get(), d_dout.get(), d_qkv.get(), f_out.get(),
                                      f_lse.get(), b, t, c, nh, nullptr);
    // Under test.
    DeviceArray<T> g_out(f_out.size()), g_dqkv(dqkv0);
    DeviceArray<float> g_lse(rows);
    att.forward<T>(g_out.get(), g_lse.get(), d_qkv.get(), b, t, c, nh, nullptr);
    const bool allowed = sdpa::choose(sdpa::Problem{b, t, nh, hd, std::is_same_v<T, __half> ? sdpa::Dtype::fp16
                                                                                           : sdpa::Dtype::bf16,
                                                    0},
                                      cuda::CudnnAttention::cudnn_version(), device_sm())
                             .path == sdpa::Path::cudnn;
    INFO("forward path " << (att.last_path() == sdpa::Path::cudnn ? "cudnn" : "fallback") << ": "
                         << att.last_reason());
    if (allowed && cuda::CudnnAttention::built_with_cudnn()) CHECK(att.last_path() == sdpa::Path::cudnn);
    // Both accumulate in fp32 and round the output once to T.
    CHECK(mismatches("out", g_out.download(), f_out.download(), atol16<T>(), 2 * eps_of<T>()) == 0);
    CHECK(mismatches("lse", g_lse.download(), f_lse.download(), 1e-3f, 1e-4f) == 0);
    att.backward<T>(g_dqkv.get(), d_dout.get(), d_qkv.get(), g_out.get(), g_lse.get(), b, t, c, nh, nullptr);
    INFO("backward path " << (att.last_path() == sdpa::Path::cudnn ? "cudnn" : "fallback") << ": "
                          << att.last_reason());
    if (allowed && cuda::CudnnAttention::built_with_cudnn()) CHECK(att.last_path() == sdpa::Path::cudnn);
    // cuDNN rounds dS·scale to T before its products (the graph's cast): 4× the forward tolerance.
    CHECK(mismatches("dqkv", g_dqkv.download(), f_dqkv.download(), 4 * atol16<T>(), 4 * eps_of<T>()) == 0);
  }
  CHECK(att.cached_plans() <= 6);  // fwd, bwd_delta, bwd per head size: cached, not rebuilt per call
}

TEST_CASE("fp32 storage takes the flash kernels and says why", "[gpu][attention][cudnn]") {
  cuda::CudnnAttention att;
  const int b = 1, t = 33, nh = 2, c = 128;
  DeviceArray<float> qkv(uniform(static_cast<std::size_t>(b) * t * 3 * c, 5)), out(static_cast<std::size_t>(b) * t * c),
      lse(static_cast<std::size_t>(b) * nh * t), ref_out(out.size()), ref_lse(lse.size());
  att.forward<float>(out.get(), lse.get(), qkv.get(), b, t, c, nh, nullptr);
  CHECK(att.last_path() == sdpa::Path::fallback);
  CHECK_THAT(att.last_reason(), Catch::Contains("fp32") || Catch::Contains("no cuDNN"));
  cuda::flash_attention_forward<float>(ref_out.get(), ref_lse.get(), qkv.get(), b, t, c, nh, nullptr);
  CHECK(out.download() == ref_out.download());  // the very kernel
}
