// DeepSpeed-Ulysses' attention on 4 and 2 MPI ranks against the single-rank
// causal attention of the whole sequence (kernels/attention.hpp through the
// CPU backend), the independent oracle: every rank draws the same qkv and
// output gradient for all T rows and keeps its contiguous L = T/u rows. The
// forward all-to-all alone must give each rank exactly the whole sequence of
// its heads (a pure permutation: equal bit for bit); the output and the rows'
// dQ, dK and dV must be the reference's rows within 2e-5 × max|reference|
// (the same sums in the same order per head, so in practice equal).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ztune/executor/cpu_backend.hpp"
#include "ztune/executor/mpi_communicator.hpp"
#include "ztune/executor/ulysses_attention.hpp"
#include "attention_oracle.hpp"

using namespace ztune::executor;
using ztune::Collective;

namespace {

using test::AttentionOracle;
using test::max_abs;

void check_ulysses(Communicator& group, bool flash) {
  constexpr int B = 2, T = 32, NH = 4, HD = 8, C = NH * HD;
  const int U = group.size(), r = group.rank(), L = T / U, NHu = NH / U, Cu = C / U;
  INFO("ulysses " << U << " rank " << r << (flash ? " flash" : " standard"));
  CpuBackend be(1);
  const AttentionOracle oracle(be, B, T, NH, HD, 13);
  const std::vector<float>& qkv = oracle.qkv;
  // This rank's rows [r·L, (r+1)·L).
  const auto pos_of = [&](int i) { return r * L + i; };
  const std::vector<float> lq = oracle.rows(oracle.qkv, L, 3 * C, pos_of), ld = oracle.rows(oracle.dout, L, C, pos_of);
  UlyssesAttention ua(group, be, B, T, C, NH, flash);
  // The layout transform: rank r gets Q, K, V of heads [r·NH/u, (r+1)·NH/u) for all T rows.
  std::vector<float> full(static_cast<std::size_t>(B) * T * 3 * Cu);
  ua.scatter_heads(lq.data(), full.data());
  int bad = 0;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int part = 0; part < 3; ++part)
        for (int x = 0; x < Cu; ++x) {
          const float got = full[(static_cast<std::size_t>(b) * T + t) * 3 * Cu + part * Cu + x];
          const float want = qkv[(static_cast<std::size_t>(b) * T + t) * 3 * C + part * C + r * Cu + x];
          if (got != want && ++bad <= 10) FAIL_CHECK("scatter b" << b << " t" << t << " part " << part << ": " << got << " vs " << want);
        }
  CHECK(ua.state_elems() == Backend::attention_state_elems(B, T, NHu, flash) + static_cast<std::size_t>(B) * T * 4 * Cu);
  std::vector<float> out(ld.size()), state(ua.state_elems()), d(lq.size(), 0.0f);
  ua.forward(out.data(), state.data(), lq.data());
  ua.backward(d.data(), ld.data(), state.data());
  const std::vector<float>& ro = oracle.out;
  const std::vector<float>& rd = oracle.dqkv;
  const float tol_o = 2e-5f * max_abs(ro), tol_d = 2e-5f * max_abs(rd);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < L; ++i) {
      const int pos = r * L + i;
      for (int j = 0; j < C; ++j) {
        const float got = out[(static_cast<std::size_t>(b) * L + i) * C + j];
        const float want = ro[(static_cast<std::size_t>(b) * T + pos) * C + j];
        if (std::abs(got - want) > tol_o && ++bad <= 10) FAIL_CHECK("out b" << b << " pos " << pos << ": " << got << " vs " << want);
      }
      for (int j = 0; j < 3 * C; ++j) {
        const float got = d[(static_cast<std::size_t>(b) * L + i) * 3 * C + j];
        const float want = rd[(static_cast<std::size_t>(b) * T + pos) * 3 * C + j];
        if (std::abs(got - want) > tol_d && ++bad <= 10) FAIL_CHECK("dqkv b" << b << " pos " << pos << " ch " << j << ": " << got << " vs " << want);
      }
    }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("all_to_all: block r of every rank's buffer lands on rank r", "[mpi][ulysses]") {
  auto world = MpiCommunicator::world();
  const int n = world->size(), me = world->rank();
  constexpr std::size_t count = 3;
  std::vector<float> send(count * n), recv(count * n, -1.0f);
  // Closed form: element k of the block rank s sends to rank d is 100·s + 10·d + k.
  for (int d = 0; d < n; ++d)
    for (std::size_t k = 0; k < count; ++k) send[d * count + k] = static_cast<float>(100 * me + 10 * d + k);
  world->all_to_all(send.data(), recv.data(), count);
  for (int s = 0; s < n; ++s)
    for (std::size_t k = 0; k < count; ++k) CHECK(recv[s * count + k] == static_cast<float>(100 * s + 10 * me + k));
  CHECK(world->stats().total(Collective::all_to_all).count == 1);
  CHECK(world->stats().total(Collective::all_to_all).bytes == Approx(4.0 * count * n));
}

TEST_CASE("Ulysses attention over 4 and 2 ranks equals the whole sequence's attention", "[mpi][ulysses]") {
  auto world = MpiCommunicator::world();
  REQUIRE(world->size() == 4);
  for (bool flash : {false, true}) check_ulysses(*world, flash);
  auto pair = world->split(world->rank() / 2, world->rank(), "ulysses2");
  for (bool flash : {false, true}) check_ulysses(*pair, flash);
}
