// The pipeline schedules, run on paper: every stage's action list is replayed
// with the executor's communication rules (sends asynchronous and buffered,
// receives blocking, messages between two ranks with one tag delivered in
// order) by a round-robin interpreter. The oracle is the data flow itself: a
// pass may run only when its input exists, each receive must get the
// micro-batch and chunk it expects, and every stage must finish (no deadlock).
#include <catch2/catch.hpp>

#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "ztune/vocab/pipeline_schedule.hpp"

using namespace ztune;

namespace {

struct Message {
  int vstage;  // the virtual stage that consumes it
  int micro;
};

/// Replays the schedules of all `p` stages; returns true when every pass ran.
bool replay(Schedule kind, int p, int m, int v) {
  const int vstages = p * v;
  std::vector<std::vector<PipeAction>> lists;
  for (int s = 0; s < p; ++s) lists.push_back(pipeline_schedule(kind, p, s, m, v));
  // (from, to, forward?, receiving chunk) → FIFO of messages, as MPI orders
  // messages of one (source, tag) pair and the trainer tags by receiving chunk.
  std::map<std::tuple<int, int, bool, int>, std::deque<Message>> channels;
  std::set<std::tuple<int, int>> forwarded;  // (vstage, micro) whose forward ran
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      auto& i = next[static_cast<std::size_t>(s)];
      const auto& list = lists[static_cast<std::size_t>(s)];
      if (i == list.size()) continue;
      const PipeAction a = list[i];
      const int j = a.chunk * p + s;
      const bool needs_input = a.forward ? j > 0 : j < vstages - 1;
      if (needs_input) {
        const int from = a.forward ? (s + p - 1) % p : (s + 1) % p;
        auto& q = channels[{from, s, a.forward, a.chunk}];
        if (q.empty()) continue;  // blocked in recv
        const Message got = q.front();
        q.pop_front();
        INFO("stage " << s << (a.forward ? " forward" : " backward") << " chunk " << a.chunk << " micro "
                      << a.microbatch << " received the message of virtual stage " << got.vstage << " micro "
                      << got.micro);
        REQUIRE(got.vstage == j);
        REQUIRE(got.micro == a.microbatch);
      }
      if (a.forward) {
        forwarded.insert({j, a.microbatch});
        if (j < vstages - 1) {
          const int to = (s + 1) % p, to_chunk = (j + 1) / p;
          channels[{s, to, true, to_chunk}].push_back({j + 1, a.microbatch});
        }
      } else {
        REQUIRE(forwarded.count({j, a.microbatch}) == 1);  // its own forward ran first
        if (j > 0) {
          const int to = (s + p - 1) % p, to_chunk = (j - 1) / p;
          channels[{s, to, false, to_chunk}].push_back({j - 1, a.microbatch});
        }
      }
      ++i;
      progress = true;
    }
  }
  for (int s = 0; s < p; ++s)
    if (next[static_cast<std::size_t>(s)] != lists[static_cast<std::size_t>(s)].size()) return false;
  return true;
}

/// Every (chunk, micro) once forward and once backward on one stage.
void check_complete(const std::vector<PipeAction>& list, int m, int v) {
  std::map<std::tuple<bool, int, int>, int> seen;
  for (const auto& a : list) ++seen[{a.forward, a.chunk, a.microbatch}];
  CHECK(list.size() == static_cast<std::size_t>(2 * m * v));
  for (const auto& [key, n] : seen) CHECK(n == 1);
  CHECK(seen.size() == static_cast<std::size_t>(2 * m * v));
}

}  // namespace

TEST_CASE("GPipe and 1F1B schedules run to the end without deadlock", "[executor][pipeline]") {
  for (Schedule kind : {Schedule::gpipe, Schedule::one_f_one_b})
    for (int p : {1, 2, 3, 4})
      for (int m : {1, 2, 5, 8}) {
        INFO(to_string(kind) << " p " << p << " m " << m);
        CHECK(replay(kind, p, m, 1));
        for (int s = 0; s < p; ++s) check_complete(pipeline_schedule(kind, p, s, m), m, 1);
      }
}

TEST_CASE("interleaved 1F1B runs to the end, each receive getting the pass it expects", "[executor][pipeline]") {
  for (int p : {2, 3, 4})
    for (int v : {2, 3, 4})
      for (int groups : {1, 2, 3}) {
        const int m = groups * p;
        INFO("p " << p << " v " << v << " m " << m);
        CHECK(replay(Schedule::interleaved, p, m, v));
        for (int s = 0; s < p; ++s) check_complete(pipeline_schedule(Schedule::interleaved, p, s, m, v), m, v);
      }
}

// Narayanan et al. 2021 §2.2: interleaving keeps 1F1B's memory footprint in
// micro-batches (the warm-up holds p − s − 1 of them per chunk, doubled for the
// round trip, plus one group of p for the other chunks) and, unlike GPipe,
// does not hold all m·v passes at once.
TEST_CASE("interleaved 1F1B warms up with (p − s − 1)·2 + (v − 1)·p forwards", "[executor][pipeline]") {
  const int p = 4, v = 2, m = 8;
  for (int s = 0; s < p; ++s) {
    const auto list = pipeline_schedule(Schedule::interleaved, p, s, m, v);
    int forwards = 0;
    while (list[static_cast<std::size_t>(forwards)].forward) ++forwards;
    // Warm-up forwards, then the steady state's first forward before its first backward.
    CHECK(forwards == (p - s - 1) * 2 + (v - 1) * p + 1);
    // Stage 0 starts with micro-batches 0..p−1 of chunk 0, then the same group on chunk 1.
    if (s == 0) {
      for (int k = 0; k < p; ++k) CHECK(list[static_cast<std::size_t>(k)] == PipeAction{true, k, 0});
      for (int k = 0; k < p; ++k) CHECK(list[static_cast<std::size_t>(p + k)] == PipeAction{true, k, 1});
    }
    // The first backward is micro-batch 0 on the last chunk.
    CHECK(list[static_cast<std::size_t>(forwards)] == PipeAction{false, 0, v - 1});
  }
  // m = p: everything warms up (Megatron runs all forwards first then).
  const auto all = pipeline_schedule(Schedule::interleaved, 2, 0, 2, 3);
  for (std::size_t k = 0; k < 6; ++k) CHECK(all[k].forward);
  CHECK_THROWS_AS(pipeline_schedule(Schedule::interleaved, 4, 0, 6, 2), std::invalid_argument);
}
