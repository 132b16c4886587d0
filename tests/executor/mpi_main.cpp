// main() of the MPI test executables: every rank runs the same Catch2 session;
// the exit code is the largest over ranks so mpirun fails when any rank failed.
// Only rank 0 prints unless ZTUNE_TEST_ALL_RANKS is set.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0 && std::getenv("ZTUNE_TEST_ALL_RANKS") == nullptr) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
  }
  int failed = Catch::Session().run(argc, argv);
  int worst = 0;
  MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed != 0) std::fprintf(stderr, "rank %d: %d failed assertion group(s)\n", rank, failed);
  MPI_Finalize();
  return worst;
}
