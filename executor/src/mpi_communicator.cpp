#include "ztune/executor/mpi_communicator.hpp"

#include <climits>
#include <stdexcept>

namespace ztune::executor {
namespace {

class MpiRequest final : public CommRequest {
 public:
  MpiRequest() = default;
  ~MpiRequest() override { wait(); }
  MpiRequest(const MpiRequest&) = delete;
  MpiRequest& operator=(const MpiRequest&) = delete;
  void wait() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  bool done() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int flag = 0;
    MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);  // frees the request (MPI_REQUEST_NULL) when complete
    return flag != 0;
  }
  MPI_Request* handle() { return &request_; }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
};

int count_of(std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX)) throw std::length_error("MPI message over 2^31 elements");
  return static_cast<int>(n);
}

MPI_Op op_of(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

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

void MpiCommunicator::all_reduce_doubles(double* buf, std::size_t n, ReduceOp op) {
  MPI_Allreduce(MPI_IN_PLACE, buf, count_of(n), MPI_DOUBLE, op_of(op), comm_);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key, const std::string& name) {
  MPI_Comm out = MPI_COMM_NULL;
  MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out);
  if (out == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiCommunicator>(out, name, true);
}

RequestPtr MpiCommunicator::start_all_reduce(float* buf, std::size_t n, ReduceOp op) {
  auto r = std::make_unique<MpiRequest>();
  MPI_Iallreduce(MPI_IN_PLACE, buf, count_of(n), MPI_FLOAT, op_of(op), comm_, r->handle());
  return r;
}

RequestPtr MpiCommunicator::start_reduce_scatter(const float* send, float* recv, std::size_t count) {
  auto r = std::make_unique<MpiRequest>();
  MPI_Ireduce_scatter_block(send, recv, count_of(count), MPI_FLOAT, MPI_SUM, comm_, r->handle());
  return r;
}

RequestPtr MpiCommunicator::start_all_gather(const float* send, float* recv, std::size_t count) {
  auto r = std::make_unique<MpiRequest>();
  const bool in_place = send == recv + static_cast<std::size_t>(rank_) * count;
  MPI_Iallgather(in_place ? MPI_IN_PLACE : send, count_of(count), MPI_FLOAT, recv, count_of(count), MPI_FLOAT, comm_,
                 r->handle());
  return r;
}

RequestPtr MpiCommunicator::start_broadcast(float* buf, std::size_t n, int root) {
  auto r = std::make_unique<MpiRequest>();
  MPI_Ibcast(buf, count_of(n), MPI_FLOAT, root, comm_, r->handle());
  return r;
}

RequestPtr MpiCommunicator::start_send(const float* buf, std::size_t n, int peer, int tag) {
  auto r = std::make_unique<MpiRequest>();
  MPI_Isend(buf, count_of(n), MPI_FLOAT, peer, tag, comm_, r->handle());
  return r;
}

RequestPtr MpiCommunicator::start_recv(float* buf, std::size_t n, int peer, int tag) {
  auto r = std::make_unique<MpiRequest>();
  MPI_Irecv(buf, count_of(n), MPI_FLOAT, peer, tag, comm_, r->handle());
  return r;
}

void MpiCommunicator::barrier_impl() { MPI_Barrier(comm_); }

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
}

MpiSession::~MpiSession() { MPI_Finalize(); }

}  // namespace ztune::executor
