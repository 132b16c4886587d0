#include "ztune/executor/cuda/gpu_rank.hpp"

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <stdexcept>

namespace ztune::executor::cuda {

GemmPrecision gemm_precision_for(Precision p) {
  switch (p) {
    case Precision::bf16: return GemmPrecision::bf16;
    case Precision::fp16: return GemmPrecision::fp16;
    case Precision::fp32: break;
  }
  return GemmPrecision::fp32;
}

int local_rank(MpiCommunicator& world) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node);
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
}

GpuRank make_gpu_rank(MpiCommunicator& world, GemmPrecision gemm) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  // Every rank learns whether all have a device before NCCL's collective
  // set-up, so a node without one fails the job instead of hanging it.
  double without = devices == 0 ? 1.0 : 0.0;  // ranks whose node has no device
  world.all_reduce_doubles(&without, 1, ReduceOp::max);
  if (devices == 0) throw std::runtime_error("no CUDA device on this node");
  if (without > 0) throw std::runtime_error("another rank's node has no CUDA device");
  GpuRank r;
  r.device = local_rank(world) % devices;
  r.backend = std::make_unique<CudaBackend>(CudaBackendOptions{r.device, gemm});
  r.comm = NcclCommunicator::create(world, r.device, r.backend->compute_stream());
  return r;
}

}  // namespace ztune::executor::cuda
