#include "ztune/executor/communicator.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace ztune::executor {

namespace {

// Wraps a started request: adds launch-to-completion time to the stats at wait().
class TimedRequest final : public CommRequest {
 public:
  TimedRequest(CommStats& stats, Collective kind, double bytes, RequestPtr inner)
      : stats_(stats), kind_(kind), bytes_(bytes), inner_(std::move(inner)),
        start_(std::chrono::steady_clock::now()) {}
  ~TimedRequest() override { wait(); }
  TimedRequest(const TimedRequest&) = delete;
  TimedRequest& operator=(const TimedRequest&) = delete;
  void wait() override {
    if (done_) return;
    inner_->wait();
    done_ = true;
    stats_.add(kind_, bytes_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  bool done() override {
    if (!done_ && inner_->done()) wait();
    return done_;
  }

 private:
  CommStats& stats_;
  Collective kind_;
  double bytes_;
  RequestPtr inner_;
  std::chrono::steady_clock::time_point start_;
  bool done_ = false;
};

double bytes(std::size_t n, StorageDtype t) { return static_cast<double>(n) * static_cast<double>(storage_bytes(t)); }

void same_type(ConstTensorRef send, TensorRef recv, const char* what) {
  if (send.dtype != recv.dtype)
    throw std::invalid_argument(std::string(what) + ": send is " + storage_name(send.dtype) + ", recv " +
                                storage_name(recv.dtype) + " (one type for both)");
}

}  // namespace

RequestPtr Communicator::timed(Collective kind, double bytes, RequestPtr inner) {
  return std::make_unique<TimedRequest>(stats_, kind, bytes, std::move(inner));
}

void Communicator::all_reduce(TensorRef buf, std::size_t n, ReduceOp op) { all_reduce_async(buf, n, op)->wait(); }
RequestPtr Communicator::all_reduce_async(TensorRef buf, std::size_t n, ReduceOp op) {
  return timed(Collective::all_reduce, bytes(n, buf.dtype), start_all_reduce(buf, n, op));
}
void Communicator::reduce_scatter(ConstTensorRef send, TensorRef recv, std::size_t count) {
  reduce_scatter_async(send, recv, count)->wait();
}
RequestPtr Communicator::reduce_scatter_async(ConstTensorRef send, TensorRef recv, std::size_t count) {
  same_type(send, recv, "reduce_scatter");
  return timed(Collective::reduce_scatter, bytes(count, recv.dtype) * size(), start_reduce_scatter(send, recv, count));
}
void Communicator::all_gather(ConstTensorRef send, TensorRef recv, std::size_t count) {
  all_gather_async(send, recv, count)->wait();
}
RequestPtr Communicator::all_gather_async(ConstTensorRef send, TensorRef recv, std::size_t count) {
  same_type(send, recv, "all_gather");
  return timed(Collective::all_gather, bytes(count, recv.dtype) * size(), start_all_gather(send, recv, count));
}
void Communicator::broadcast(TensorRef buf, std::size_t n, int root) { broadcast_async(buf, n, root)->wait(); }
RequestPtr Communicator::broadcast_async(TensorRef buf, std::size_t n, int root) {
  return timed(Collective::broadcast, bytes(n, buf.dtype), start_broadcast(buf, n, root));
}
void Communicator::send(ConstTensorRef buf, std::size_t n, int peer, int tag) {
  send_async(buf, n, peer, tag)->wait();
}
RequestPtr Communicator::send_async(ConstTensorRef buf, std::size_t n, int peer, int tag) {
  return timed(Collective::send, bytes(n, buf.dtype), start_send(buf, n, peer, tag));
}
void Communicator::recv(TensorRef buf, std::size_t n, int peer, int tag) { recv_async(buf, n, peer, tag)->wait(); }
RequestPtr Communicator::recv_async(TensorRef buf, std::size_t n, int peer, int tag) {
  return timed(Collective::recv, bytes(n, buf.dtype), start_recv(buf, n, peer, tag));
}
void Communicator::all_to_all(ConstTensorRef send, TensorRef recv, std::size_t count) {
  same_type(send, recv, "all_to_all");
  // Built from point-to-point messages (every backend has them): rank r posts
  // its receive from r − k and its send to r + k for k = 0..n−1 (k = 0 is its
  // own block), then waits for all. One tag, so messages of one pair stay in
  // order (MPI's non-overtaking rule).
  constexpr int kTagAllToAll = 30011;
  const auto start = std::chrono::steady_clock::now();
  const int n = size(), r = rank();
  std::vector<RequestPtr> reqs;
  reqs.reserve(2 * static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    const int from = (r - k + n) % n, to = (r + k) % n;
    reqs.push_back(start_recv(recv + static_cast<std::size_t>(from) * count, count, from, kTagAllToAll));
    reqs.push_back(start_send(send + static_cast<std::size_t>(to) * count, count, to, kTagAllToAll));
  }
  for (auto& q : reqs) q->wait();
  stats_.add(Collective::all_to_all, bytes(count, recv.dtype) * n,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void Communicator::barrier() {
  auto start = std::chrono::steady_clock::now();
  barrier_impl();
  stats_.add(Collective::barrier, 0, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace ztune::executor
