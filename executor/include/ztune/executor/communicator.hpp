#pragma once
// Collectives and point-to-point messages over a group of ranks. Payloads are
// TensorRefs: fp32 (a float* converts), or bf16/fp16 storage, reduced in fp32
// arithmetic and rounded to the payload's type (MPI: user-defined ops; NCCL:
// its own 16-bit types).
// Implemented over MPI now (MpiCommunicator); the NCCL communicator of issue 7
// implements the same virtuals on device pointers and its communication stream.
// Synchronous calls return when the result is in place; *_async calls return a
// request whose wait() does that (buffers must stay alive and untouched until then).
// Every operation is counted in stats() (time from launch to completion).
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "ztune/executor/comm_stats.hpp"
#include "ztune/executor/storage.hpp"

namespace ztune::executor {

enum class ReduceOp : std::uint8_t { sum, max };

class CommRequest {
 public:
  virtual ~CommRequest() = default;
  /// Blocks until the operation completed. Idempotent.
  virtual void wait() = 0;
  /// Without blocking: whether the operation completed (then as if waited for).
  virtual bool done() = 0;
};
using RequestPtr = std::unique_ptr<CommRequest>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  [[nodiscard]] const std::string& name() const { return name_; }
  CommStats& stats() { return stats_; }

  /// buf[n] ← op over ranks of buf[n].
  void all_reduce(TensorRef buf, std::size_t n, ReduceOp op = ReduceOp::sum);
  RequestPtr all_reduce_async(TensorRef buf, std::size_t n, ReduceOp op = ReduceOp::sum);
  /// recv[count] ← Σ over ranks of send[rank·count, (rank+1)·count). send and recv of one type.
  void reduce_scatter(ConstTensorRef send, TensorRef recv, std::size_t count);
  RequestPtr reduce_scatter_async(ConstTensorRef send, TensorRef recv, std::size_t count);
  /// recv[r·count, (r+1)·count) ← rank r's send[count]. send may be recv + rank·count (in place).
  void all_gather(ConstTensorRef send, TensorRef recv, std::size_t count);
  RequestPtr all_gather_async(ConstTensorRef send, TensorRef recv, std::size_t count);
  void broadcast(TensorRef buf, std::size_t n, int root);
  RequestPtr broadcast_async(TensorRef buf, std::size_t n, int root);
  void send(ConstTensorRef buf, std::size_t n, int peer, int tag);
  RequestPtr send_async(ConstTensorRef buf, std::size_t n, int peer, int tag);
  void recv(TensorRef buf, std::size_t n, int peer, int tag);
  RequestPtr recv_async(TensorRef buf, std::size_t n, int peer, int tag);
  /// recv[r·count, (r+1)·count) ← rank r's send[rank·count, (rank+1)·count):
  /// every rank sends block r of its buffer to rank r (nccl-tests' all-to-all;
  /// S = count·size). Built from the point-to-point primitives; send ≠ recv.
  void all_to_all(ConstTensorRef send, TensorRef recv, std::size_t count);
  void barrier();
  /// Sums (or maxes) doubles: losses, norms, counters. Not counted in stats.
  virtual void all_reduce_doubles(double* buf, std::size_t n, ReduceOp op) = 0;
  /// A new communicator over the ranks with the same color, ordered by key; collective
  /// over this communicator. A negative color takes no part and gets nullptr.
  [[nodiscard]] virtual std::unique_ptr<Communicator> split(int color, int key, const std::string& name) = 0;

 protected:
  explicit Communicator(std::string name) : name_(std::move(name)) {}
  /// Each returns a started request (the base class times and counts it).
  /// reduce_scatter's and all_gather's send and recv have one type (checked by the base class).
  virtual RequestPtr start_all_reduce(TensorRef buf, std::size_t n, ReduceOp op) = 0;
  virtual RequestPtr start_reduce_scatter(ConstTensorRef send, TensorRef recv, std::size_t count) = 0;
  virtual RequestPtr start_all_gather(ConstTensorRef send, TensorRef recv, std::size_t count) = 0;
  virtual RequestPtr start_broadcast(TensorRef buf, std::size_t n, int root) = 0;
  virtual RequestPtr start_send(ConstTensorRef buf, std::size_t n, int peer, int tag) = 0;
  virtual RequestPtr start_recv(TensorRef buf, std::size_t n, int peer, int tag) = 0;
  virtual void barrier_impl() = 0;

 private:
  RequestPtr timed(Collective kind, double bytes, RequestPtr inner);
  std::string name_;
  CommStats stats_;
};

}  // namespace ztune::executor
