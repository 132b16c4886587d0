// main() of the NCCL tests: MPI first (the NCCL id travels over it), then exit 77
// on every rank when there are fewer CUDA devices than ranks on this node (one GPU
// per rank; NCCL refuses two ranks on one device), else one Catch2 session per
// rank with rank r on device r % devices; the exit code is the worst over ranks.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "ztune/kernels/cuda/check.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  const int devices = ztune::kernels::cuda::device_count();
  if (devices < local_size) {
    if (rank == 0)
      std::printf("%d CUDA device(s) for %d rank(s) on this node: test skipped (exit 77)\n", devices, local_size);
    MPI_Finalize();
    return 77;
  }
  if (cudaSetDevice(local_rank) != cudaSuccess) return 1;
  if (rank != 0 && std::getenv("ZTUNE_TEST_ALL_RANKS") == nullptr) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
  }
  int failed = Catch::Session().run(argc, argv);
  int worst = 0;
  MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
