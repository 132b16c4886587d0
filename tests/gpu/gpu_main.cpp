// main() of the GPU test executables: exits 77 (CTest SKIP_RETURN_CODE) when no CUDA
// device is visible, so CI lists these tests as skipped, never as passed; otherwise
// names the device and runs the Catch2 session.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "ztune/kernels/cuda/check.hpp"

int main(int argc, char** argv) {
  if (ztune::kernels::cuda::device_count() == 0) {
    std::printf("no CUDA device visible: test skipped (exit 77)\n");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    std::printf("device 0: %s, sm_%d%d, %.1f GiB\n", prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return Catch::Session().run(argc, argv);
}
