// Stand-in for a GPU test when the build has no CUDA toolkit (or no NCCL): it says
// so and exits 77, which CTest reports as skipped (SKIP_RETURN_CODE 77).
#include <cstdio>

int main() {
  std::printf("no CUDA toolkit in this build: test skipped (exit 77)\n");
  return 77;
}
