// Ring attention (context parallelism) on 4 MPI ranks against the single-rank
// causal attention of the whole sequence (kernels/attention.hpp through the
// CPU backend), the independent oracle: every rank draws the same qkv and
// output gradient for all T rows, runs the ring on its two load-balanced
// chunks, and its output, its flash log-sum-exp or standard probabilities, and
// its rows' dQ, dK and dV must be the reference's rows at those positions.
// Tolerance 2e-5 × max|reference|: fp32 sums taken in another order (the
// ring merges cp partial softmaxes), ~1e-7 relative per operation over a few
// hundred terms.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ztune/executor/cpu_backend.hpp"
#include "ztune/executor/mpi_communicator.hpp"
#include "ztune/executor/ring_attention.hpp"
#include "attention_oracle.hpp"

using namespace ztune::executor;

namespace {

using test::AttentionOracle;
using test::max_abs;

void check_ring(Communicator& cp, bool flash) {
  constexpr int B = 2, T = 32, NH = 2, HD = 8, C = NH * HD;
  const int P = cp.size(), r = cp.rank(), L = T / P;
  INFO("cp " << P << " rank " << r << (flash ? " flash" : " standard"));
  CpuBackend be(1);
  // The reference: the standard kernel over the whole sequence; this rank's
  // rows are its two load-balanced chunks.
  const AttentionOracle oracle(be, B, T, NH, HD, 11);
  const std::vector<float>& qkv = oracle.qkv;
  const auto pos_of = [&](int i) { return context_parallel_position(i, T, P, r); };
  const std::vector<float> lq = oracle.rows(oracle.qkv, L, 3 * C, pos_of), ld = oracle.rows(oracle.dout, L, C, pos_of);
  RingAttention ring(cp, be, B, T, C, NH, flash);
  CHECK(ring.state_elems() == static_cast<std::size_t>(B) * NH * L * (flash ? 1 : T));
  std::vector<float> out(ld.size()), state(ring.state_elems()), d(lq.size(), 0.0f);
  ring.forward(out.data(), state.data(), lq.data());
  ring.backward(d.data(), ld.data(), lq.data(), out.data(), state.data());
  const std::vector<float>& ro = oracle.out;
  const std::vector<float>& rd = oracle.dqkv;
  const float tol_o = 2e-5f * max_abs(ro), tol_d = 2e-5f * max_abs(rd);
  int bad = 0;
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < L; ++i) {
      const int pos = context_parallel_position(i, T, P, r);
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
      for (int h = 0; h < NH; ++h) {
        const std::size_t row = (static_cast<std::size_t>(b) * NH + h) * L + i;
        const float* ref_p = oracle.probs.data() + ((static_cast<std::size_t>(b) * NH + h) * T + pos) * T;
        if (flash) {
          // lse = log Σ_k≤pos exp(s_k): recovered from the reference's probabilities p_k = exp(s_k − lse).
          const float* q = qkv.data() + (static_cast<std::size_t>(b) * T + pos) * 3 * C + h * HD;
          const float* k = qkv.data() + (static_cast<std::size_t>(b) * T) * 3 * C + C + h * HD;
          float s0 = 0;
          for (int x = 0; x < HD; ++x) s0 += q[x] * k[x];
          s0 /= std::sqrt(static_cast<float>(HD));
          CHECK(state[row] == Approx(s0 - std::log(ref_p[0])).margin(1e-4));
        } else {
          for (int k = 0; k < T; ++k)
            if (std::abs(state[row * T + k] - ref_p[k]) > 1e-5f && ++bad <= 10)
              FAIL_CHECK("probability pos " << pos << " key " << k << ": " << state[row * T + k] << " vs " << ref_p[k]);
        }
      }
    }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("context_parallel_position: rank i holds chunks i and 2cp-1-i", "[ring][cp]") {
  // 16 tokens over cp 2: chunks of 4; rank 0 holds 0-3 and 12-15, rank 1 holds 4-11.
  std::vector<int> r0, r1;
  for (int i = 0; i < 8; ++i) {
    r0.push_back(context_parallel_position(i, 16, 2, 0));
    r1.push_back(context_parallel_position(i, 16, 2, 1));
  }
  CHECK(r0 == std::vector<int>{0, 1, 2, 3, 12, 13, 14, 15});
  CHECK(r1 == std::vector<int>{4, 5, 6, 7, 8, 9, 10, 11});
}

TEST_CASE("ring attention over cp 4 and cp 2 equals the whole sequence's attention", "[mpi][ring][cp]") {
  auto world = MpiCommunicator::world();
  REQUIRE(world->size() == 4);
  for (bool flash : {false, true}) check_ring(*world, flash);
  auto pair = world->split(world->rank() / 2, world->rank(), "cp2");
  for (bool flash : {false, true}) check_ring(*pair, flash);
}
