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

TEST_CASE("16-bit payloads: reductions in fp32 rounded to the type, gathers and messages by value", "[mpi][comm]") {
  auto world = MpiCommunicator::world();
  const int n = world->size(), me = world->rank();
  // (r + 1)·(i mod 7) and its sums over ≤ 4 ranks are small integers: exact in
  // bf16 and fp16, so the serial reference is exact. The last element adds
  // 2⁻⁹ to 1 on every rank: each partial sum rounds to the type.
  const std::size_t len = 301;
  for (StorageDtype d : {StorageDtype::bf16, StorageDtype::fp16}) {
    auto in = [&](int r) {
      std::vector<float> v(len);
      for (std::size_t i = 0; i < len; ++i) v[i] = static_cast<float>((r + 1) * static_cast<int>(i % 7));
      v[len - 1] = 1.0f + 0x1p-9f;
      return v;
    };
    auto to16 = [&](const std::vector<float>& v) {
      std::vector<std::uint16_t> h(v.size());
      convert_host(h.data(), d, v.data(), StorageDtype::fp32, v.size());
      return h;
    };
    auto to32 = [&](const std::vector<std::uint16_t>& h) {
      std::vector<float> v(h.size());
      convert_host(v.data(), StorageDtype::fp32, h.data(), d, h.size());
      return v;
    };
    auto sum = to16(in(me)), mx = to16(in(me));
    world->all_reduce(TensorRef(sum.data(), d), len);
    world->all_reduce(TensorRef(mx.data(), d), len, ReduceOp::max);
    const auto s32 = to32(sum), m32 = to32(mx);
    int wrong = 0;
    for (std::size_t i = 0; i + 1 < len; ++i) {
      float ref = 0;
      for (int r = 0; r < n; ++r) ref += static_cast<float>((r + 1) * static_cast<int>(i % 7));
      wrong += s32[i] != ref;
      wrong += m32[i] != static_cast<float>(n * static_cast<int>(i % 7));
    }
    CHECK(wrong == 0);
    // 1 + 2⁻⁹ is stored as 1 in bf16 (7 mantissa bits), so the sum is n; fp16 (10 bits)
    // keeps it, and every partial sum k·(1 + 2⁻⁹) for k ≤ 4 is on fp16's grid.
    CHECK(s32[len - 1] == static_cast<float>(n) * (d == StorageDtype::bf16 ? 1.0f : 1.0f + 0x1p-9f));
    // Reduce-scatter, all-gather and point-to-point of the same payloads.
    std::vector<std::uint16_t> send = to16(in(me)), block(len / static_cast<std::size_t>(n) + 1);
    const std::size_t count = len / static_cast<std::size_t>(n);
    world->reduce_scatter(ConstTensorRef(send.data(), d), TensorRef(block.data(), d), count);
    const auto b32 = to32(block);
    for (std::size_t i = 0; i < count; ++i) {
      float ref = 0;
      const std::size_t g = static_cast<std::size_t>(me) * count + i;
      for (int r = 0; r < n; ++r) ref += static_cast<float>((r + 1) * static_cast<int>(g % 7));
      wrong += b32[i] != ref;
    }
    std::vector<std::uint16_t> gathered(count * static_cast<std::size_t>(n));
    world->all_gather(ConstTensorRef(send.data(), d), TensorRef(gathered.data(), d), count);
    const auto g32 = to32(gathered);
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < count; ++i) wrong += g32[static_cast<std::size_t>(r) * count + i] != in(r)[i];
    CHECK(wrong == 0);
    std::vector<float> fp32_recv(count * static_cast<std::size_t>(n));
    CHECK_THROWS_WITH(world->all_gather(ConstTensorRef(send.data(), d), fp32_recv.data(), count),
                      Catch::Contains("one type for both"));
  }
  CHECK(world->stats().total(Collective::all_reduce).bytes == 2.0 * 2 * len * 2);
}
