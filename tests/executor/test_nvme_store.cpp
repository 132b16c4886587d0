// NvmeStore: data written asynchronously (two requests in flight, each split over
// four I/O threads) reads back bit for bit; misaligned and out-of-range requests
// are refused; an uncreatable path is named in the error; the file is removed at
// the end. Runs on any machine (direct I/O where the file system allows it).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>

#include "ztune/executor/nvme_store.hpp"

using namespace ztune::executor;
namespace fs = std::filesystem;

namespace {
fs::path scratch_file(const char* name) { return fs::temp_directory_path() / name; }
}  // namespace

TEST_CASE("NVMe store round-trips data through asynchronous direct I/O", "[nvme]") {
  const std::size_t half = 3 * 1024 * 1024 + 4096;  // not a multiple of the per-thread chunk
  const fs::path path = scratch_file("ztune_test_nvme_store.swp");
  {
    NvmeStore store(path, 2 * half, DirectIo::prefer);
    INFO("direct I/O: " << store.direct());
    CHECK(fs::exists(path));
    CHECK(store.capacity() == 2 * half);
    AlignedHostBuffer out(2 * half), in(2 * half);
    auto* words = static_cast<std::uint32_t*>(out.data());
    for (std::size_t i = 0; i < 2 * half / 4; ++i) words[i] = static_cast<std::uint32_t>(i * 2654435761u);
    auto w1 = store.write_async(0, out.data(), half);
    auto w2 = store.write_async(half, static_cast<char*>(out.data()) + half, half);
    w1.get();
    w2.get();
    auto r = store.read_async(0, in.data(), 2 * half);
    r.get();
    CHECK(std::memcmp(in.data(), out.data(), 2 * half) == 0);

    CHECK_THROWS_AS(store.write_async(100, out.data(), 4096), std::invalid_argument);
    CHECK_THROWS_AS(store.write_async(0, static_cast<char*>(out.data()) + 8, 4096), std::invalid_argument);
    CHECK_THROWS_AS(store.read_async(2 * half, in.data(), 4096), std::invalid_argument);
    if (store.direct()) {
      NvmeStore strict(scratch_file("ztune_test_nvme_strict.swp"), 4096, DirectIo::require);
      CHECK(strict.direct());
    }
  }
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("NVMe store names the path it cannot create", "[nvme]") {
  const fs::path bad = "/nonexistent-ztune-dir/optimizer.swp";
  try {
    NvmeStore store(bad, 4096, DirectIo::prefer);
    FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("/nonexistent-ztune-dir/optimizer.swp"));
  }
}
