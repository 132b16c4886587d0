#pragma once
// The executor's Communicator over NCCL (issue 7): fp32 collectives on device
// buffers. Bootstrapped over MPI (rank 0's ncclUniqueId is broadcast with
// MPI_Bcast); groups are ncclCommSplit()s of it. Each communicator has its own
// stream (as PyTorch's process groups): an operation first waits for the work
// already enqueued on the backend's compute stream (its input), then runs
// asynchronously; the request's wait() blocks until it is done and makes the
// compute stream wait for it too. Every operation is watched by an NcclWatchdog:
// past the timeout (default 10 minutes) the communicator is aborted and the job
// ends with a message naming the collective, the group and the rank, never a hang.
// NCCL has no message tags: sends and receives between two ranks match in order
// (the `tag` argument is only checked to be non-negative).
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <memory>
#include <string>

#include "ztune/executor/communicator.hpp"
#include "ztune/executor/cuda/nccl_watchdog.hpp"

namespace ztune::executor {
class MpiCommunicator;
}

namespace ztune::executor::cuda {

struct NcclOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  NcclWatchdog::Handler on_timeout;  // empty: print and exit (NcclWatchdog::exit_process)
};

class NcclCommunicator final : public Communicator {
 public:
  /// Collective over `world`: one NCCL rank per MPI rank, on `device`, ordered after
  /// work on `compute_stream`.
  static std::unique_ptr<NcclCommunicator> create(MpiCommunicator& world, int device, cudaStream_t compute_stream,
                                                   const NcclOptions& options = {});
  ~NcclCommunicator() override;

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] cudaStream_t stream() const { return stream_; }
  /// `buf` may be host or device memory.
  void all_reduce_doubles(double* buf, std::size_t n, ReduceOp op) override;
  [[nodiscard]] std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override;

 protected:
  RequestPtr start_all_reduce(TensorRef buf, std::size_t n, ReduceOp op) override;
  RequestPtr start_reduce_scatter(ConstTensorRef send, TensorRef recv, std::size_t count) override;
  RequestPtr start_all_gather(ConstTensorRef send, TensorRef recv, std::size_t count) override;
  RequestPtr start_broadcast(TensorRef buf, std::size_t n, int root) override;
  RequestPtr start_send(ConstTensorRef buf, std::size_t n, int peer, int tag) override;
  RequestPtr start_recv(TensorRef buf, std::size_t n, int peer, int tag) override;
  void barrier_impl() override;

 private:
  struct Shared;
  NcclCommunicator(ncclComm_t comm, std::string name, std::shared_ptr<Shared> shared);
  void before_launch(const char* what);
  RequestPtr after_launch(const char* what, std::size_t n);

  ncclComm_t comm_ = nullptr;
  std::shared_ptr<Shared> shared_;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int world_rank_ = 0;
};

}  // namespace ztune::executor::cuda
