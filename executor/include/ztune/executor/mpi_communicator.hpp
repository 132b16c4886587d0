#pragma once
// Communicator over an MPI communicator (Open MPI). Non-blocking collectives
// (MPI_Iallreduce, MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Ibcast) carry the
// async calls; Open MPI progresses them inside MPI calls, so on the CPU backend the
// overlap is semantic (ordering, buffers), not a speed-up. 16-bit payloads travel
// as MPI_UINT16_T; their sums and maxima are user-defined ops that add in fp32 and
// round each partial result to the payload's type, as a 16-bit NCCL ring does.
#include <mpi.h>

#include <chrono>

#include "ztune/executor/communicator.hpp"

namespace ztune::executor {

/// How long a rank waits in one collective or message before it ends the job
/// (the CPU backend's counterpart of the NCCL watchdog: PyTorch's default 10
/// minutes), and the exit code it ends with (the watchdog's).
inline constexpr int kDefaultCollectiveTimeoutS = 600;
inline constexpr int kCollectiveTimeoutExit = 3;
/// Sets the timeout for every MPI communicator of the process; 0 waits forever.
void set_collective_timeout(std::chrono::milliseconds timeout);

class MpiCommunicator final : public Communicator {
 public:
  /// Wraps `comm`; frees it on destruction when `owned` (splits are owned, WORLD is not).
  MpiCommunicator(MPI_Comm comm, std::string name, bool owned);
  ~MpiCommunicator() override;

  /// MPI_COMM_WORLD (MPI must be initialised).
  static std::unique_ptr<MpiCommunicator> world();

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] MPI_Comm handle() const { return comm_; }
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
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
};

/// MPI_Init_thread / MPI_Finalize for a process's lifetime.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

/// Ends every rank of the job with exit `code` (MPI_Abort): for an error one
/// rank meets while the others may be waiting in a collective.
[[noreturn]] void abort_job(int code);

}  // namespace ztune::executor
