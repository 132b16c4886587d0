#pragma once
// One MPI rank's GPU: the device of its local rank (modulo the node's devices),
// a CudaBackend on it and an NcclCommunicator over the MPI world, bootstrapped
// over MPI. Shared by ztune-worker and ztune-calibrate-worker (--backend cuda).
#include <memory>

#include "ztune/executor/cuda/cuda_backend.hpp"
#include "ztune/executor/cuda/nccl_communicator.hpp"
#include "ztune/executor/mpi_communicator.hpp"
#include "ztune/vocab/cluster.hpp"

namespace ztune::executor::cuda {

struct GpuRank {
  int device = 0;
  std::unique_ptr<CudaBackend> backend;
  std::unique_ptr<NcclCommunicator> comm;  // over the whole MPI world
};

/// The GEMM precision of a plan's precision (16-bit operands, fp32 accumulation).
GemmPrecision gemm_precision_for(Precision p);

/// This rank's index among the ranks of its node (MPI_COMM_TYPE_SHARED).
int local_rank(MpiCommunicator& world);

/// Collective over `world`. Throws std::runtime_error on every rank when any
/// rank's node has no CUDA device ("no CUDA device on this node" there).
GpuRank make_gpu_rank(MpiCommunicator& world, GemmPrecision gemm);

}  // namespace ztune::executor::cuda
