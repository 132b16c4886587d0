// Every collective of MpiCommunicator against a serial reference computed on each
// rank from closed-form inputs: rank r holds x_r[i] = (r + 1)·(i mod 7) + i/4,
// exactly representable, so sums over ≤ 4 ranks are exact in fp32.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "ztune/executor/mpi_communicator.hpp"

using namespace ztune::executor;
using ztune::Collective;

namespace {
float value(int rank, std::size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 7)) + static_cast<float>(i) / 4.0f; }
std::vector<float> input(int rank, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value(rank, i);
  return v;
}
}  // namespace

TEST_CASE("all-reduce sum and max, sync and async", "[mpi][comm]") {
  auto world = MpiCommunicator::world();
  const int n = world->size();
  const std::size_t len = 1003;
  auto a = input(world->rank(), len);
  world->all_reduce(a.data(), len);
  auto b = input(world->rank(), len);
  auto req = world->all_reduce_async(b.data(), len, ReduceOp::max);
  req->wait();
  int wrong = 0;
  for (std::size_t i = 0; i < len; ++i) {
    float sum = 0, mx = value(0, i);
    for (int r = 0; r < n; ++r) {
      sum += value(r, i);
      mx = std::max(mx, value(r, i));
    }
    wrong += a[i] != sum;
    wrong += b[i] != mx;
  }
  CHECK(wrong == 0);
  const auto& t = world->stats().total(Collective::all_reduce);
  CHECK(t.count == 2);
  CHECK(t.bytes == 2.0 * len * 4);
}

TEST_CASE("reduce-scatter gives each rank its block of the sum", "[mpi][comm]") {
  auto world = MpiCommunicator::world();
  const int n = world->size();
  const std::size_t count = 257;
  auto send = input(world->rank(), count * n);
  std::vector<float> recv(count, -1.0f), recv2(count, -1.0f);
  world->reduce_scatter(send.data(), recv.data(), count);
  world->reduce_scatter_async(send.data(), recv2.data(), count)->wait();
  int wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < n; ++r) sum += value(r, world->rank() * count + i);
    wrong += recv[i] != sum;
    wrong += recv2[i] != sum;
  }
  CHECK(wrong == 0);
}

TEST_CASE("all-gather out of place and in place", "[mpi][comm]") {
  auto world = MpiCommunicator::world();
  const int n = world->size(), me = world->rank();
  const std::size_t count = 129;
  auto mine = input(me, count);
  std::vector<float> out(count * n, -1.0f), inplace(count * n, -1.0f);
  world->all_gather(mine.data(), out.data(), count);
  std::copy(mine.begin(), mine.end(), inplace.begin() + static_cast<long>(me * count));
  world->all_gather_async(inplace.data() + me * count, inplace.data(), count)->wait();
  int wrong = 0;
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i) {
      wrong += out[r * count + i] != value(r, i);
      wrong += inplace[r * count + i] != value(r, i);
    }
  CHECK(wrong == 0);
  // nccl-tests' S for all-gather is the gathered array.
  CHECK(world->stats().total(Collective::all_gather).bytes == 2.0 * count * n * 4);
}

TEST_CASE("broadcast from every root", "[mpi][comm]") {
  auto world = MpiCommunicator::world();
  for (int root = 0; root < world->size(); ++root) {
    auto v = input(world->rank(), 77);
    if (root % 2 == 0) {
      world->broadcast(v.data(), v.size(), root);
    } else {
      world->broadcast_async(v.data(), v.size(), root)->wait();
    }
    CHECK(v == input(root, 77));
  }
}

TEST_CASE("send/recv around a ring, sync and async, barrier", "[mpi][comm]") {
  auto world = MpiCommunicator::world();
  const int n = world->size(), me = world->rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  auto mine = input(me, 300);
  std::vector<float> got(300, -1.0f);
  // Async send first so that the ring cannot deadlock, then a blocking recv.
  auto s = world->send_async(mine.data(), mine.size(), next, 7);
  world->recv(got.data(), got.size(), prev, 7);
  s->wait();
  CHECK(got == input(prev, 300));
  std::vector<float> got2(300, -1.0f);
  auto r = world->recv_async(got2.data(), got2.size(), next, 8);
  world->send(mine.data(), mine.size(), prev, 8);
  r->wait();
  CHECK(got2 == input(next, 300));
  world->barrier();
  CHECK(world->stats().total(Collective::send).count == 2);
}

TEST_CASE("bus factors are nccl-tests'", "[comm]") {
  CHECK(bus_factor(Collective::all_reduce, 4) == Approx(1.5));
  CHECK(bus_factor(Collective::reduce_scatter, 4) == Approx(0.75));
  CHECK(bus_factor(Collective::all_gather, 8) == Approx(0.875));
  CHECK(bus_factor(Collective::broadcast, 8) == 1.0);
}
