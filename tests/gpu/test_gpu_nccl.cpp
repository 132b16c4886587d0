// NcclCommunicator on n ranks (n = 1 on one GPU, more under mpirun with a GPU per
// rank), with inputs whose results are known in closed form (nccl-tests'
// verifiable data): rank r contributes r + 1 (+ i/1024 at element i).
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cuda_runtime.h>

#include <vector>

#include "gpu_support.hpp"
#include "ztune/executor/cuda/nccl_communicator.hpp"
#include "ztune/executor/mpi_communicator.hpp"

using namespace ztune::executor;
using ztune::Collective;
using ztune::test::DeviceArray;
using ztune::test::mismatches;

namespace {

struct World {
  std::unique_ptr<MpiCommunicator> mpi = MpiCommunicator::world();
  cudaStream_t compute = nullptr;
  std::unique_ptr<cuda::NcclCommunicator> nccl;
  World() {
    int device = 0;
    ZT_CUDA_CHECK(cudaGetDevice(&device));
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    nccl = cuda::NcclCommunicator::create(*mpi, device, compute);
  }
  ~World() {
    nccl.reset();
    cudaStreamDestroy(compute);
  }
};

std::vector<float> contribution(int rank, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(rank + 1) + static_cast<float>(i % 1024) / 1024.0f;
  return v;
}

}  // namespace

TEST_CASE("NCCL collectives give the closed-form results", "[gpu][nccl]") {
  World w;
  Communicator& c = *w.nccl;
  const int n = c.size(), r = c.rank();
  const std::size_t count = 1000003;  // odd, per rank
  const double sum_ranks = n * (n + 1) / 2.0;

  // all_reduce (sum, async then wait) and max.
  DeviceArray<float> buf(contribution(r, count));
  auto req = c.all_reduce_async(buf.get(), count);
  req->wait();
  std::vector<float> expect(count);
  for (std::size_t i = 0; i < count; ++i) expect[i] = static_cast<float>(sum_ranks + n * (static_cast<double>(i % 1024) / 1024.0));
  CHECK(mismatches("all_reduce", buf.download(), expect, 1e-5f, 1e-6f) == 0);
  buf.upload(contribution(r, count));
  c.all_reduce(buf.get(), count, ReduceOp::max);
  CHECK(mismatches("all_reduce max", buf.download(), contribution(n - 1, count), 0.0f, 0.0f) == 0);

  // reduce_scatter: rank r receives the sum of everyone's piece r.
  DeviceArray<float> whole(contribution(r, count * n)), piece(count);
  c.reduce_scatter(whole.get(), piece.get(), count);
  std::vector<float> rs(count);
  for (std::size_t i = 0; i < count; ++i)
    rs[i] = static_cast<float>(sum_ranks + n * (static_cast<double>((r * count + i) % 1024) / 1024.0));
  CHECK(mismatches("reduce_scatter", piece.download(), rs, 1e-5f, 1e-6f) == 0);

  // all_gather: piece k of the result is rank k's contribution.
  DeviceArray<float> mine(contribution(r, count)), gathered(count * n);
  c.all_gather(mine.get(), gathered.get(), count);
  std::vector<float> ag;
  for (int k = 0; k < n; ++k) {
    auto part = contribution(k, count);
    ag.insert(ag.end(), part.begin(), part.end());
  }
  CHECK(mismatches("all_gather", gathered.download(), ag, 0.0f, 0.0f) == 0);

  // broadcast from the last rank.
  DeviceArray<float> b(contribution(r, count));
  c.broadcast(b.get(), count, n - 1);
  CHECK(mismatches("broadcast", b.download(), contribution(n - 1, count), 0.0f, 0.0f) == 0);

  // Doubles (host buffer) and a barrier.
  std::vector<double> d{static_cast<double>(r + 1), 1.0};
  c.all_reduce_doubles(d.data(), d.size(), ReduceOp::sum);
  CHECK(d[0] == sum_ranks);
  CHECK(d[1] == n);
  c.barrier();

  // Stats: nccl-tests' S (bytes of the whole array).
  CHECK(c.stats().total(Collective::all_reduce).count == 2);
  CHECK(c.stats().total(Collective::all_gather).bytes == static_cast<double>(count * n * sizeof(float)));
}

TEST_CASE("NCCL ring send/recv and split groups", "[gpu][nccl]") {
  World w;
  Communicator& c = *w.nccl;
  const int n = c.size(), r = c.rank();
  const std::size_t count = 4096;
  if (n > 1) {
    DeviceArray<float> out(contribution(r, count)), in(count);
    // Post the receive first: both are asynchronous, NCCL pairs them by peer.
    auto rq = c.recv_async(in.get(), count, (r + n - 1) % n, 0);
    auto sq = c.send_async(out.get(), count, (r + 1) % n, 0);
    sq->wait();
    rq->wait();
    CHECK(mismatches("ring recv", in.download(), contribution((r + n - 1) % n, count), 0.0f, 0.0f) == 0);
  }
  // Even and odd ranks; the group's rank order follows the key (reversed here).
  auto sub = c.split(r % 2, n - r, "parity");
  REQUIRE(sub != nullptr);
  const int members = (n + 1 - r % 2) / 2;
  CHECK(sub->size() == members);
  CHECK(sub->name() == "parity");
  std::vector<double> d{static_cast<double>(r)};
  sub->all_reduce_doubles(d.data(), 1, ReduceOp::sum);
  double expect = 0;
  for (int k = r % 2; k < n; k += 2) expect += k;
  CHECK(d[0] == expect);
  // A negative color takes no part.
  auto none = c.split(r == 0 ? -1 : 0, r, "without rank 0");
  CHECK((r == 0) == (none == nullptr));
}
