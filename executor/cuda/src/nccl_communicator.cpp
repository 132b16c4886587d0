#include "ztune/executor/cuda/nccl_communicator.hpp"

#include <cuda_runtime.h>

#include <stdexcept>

#include "ztune/executor/mpi_communicator.hpp"
#include "ztune/kernels/cuda/check.hpp"

namespace ztune::executor::cuda {

namespace {

void check_nccl(ncclResult_t r, ncclComm_t comm, const char* what, const char* where) {
  if (r == ncclSuccess) return;
  std::string detail = ncclGetLastError(comm) != nullptr ? ncclGetLastError(comm) : "";
  throw kernels::cuda::CudaError(std::string(where) + ": " + what + " failed: " + ncclGetErrorString(r) +
                                 (detail.empty() ? "" : " (" + detail + ")"));
}
#define ZT_NCCL_CHECK(comm, call) check_nccl((call), (comm), #call, ZT_WHERE)

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::max ? ncclMax : ncclSum; }

cudaEvent_t new_event() {
  cudaEvent_t e = nullptr;
  ZT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

// Completion of one NCCL operation: wait() blocks the host on its event (the
// watchdog ends the job if it never comes) and orders the compute stream after it.
class NcclRequest final : public CommRequest {
 public:
  NcclRequest(cudaEvent_t done, cudaStream_t compute, std::string what, NcclWatchdog& watchdog, ncclComm_t comm)
      : done_(done), compute_(compute), what_(std::move(what)), watchdog_(watchdog), comm_(comm) {}
  ~NcclRequest() override {
    if (!waited_) cudaEventSynchronize(done_);  // destructors must not throw
    cudaEventDestroy(done_);
  }
  NcclRequest(const NcclRequest&) = delete;
  NcclRequest& operator=(const NcclRequest&) = delete;
  void wait() override {
    if (waited_) return;
    waited_ = true;
    ZT_CUDA_CHECK(cudaEventSynchronize(done_));
    if (watchdog_.aborted(comm_)) throw kernels::cuda::CudaError(what_ + ": the communicator was aborted");
    ZT_CUDA_CHECK(cudaStreamWaitEvent(compute_, done_, 0));
  }
  bool done() override {
    if (waited_) return true;
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaErrorNotReady) return false;
    ZT_CUDA_CHECK(e);
    wait();
    return true;
  }

 private:
  cudaEvent_t done_;
  cudaStream_t compute_;
  std::string what_;
  NcclWatchdog& watchdog_;
  ncclComm_t comm_;
  bool waited_ = false;
};

}  // namespace

struct NcclCommunicator::Shared {
  int device = 0;
  int world_rank = 0;
  cudaStream_t compute = nullptr;
  std::unique_ptr<NcclWatchdog> watchdog;
};

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(MpiCommunicator& world, int device,
                                                           cudaStream_t compute_stream, const NcclOptions& options) {
  ZT_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id{};
  if (world.rank() == 0) ZT_NCCL_CHECK(nullptr, ncclGetUniqueId(&id));
  if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, world.handle()) != MPI_SUCCESS)
    throw std::runtime_error("NcclCommunicator: MPI_Bcast of the NCCL unique id failed");
  ncclComm_t comm = nullptr;
  ZT_NCCL_CHECK(nullptr, ncclCommInitRank(&comm, world.size(), id, world.rank()));
  auto shared = std::make_shared<Shared>();
  shared->device = device;
  shared->world_rank = world.rank();
  shared->compute = compute_stream;
  shared->watchdog = std::make_unique<NcclWatchdog>(device, options.timeout, options.on_timeout);
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(comm, "world", std::move(shared)));
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, std::string name, std::shared_ptr<Shared> shared)
    : Communicator(std::move(name)), comm_(comm), shared_(std::move(shared)) {
  ZT_NCCL_CHECK(comm_, ncclCommUserRank(comm_, &rank_));
  ZT_NCCL_CHECK(comm_, ncclCommCount(comm_, &size_));
  world_rank_ = shared_->world_rank;
  ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

NcclCommunicator::~NcclCommunicator() {
  cudaStreamSynchronize(stream_);
  const bool aborted = shared_->watchdog->aborted(comm_);
  shared_->watchdog->forget_comm(comm_);
  if (!aborted) ncclCommDestroy(comm_);
  cudaStreamDestroy(stream_);
}

void NcclCommunicator::before_launch(const char* what) {
  if (shared_->watchdog->aborted(comm_))
    throw kernels::cuda::CudaError(std::string("NCCL ") + what + " on group '" + name() + "': communicator aborted");
  // The input was produced on the compute stream: order this stream after it.
  cudaEvent_t ready = new_event();
  ZT_CUDA_CHECK(cudaEventRecord(ready, shared_->compute));
  ZT_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready, 0));
  ZT_CUDA_CHECK(cudaEventDestroy(ready));  // destruction is deferred until the event completes
}

RequestPtr NcclCommunicator::after_launch(const char* what, std::size_t n) {
  const std::string label = std::string("rank ") + std::to_string(world_rank_) + ": NCCL " + what + " of " +
                            std::to_string(n) + " elements on group '" + name() + "' (group rank " +
                            std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  cudaEvent_t done = new_event(), watched = new_event();
  ZT_CUDA_CHECK(cudaEventRecord(done, stream_));
  ZT_CUDA_CHECK(cudaEventRecord(watched, stream_));
  shared_->watchdog->watch(comm_, watched, label);
  return std::make_unique<NcclRequest>(done, shared_->compute, label, *shared_->watchdog, comm_);
}

namespace {
// NCCL's own 16-bit types: its kernels add in fp32 and round each step's result.
ncclDataType_t nccl_type(StorageDtype t) {
  return t == StorageDtype::bf16 ? ncclBfloat16 : t == StorageDtype::fp16 ? ncclFloat16 : ncclFloat;
}
}  // namespace

RequestPtr NcclCommunicator::start_all_reduce(TensorRef buf, std::size_t n, ReduceOp op) {
  before_launch("all_reduce");
  ZT_NCCL_CHECK(comm_, ncclAllReduce(buf.ptr, buf.ptr, n, nccl_type(buf.dtype), nccl_op(op), comm_, stream_));
  return after_launch("all_reduce", n);
}

RequestPtr NcclCommunicator::start_reduce_scatter(ConstTensorRef send, TensorRef recv, std::size_t count) {
  before_launch("reduce_scatter");
  ZT_NCCL_CHECK(comm_, ncclReduceScatter(send.ptr, recv.ptr, count, nccl_type(recv.dtype), ncclSum, comm_, stream_));
  return after_launch("reduce_scatter", count);
}

RequestPtr NcclCommunicator::start_all_gather(ConstTensorRef send, TensorRef recv, std::size_t count) {
  before_launch("all_gather");
  ZT_NCCL_CHECK(comm_, ncclAllGather(send.ptr, recv.ptr, count, nccl_type(recv.dtype), comm_, stream_));
  return after_launch("all_gather", count);
}

RequestPtr NcclCommunicator::start_broadcast(TensorRef buf, std::size_t n, int root) {
  before_launch("broadcast");
  ZT_NCCL_CHECK(comm_, ncclBroadcast(buf.ptr, buf.ptr, n, nccl_type(buf.dtype), root, comm_, stream_));
  return after_launch("broadcast", n);
}

RequestPtr NcclCommunicator::start_send(ConstTensorRef buf, std::size_t n, int peer, int tag) {
  ZT_REQUIRE(tag >= 0 && peer >= 0 && peer < size_, "NcclCommunicator::send: bad peer or tag");
  before_launch("send");
  ZT_NCCL_CHECK(comm_, ncclSend(buf.ptr, n, nccl_type(buf.dtype), peer, comm_, stream_));
  return after_launch("send", n);
}

RequestPtr NcclCommunicator::start_recv(TensorRef buf, std::size_t n, int peer, int tag) {
  ZT_REQUIRE(tag >= 0 && peer >= 0 && peer < size_, "NcclCommunicator::recv: bad peer or tag");
  before_launch("recv");
  ZT_NCCL_CHECK(comm_, ncclRecv(buf.ptr, n, nccl_type(buf.dtype), peer, comm_, stream_));
  return after_launch("recv", n);
}

void NcclCommunicator::barrier_impl() {
  float* d = nullptr;
  ZT_CUDA_CHECK(cudaMallocAsync(&d, sizeof(float), stream_));
  ZT_CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(float), stream_));
  before_launch("barrier");
  ZT_NCCL_CHECK(comm_, ncclAllReduce(d, d, 1, ncclFloat, ncclSum, comm_, stream_));
  auto req = after_launch("barrier", 1);
  ZT_CUDA_CHECK(cudaFreeAsync(d, stream_));
  req->wait();
}

void NcclCommunicator::all_reduce_doubles(double* buf, std::size_t n, ReduceOp op) {
  if (n == 0) return;
  cudaPointerAttributes attr{};
  ZT_CUDA_CHECK(cudaPointerGetAttributes(&attr, buf));
  const bool on_device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  double* d = buf;
  if (!on_device) {
    ZT_CUDA_CHECK(cudaMallocAsync(&d, n * sizeof(double), stream_));
    ZT_CUDA_CHECK(cudaMemcpyAsync(d, buf, n * sizeof(double), cudaMemcpyHostToDevice, stream_));
  }
  before_launch("all_reduce (doubles)");
  ZT_NCCL_CHECK(comm_, ncclAllReduce(d, d, n, ncclDouble, nccl_op(op), comm_, stream_));
  auto req = after_launch("all_reduce (doubles)", n);
  if (!on_device) {
    ZT_CUDA_CHECK(cudaMemcpyAsync(buf, d, n * sizeof(double), cudaMemcpyDeviceToHost, stream_));
    ZT_CUDA_CHECK(cudaFreeAsync(d, stream_));
  }
  req->wait();
  ZT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the copy back to the host buffer
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key, const std::string& name) {
  ncclComm_t sub = nullptr;
  ZT_NCCL_CHECK(comm_, ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr));
  if (sub == nullptr) return nullptr;
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(sub, name, shared_));
}

}  // namespace ztune::executor::cuda
