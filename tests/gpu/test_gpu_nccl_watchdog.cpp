// The NCCL watchdog: an operation whose completion event never comes is aborted
// after the timeout, and the report names the operation, the group and the rank.
// With a handler that records the message, the test checks it; with `--exit`, the
// default handler ends the process (exit code 3) and CTest checks the message on
// stderr: the job dies with a reason instead of hanging.
//
// The stuck operation is a stream held by a host function that waits on a flag,
// with the watched event recorded behind it, on an idle one-rank communicator.
// The flag is released 1.5 s after the 2 s timeout: ncclCommAbort frees device
// memory, and cudaFree waits for every queued operation, the held stream's too
// (NVIDIA/nccl#549), so a stream held past the abort would hang it.
// Not a real unmatched receive: NCCL refuses a receive from self with no send at
// once (ncclInvalidUsage, "Trying to recv to self without a matching send"), and a
// collective queued behind the block would run on the communicator the watchdog
// frees. The label is the one NcclCommunicator gives its receives.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "gpu_support.hpp"
#include "ztune/executor/cuda/nccl_watchdog.hpp"

using namespace ztune::executor;

namespace {

std::atomic<bool> released{false};

// Runs on the CUDA driver's callback thread: holds the stream until released.
void CUDART_CB hold_stream(void*) {
  while (!released.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace

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
  cuda::NcclWatchdog::Handler handler;  // empty: the default, which exits 3
  if (!exit_mode) {
    handler = [&](const std::string& m) {
      std::lock_guard lock(mutex);
      message = m;
      fired = true;
    };
  }
  int failures = 0;
  {
    int device = 0;
    ZT_CUDA_CHECK(cudaGetDevice(&device));
    ncclUniqueId id;
    ncclComm_t comm = nullptr;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
      std::printf("FAIL: a one-rank NCCL communicator could not be made\n");
      MPI_Finalize();
      return 1;
    }
    cudaStream_t stream = nullptr;
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t done = nullptr;
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    ZT_CUDA_CHECK(cudaLaunchHostFunc(stream, hold_stream, nullptr));
    ZT_CUDA_CHECK(cudaEventRecord(done, stream));
    {
      cuda::NcclWatchdog watchdog(device, std::chrono::milliseconds(2000), handler);
      watchdog.watch(comm, done, "rank 0: NCCL recv of 1024 elements on group 'world' (group rank 0 of 1)");
      std::thread releaser([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(3500));
        released = true;  // the stream drains and the abort's frees finish
      });
      releaser.detach();
      // Past the timeout and a few polls: the watchdog has aborted the
      // communicator and called the handler (in --exit mode, ended the process).
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!fired && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!watchdog.aborted(comm)) {
        std::printf("FAIL: the communicator was not aborted\n");
        ++failures;
      }
    }
    while (!released) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ZT_CUDA_CHECK(cudaStreamSynchronize(stream));  // drained; the watchdog destroyed its event
    ZT_CUDA_CHECK(cudaStreamDestroy(stream));
    // The communicator was aborted: ncclCommAbort freed it, so no ncclCommDestroy.
    std::lock_guard lock(mutex);
    if (!fired || message.find("NCCL recv") == std::string::npos || message.find("rank 0") == std::string::npos ||
        message.find("did not finish within 2000 ms") == std::string::npos ||
        message.find("communicator aborted") == std::string::npos) {
      std::printf("FAIL: watchdog message '%s'\n", message.c_str());
      ++failures;
    } else {
      std::printf("watchdog: %s\n", message.c_str());
    }
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
