#include "rank_agreement.hpp"

#include <cstdint>
#include <cstdio>
#include <utility>

#include "ztune/vocab/run_record.hpp"

namespace ztune::executor {

namespace {

constexpr int kTagText = 99;

// Text from `from` to rank 0 over the control communicator (bytes as floats:
// the communicator moves float and double buffers; a char's value is exact).
void send_text(Communicator& world, const std::string& text) {
  std::vector<float> chars(text.begin(), text.end());
  float len = static_cast<float>(chars.size());
  world.send(&len, 1, 0, kTagText);
  world.send(chars.data(), chars.size(), 0, kTagText);
}

std::string recv_text(Communicator& world, int from) {
  float len = 0;
  world.recv(&len, 1, from, kTagText);
  std::vector<float> chars(static_cast<std::size_t>(len));
  world.recv(chars.data(), chars.size(), from, kTagText);
  std::string text;
  for (float c : chars) text.push_back(static_cast<char>(c));
  return text;
}

// A value's digest as two 32-bit halves, each exact in a double.
std::pair<double, double> halves(const std::string& value) {
  const std::uint64_t h = fnv1a(value);
  return {static_cast<double>(h >> 32), static_cast<double>(h & 0xffffffffu)};
}

}  // namespace

bool any_error(Communicator& world, const std::optional<std::string>& error) {
  double flag = error ? static_cast<double>(world.size() - world.rank()) : 0.0;
  world.all_reduce_doubles(&flag, 1, ReduceOp::max);
  if (flag == 0) return false;
  const int culprit = world.size() - static_cast<int>(flag);
  if (world.rank() == culprit && culprit != 0) send_text(world, *error);
  if (world.rank() == 0) {
    const std::string message = culprit == 0 ? *error : recv_text(world, culprit);
    std::fprintf(stderr, "ztune-worker: error: %s%s\n",
                 culprit == 0 ? "" : ("rank " + std::to_string(culprit) + ": ").c_str(), message.c_str());
  }
  return true;
}

std::optional<std::string> launch_mismatch(Communicator& world, const std::vector<LaunchField>& fields) {
  // Max of each half and of its negation: equal everywhere exactly when max == -max(-x).
  const std::size_t n = fields.size();
  std::vector<double> digests(4 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto [hi, lo] = halves(fields[i].compared);
    digests[4 * i] = hi;
    digests[4 * i + 1] = -hi;
    digests[4 * i + 2] = lo;
    digests[4 * i + 3] = -lo;
  }
  world.all_reduce_doubles(digests.data(), digests.size(), ReduceOp::max);
  std::size_t i = 0;
  while (i < n && digests[4 * i] == -digests[4 * i + 1] && digests[4 * i + 2] == -digests[4 * i + 3]) ++i;
  if (i == n) return std::nullopt;
  // Rank 0's digest of that field to every rank (a sum of zeros and its own),
  // then the first rank whose digest differs from it.
  const auto mine = halves(fields[i].compared);
  double root[2] = {world.rank() == 0 ? mine.first : 0.0, world.rank() == 0 ? mine.second : 0.0};
  world.all_reduce_doubles(root, 2, ReduceOp::sum);
  const bool differs = mine.first != root[0] || mine.second != root[1];
  double first = differs ? static_cast<double>(world.size() - world.rank()) : 0.0;
  world.all_reduce_doubles(&first, 1, ReduceOp::max);
  const int other = world.size() - static_cast<int>(first);
  if (world.rank() == other) send_text(world, fields[i].text());
  if (world.rank() != 0) return std::string("ranks started differently");  // rank 0 says which
  return "the ranks were started with different jobs: " + fields[i].what + " is " + fields[i].text() +
         " on rank 0 but " + recv_text(world, other) + " on rank " + std::to_string(other) +
         "; every rank must get the same plan file, token file and flags (on several hosts, copies that agree)";
}

}  // namespace ztune::executor
