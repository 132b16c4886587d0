#include "ztune/executor/cuda/nccl_watchdog.hpp"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ztune::executor::cuda {

NcclWatchdog::NcclWatchdog(int device, std::chrono::milliseconds timeout, Handler on_timeout,
                           std::chrono::milliseconds poll)
    : device_(device), timeout_(timeout), poll_(poll), on_timeout_(std::move(on_timeout)) {
  if (!on_timeout_) on_timeout_ = &NcclWatchdog::exit_process;
  thread_ = std::thread([this] { loop(); });
}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (auto& e : entries_) cudaEventDestroy(e.done);
}

std::uint64_t NcclWatchdog::watch(ncclComm_t comm, cudaEvent_t done, std::string what) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  // An aborted communicator is freed (or being freed, outside the lock): its
  // operations are not watched, and its error was reported when it was aborted.
  if (aborted_.count(comm) != 0) {
    cudaEventDestroy(done);
    return id;
  }
  entries_.push_back({id, comm, done, std::move(what), std::chrono::steady_clock::now()});
  return id;
}

void NcclWatchdog::forget_comm(ncclComm_t comm) {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->comm == comm) {
      cudaEventDestroy(it->done);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

bool NcclWatchdog::aborted(ncclComm_t comm) {
  std::lock_guard lock(mutex_);
  return aborted_.count(comm) != 0;
}

void NcclWatchdog::exit_process(const std::string& message) {
  std::fprintf(stderr, "ztune: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(kWatchdogExitCode);
}

void NcclWatchdog::loop() {
  cudaSetDevice(device_);  // event queries need this thread on the device
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, poll_, [this] { return stop_; });
    if (stop_) break;
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::string> failures;
    std::vector<ncclComm_t> to_abort;
    for (auto it = entries_.begin(); it != entries_.end();) {
      const cudaError_t q = cudaEventQuery(it->done);
      if (q == cudaSuccess) {
        cudaEventDestroy(it->done);
        it = entries_.erase(it);
        continue;
      }
      ncclResult_t async_error = ncclSuccess;
      ncclCommGetAsyncError(it->comm, &async_error);
      const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - it->start);
      std::string why;
      if (q != cudaErrorNotReady) {
        why = std::string("CUDA error ") + cudaGetErrorName(q);
      } else if (async_error != ncclSuccess && async_error != ncclInProgress) {
        why = std::string("NCCL error ") + ncclGetErrorString(async_error);
      } else if (age > timeout_) {
        why = "did not finish within " + std::to_string(timeout_.count()) + " ms";
      }
      if (why.empty()) {
        ++it;
        continue;
      }
      to_abort.push_back(it->comm);
      aborted_.insert(it->comm);
      failures.push_back(it->what + " " + why + " (after " + std::to_string(age.count()) +
                         " ms); communicator aborted");
      const ncclComm_t dead = it->comm;
      for (auto jt = entries_.begin(); jt != entries_.end();) {  // nothing more to learn from that communicator
        if (jt->comm == dead) {
          cudaEventDestroy(jt->done);
          jt = entries_.erase(jt);
        } else {
          ++jt;
        }
      }
      it = entries_.begin();
    }
    if (!failures.empty()) {
      // Outside the lock: ncclCommAbort frees the communicator's device memory,
      // and cudaFree waits for the device's queued work (NVIDIA/nccl#549), which
      // can take seconds; watch() and aborted() on the rank's other threads
      // answer meanwhile (aborted_ is already marked).
      lock.unlock();
      for (ncclComm_t comm : to_abort) ncclCommAbort(comm);  // releases the kernels waiting for peers
      for (const auto& f : failures) on_timeout_(f);
      lock.lock();
    }
  }
}

}  // namespace ztune::executor::cuda
