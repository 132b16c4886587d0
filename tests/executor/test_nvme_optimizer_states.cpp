// The NVMe optimizer states against the same Adam kept in memory (host_adamw
// over plain arrays: the oracle), with a small chunk so that every update
// range straddles chunk boundaries and the last chunk is partial: after three
// steps over overlapping bucket ranges the master weights agree bit for bit,
// and the checkpoint stream equals the in-memory states laid end to end.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ztune/executor/host_adam.hpp"
#include "ztune/executor/nvme_optimizer_states.hpp"

using namespace ztune;
using namespace ztune::executor;

namespace {

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()));
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

}  // namespace

TEST_CASE("NVMe optimizer states update exactly as Adam in memory", "[executor][offload][nvme]") {
  constexpr std::size_t n = 10000, chunk = 1024;  // 10 chunks, the last 784 floats
  kernels::ThreadPool pool(2);
  const auto initial = random_floats(n, 1);
  std::vector<float> master = initial, m(n, 0.0f), v(n, 0.0f);  // the oracle
  NvmeOptimizerStates states(scratch("ztune_test_nvme_states.swp"), n, chunk);
  // Initialised in two ranges that split a chunk.
  states.initialise(0, initial.data(), 3000);
  states.initialise(3000, initial.data() + 3000, n - 3000);
  // Buckets: ranges that start and end inside chunks.
  const std::pair<std::size_t, std::size_t> buckets[] = {{0, 1500}, {1500, 5100}, {6600, 3400}};
  std::vector<float> out(n, 0.0f);
  for (int step = 1; step <= 3; ++step) {
    kernels::AdamWParams h;
    h.lr = 1e-2f;
    h.weight_decay = 0.1f;
    h.step = step;
    const auto grad = random_floats(n, 100 + static_cast<unsigned>(step));
    for (const auto& [off, len] : buckets) {
      host_adamw(master.data() + off, grad.data() + off, m.data() + off, v.data() + off, len, h, pool);
      states.step(off, grad.data() + off, out.data() + off, len, h, pool);
    }
    INFO("step " << step);
    REQUIRE(out == master);
  }
  std::ostringstream saved;
  states.write_state(saved);
  std::vector<float> expected = master;
  expected.insert(expected.end(), m.begin(), m.end());
  expected.insert(expected.end(), v.begin(), v.end());
  const std::string bytes = saved.str();
  REQUIRE(bytes.size() == expected.size() * sizeof(float));
  CHECK(std::memcmp(bytes.data(), expected.data(), bytes.size()) == 0);

  // A fresh store restored from the stream continues identically.
  NvmeOptimizerStates restored(scratch("ztune_test_nvme_states_restored.swp"), n, chunk);
  std::istringstream in(bytes);
  restored.read_state(in);
  kernels::AdamWParams h;
  h.step = 4;
  const auto grad = random_floats(n, 104);
  host_adamw(master.data(), grad.data(), m.data(), v.data(), n, h, pool);
  restored.step(0, grad.data(), out.data(), n, h, pool);
  CHECK(out == master);
  // A truncated checkpoint is refused.
  std::istringstream short_in(bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(restored.read_state(short_in), Catch::Contains("ends early"));
}
