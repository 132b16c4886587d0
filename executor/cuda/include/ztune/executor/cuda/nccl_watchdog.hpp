#pragma once
// The NCCL watchdog (the role of PyTorch's ProcessGroupNCCL watchdog thread): a
// thread that polls every in-flight collective's completion event. A collective
// still running after the timeout, or a communicator reporting an asynchronous
// error, makes it ncclCommAbort() that communicator (so kernels stuck waiting for a
// peer return) and call the timeout handler with a message naming the collective,
// the group and the rank. The default handler prints the message and ends the
// process with exit code 3: a rank blocked in a dead collective cannot be unwound
// by an exception, and the job must not hang (mpirun then stops the other ranks).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <set>
#include <mutex>
#include <string>
#include <thread>

namespace ztune::executor::cuda {

inline constexpr int kWatchdogExitCode = 3;

class NcclWatchdog {
 public:
  using Handler = std::function<void(const std::string& message)>;
  /// Polls every `poll`; a collective older than `timeout` is aborted.
  NcclWatchdog(int device, std::chrono::milliseconds timeout, Handler on_timeout = {},
               std::chrono::milliseconds poll = std::chrono::milliseconds(50));
  ~NcclWatchdog();
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  /// Watches `done` (recorded after the collective on its stream); the watchdog owns
  /// and destroys the event. Returns an id for forget().
  std::uint64_t watch(ncclComm_t comm, cudaEvent_t done, std::string what);
  /// Stops watching a communicator (before it is destroyed).
  void forget_comm(ncclComm_t comm);
  /// Whether the watchdog aborted `comm` (it must then not be used or destroyed again).
  [[nodiscard]] bool aborted(ncclComm_t comm);
  [[nodiscard]] std::chrono::milliseconds timeout() const { return timeout_; }
  /// The default handler: print to stderr and std::_Exit(kWatchdogExitCode).
  static void exit_process(const std::string& message);

 private:
  struct Entry {
    std::uint64_t id;
    ncclComm_t comm;
    cudaEvent_t done;
    std::string what;
    std::chrono::steady_clock::time_point start;
  };
  void loop();

  int device_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds poll_;
  Handler on_timeout_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::list<Entry> entries_;
  std::set<ncclComm_t> aborted_;
  std::uint64_t next_id_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ztune::executor::cuda
