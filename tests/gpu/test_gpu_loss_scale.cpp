// Overflow detection and unscaling: the flag is raised exactly when an inf or NaN
// is present (anywhere, including the last element), and unscaling by a power of
// two is exact.
#include <catch2/catch.hpp>

#include <cmath>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/loss_scale.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

TEMPLATE_TEST_CASE("overflow check and unscale", "[gpu][loss_scale]", float, __half, __nv_bfloat16) {
  using T = TestType;
  const long n = 300001;
  auto x = rounded<T>(uniform(n, 1, -100.0f, 100.0f));
  DeviceArray<T> dx(x);
  DeviceArray<int> flag(1);
  auto read_flag = [&] {
    int f = -1;
    ZT_CUDA_CHECK(cudaMemcpy(&f, flag.get(), sizeof(int), cudaMemcpyDeviceToHost));
    ZT_CUDA_CHECK(cudaMemset(flag.get(), 0, sizeof(int)));
    return f;
  };
  cuda::check_finite<T>(flag.get(), dx.get(), n, nullptr);
  CHECK(read_flag() == 0);
  cuda::unscale_check_finite<T>(dx.get(), 1.0f / 64, flag.get(), n, nullptr);
  CHECK(read_flag() == 0);
  auto ref = x;
  for (auto& v : ref) v /= 64;  // exact in every type for these magnitudes (no underflow)
  CHECK(mismatches("unscaled", dx.download(), ref, 0.0f, 0.0f) == 0);

  for (float bad : {INFINITY, -INFINITY, NAN}) {
    for (long where : {0L, n / 2, n - 1}) {
      INFO("value " << bad << " at " << where);
      auto y = x;
      y[static_cast<std::size_t>(where)] = bad;
      dx.upload(y);
      cuda::check_finite<T>(flag.get(), dx.get(), n, nullptr);
      CHECK(read_flag() == 1);
      cuda::unscale_check_finite<T>(dx.get(), 0.5f, flag.get(), n, nullptr);
      CHECK(read_flag() == 1);
    }
  }
}
