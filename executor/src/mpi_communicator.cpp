#include "ztune/executor/mpi_communicator.hpp"

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace ztune::executor {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<std::int64_t> g_timeout_ms{kDefaultCollectiveTimeoutS * 1000};

// Completes `request` as MPI_Wait would (Open MPI progresses it inside
// MPI_Test, as inside MPI_Wait), but gives up after the collective timeout:
// a peer that stopped (SIGSTOP, a hang, a rank started with another job)
// would otherwise keep this rank spinning forever. Then the message names the
// operation, the group and the rank, and the process ends with
// kCollectiveTimeoutExit; mpirun stops the others, the stuck one included.
void wait_or_time_out(MPI_Request* request, const char* op, const std::string& group, int rank, int size) {
  const auto start = Clock::now();
  const std::int64_t limit = g_timeout_ms.load(std::memory_order_relaxed);
  int flag = 0;
  for (std::uint64_t i = 0;; ++i) {
    MPI_Test(request, &flag, MPI_STATUS_IGNORE);
    if (flag != 0) return;
    if (limit <= 0 || (i & 1023) != 0) continue;
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    if (waited < limit) continue;
    std::fprintf(stderr,
                 "ztune-worker: error: rank %d of group %s (%d ranks): %s waited more than %g s for its peers "
                 "(--collective-timeout): a rank stopped, hung or died, or the ranks were started with different "
                 "jobs; ending the job\n",
                 rank, group.c_str(), size, op, static_cast<double>(limit) / 1e3);
    std::fflush(stderr);
    std::_Exit(kCollectiveTimeoutExit);
  }
}

class MpiRequest final : public CommRequest {
 public:
  MpiRequest(const char* op, const MpiCommunicator& comm)
      : op_(op), group_(comm.name()), rank_(comm.rank()), size_(comm.size()) {}
  ~MpiRequest() override { wait(); }
  MpiRequest(const MpiRequest&) = delete;
  MpiRequest& operator=(const MpiRequest&) = delete;
  void wait() override {
    if (request_ != MPI_REQUEST_NULL) wait_or_time_out(&request_, op_, group_, rank_, size_);
  }
  bool done() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int flag = 0;
    MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);  // frees the request (MPI_REQUEST_NULL) when complete
    return flag != 0;
  }
  MPI_Request* handle() { return &request_; }

 private:
  const char* op_;
  std::string group_;  // copied: a request may outlive its communicator's object
  int rank_, size_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

int count_of(std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX)) throw std::length_error("MPI message over 2^31 elements");
  return static_cast<int>(n);
}

MPI_Op op_of(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

MPI_Datatype type_of(StorageDtype t) { return t == StorageDtype::fp32 ? MPI_FLOAT : MPI_UINT16_T; }

// inout[i] ← in[i] ∘ inout[i] in fp32, rounded to the 16-bit type.
template <StorageDtype T, bool Max>
void reduce16(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = 0, y = 0;
    convert_host(&x, StorageDtype::fp32, a + i, T, 1);
    convert_host(&y, StorageDtype::fp32, b + i, T, 1);
    const float r = Max ? (x > y ? x : y) : x + y;
    convert_host(b + i, T, &r, StorageDtype::fp32, 1);
  }
}

// The four user-defined ops, created once after MPI_Init (and left to MPI_Finalize).
MPI_Op op_of(ReduceOp op, StorageDtype t) {
  if (t == StorageDtype::fp32) return op_of(op);
  struct Ops {
    MPI_Op bf16_sum, bf16_max, fp16_sum, fp16_max;
    Ops() {
      MPI_Op_create(&reduce16<StorageDtype::bf16, false>, 1, &bf16_sum);
      MPI_Op_create(&reduce16<StorageDtype::bf16, true>, 1, &bf16_max);
      MPI_Op_create(&reduce16<StorageDtype::fp16, false>, 1, &fp16_sum);
      MPI_Op_create(&reduce16<StorageDtype::fp16, true>, 1, &fp16_max);
    }
  };
  static const Ops ops;
  const bool max = op == ReduceOp::max;
  if (t == StorageDtype::bf16) return max ? ops.bf16_max : ops.bf16_sum;
  return max ? ops.fp16_max : ops.fp16_sum;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, bool owned)
    : Communicator(std::move(name)), comm_(comm), owned_(owned) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  if (owned_) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, "world", false);
}

void set_collective_timeout(std::chrono::milliseconds timeout) { g_timeout_ms.store(timeout.count()); }

void MpiCommunicator::all_reduce_doubles(double* buf, std::size_t n, ReduceOp op) {
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, buf, count_of(n), MPI_DOUBLE, op_of(op), comm_, &r);
  wait_or_time_out(&r, "all_reduce_doubles", name(), rank_, size_);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key, const std::string& name) {
  MPI_Comm out = MPI_COMM_NULL;
  MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out);
  if (out == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiCommunicator>(out, name, true);
}

RequestPtr MpiCommunicator::start_all_reduce(TensorRef buf, std::size_t n, ReduceOp op) {
  auto r = std::make_unique<MpiRequest>("all_reduce", *this);
  MPI_Iallreduce(MPI_IN_PLACE, buf.ptr, count_of(n), type_of(buf.dtype), op_of(op, buf.dtype), comm_, r->handle());
  return r;
}

RequestPtr MpiCommunicator::start_reduce_scatter(ConstTensorRef send, TensorRef recv, std::size_t count) {
  auto r = std::make_unique<MpiRequest>("reduce_scatter", *this);
  MPI_Ireduce_scatter_block(send.ptr, recv.ptr, count_of(count), type_of(recv.dtype),
                            op_of(ReduceOp::sum, recv.dtype), comm_, r->handle());
  return r;
}

RequestPtr MpiCommunicator::start_all_gather(ConstTensorRef send, TensorRef recv, std::size_t count) {
  auto r = std::make_unique<MpiRequest>("all_gather", *this);
  const bool in_place = send.ptr == (recv + static_cast<std::size_t>(rank_) * count).ptr;
  const MPI_Datatype t = type_of(recv.dtype);
  MPI_Iallgather(in_place ? MPI_IN_PLACE : send.ptr, count_of(count), t, recv.ptr, count_of(count), t, comm_,
                 r->handle());
  return r;
}

RequestPtr MpiCommunicator::start_broadcast(TensorRef buf, std::size_t n, int root) {
  auto r = std::make_unique<MpiRequest>("broadcast", *this);
  MPI_Ibcast(buf.ptr, count_of(n), type_of(buf.dtype), root, comm_, r->handle());
  return r;
}

RequestPtr MpiCommunicator::start_send(ConstTensorRef buf, std::size_t n, int peer, int tag) {
  auto r = std::make_unique<MpiRequest>("send", *this);
  MPI_Isend(buf.ptr, count_of(n), type_of(buf.dtype), peer, tag, comm_, r->handle());
  return r;
}

RequestPtr MpiCommunicator::start_recv(TensorRef buf, std::size_t n, int peer, int tag) {
  auto r = std::make_unique<MpiRequest>("recv", *this);
  MPI_Irecv(buf.ptr, count_of(n), type_of(buf.dtype), peer, tag, comm_, r->handle());
  return r;
}

void MpiCommunicator::barrier_impl() {
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Ibarrier(comm_, &r);
  wait_or_time_out(&r, "barrier", name(), rank_, size_);
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
}

MpiSession::~MpiSession() { MPI_Finalize(); }

void abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; should it, this rank still ends
}

}  // namespace ztune::executor
