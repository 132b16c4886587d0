// CapturedWork (kernels/cuda/graph_capture.hpp): captured work replays with the
// same effect as running it eagerly, pointers and arguments frozen at capture;
// work that synchronises inside the capture falls back to eager runs, saying why.
// Written without a device: never run yet.
#include <catch2/catch.hpp>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/elementwise.hpp"
#include "ztune/kernels/cuda/graph_capture.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

TEST_CASE("captured work replays like eager work", "[gpu][graph]") {
  cudaStream_t s = nullptr;
  ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::size_t n = 10000;
  DeviceArray<float> x(uniform(n, 1)), y(uniform(n, 2));
  auto ex = x.download(), ey = y.download();
  cuda::CapturedWork w;
  for (int call = 0; call < 3; ++call) {
    // y += x; x *= 0.5 — three replays must equal three eager runs.
    w.run(s, [&] {
      cuda::accumulate<float>(y.get(), x.get(), static_cast<long>(n), s);
      cuda::scale<float>(x.get(), 0.5f, static_cast<long>(n), s);
    });
    for (std::size_t i = 0; i < n; ++i) {
      ey[i] += ex[i];
      ex[i] *= 0.5f;
    }
  }
  ZT_CUDA_CHECK(cudaStreamSynchronize(s));
  INFO(w.reason());
  CHECK(w.captured());
  CHECK(w.replays() == 3);
  CHECK(x.download() == ex);
  CHECK(y.download() == ey);
  cudaStreamDestroy(s);
}

TEST_CASE("work that synchronises cannot be captured and runs eagerly", "[gpu][graph]") {
  cudaStream_t s = nullptr;
  ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  DeviceArray<float> x(std::vector<float>(64, 1.0f));
  cuda::CapturedWork w;
  for (int call = 0; call < 2; ++call) {
    w.run(s, [&] {
      cuda::scale<float>(x.get(), 2.0f, 64, s);
      // Illegal while capturing: the capture is invalidated.
      const cudaError_t e = cudaStreamSynchronize(s);
      if (e != cudaSuccess && e != cudaErrorStreamCaptureUnsupported && e != cudaErrorStreamCaptureInvalidated)
        ZT_CUDA_CHECK(e);
    });
  }
  ZT_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(!w.captured());
  CHECK(w.eager());
  CHECK(!w.reason().empty());
  CHECK(x.download() == std::vector<float>(64, 4.0f));  // ran twice, eagerly
  cudaStreamDestroy(s);
}
