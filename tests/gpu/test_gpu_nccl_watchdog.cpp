// The NCCL watchdog: a receive nobody sends to never finishes; the watchdog aborts
// the communicator after the timeout and reports the collective, the group and the
// rank. With a handler that records the message, the request's wait() then throws.
// With `--exit`, the default handler ends the process (exit code 3) and CTest
// checks the message on stderr: the job dies with a reason instead of hanging.
#include <cuda_runtime.h>
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "gpu_support.hpp"
#include "ztune/executor/cuda/nccl_communicator.hpp"
#include "ztune/executor/mpi_communicator.hpp"

using namespace ztune::executor;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (ztune::kernels::cuda::device_count() == 0) {
    std::printf("no CUDA device visible: test skipped (exit 77)\n");
    MPI_Finalize();
    return 77;
  }
  const bool exit_mode = argc > 1 && std::strcmp(argv[1], "--exit") == 0;
  std::mutex mutex;
  std::string message;
  std::atomic<bool> fired{false};
  cuda::NcclOptions options;
  options.timeout = std::chrono::milliseconds(2000);
  if (!exit_mode) {
    options.on_timeout = [&](const std::string& m) {
      std::lock_guard lock(mutex);
      message = m;
      fired = true;
    };
  }
  int failures = 0;
  {
    auto mpi = MpiCommunicator::world();
    cudaStream_t compute = nullptr;
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    auto nccl = cuda::NcclCommunicator::create(*mpi, 0, compute, options);
    ztune::test::DeviceArray<float> buf(1024);
    // Only rank 0 posts a receive from itself; no send ever matches it.
    auto req = nccl->recv_async(buf.get(), buf.size(), 0, 0);
    try {
      req->wait();
      std::printf("FAIL: the unmatched receive completed\n");
      ++failures;
    } catch (const std::exception& e) {
      std::printf("wait() threw: %s\n", e.what());
    }
    std::lock_guard lock(mutex);
    if (!fired || message.find("NCCL recv") == std::string::npos || message.find("rank 0") == std::string::npos ||
        message.find("did not finish within 2000 ms") == std::string::npos) {
      std::printf("FAIL: watchdog message '%s'\n", message.c_str());
      ++failures;
    } else {
      std::printf("watchdog: %s\n", message.c_str());
    }
    nccl.reset();
    cudaStreamDestroy(compute);
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
