#pragma once
// ZeRO-Infinity's optimizer-state offload to NVMe (Rajbhandari et al. 2021,
// §5): the fp32 master weights and Adam's two moments of this rank's partition
// live in one file on the drive (NvmeStore: direct, asynchronous I/O), not in
// host memory. The host Adam step streams them through three aligned swap
// buffers, chunk by chunk: read the chunk's master, m and v (in parallel),
// update the slice the step owns, write the chunk back.
//
// The arithmetic is host_adamw's, element for element, so a plan offloaded to
// NVMe trains bit-identically to the same plan offloaded to CPU memory.
#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <memory>

#include "ztune/executor/nvme_store.hpp"
#include "ztune/kernels/adamw.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::executor {

class NvmeOptimizerStates {
 public:
  /// `n` floats per state; the file is created at `file` (removed on destruction).
  /// Throws std::runtime_error naming the file when it cannot be created.
  NvmeOptimizerStates(std::filesystem::path file, std::size_t n, std::size_t chunk_floats = std::size_t{1} << 20);

  [[nodiscard]] std::size_t size() const { return n_; }
  [[nodiscard]] const std::filesystem::path& file() const { return store_.path(); }
  /// False where the file system refused O_DIRECT and the store reads through the page cache.
  [[nodiscard]] bool direct_io() const { return store_.direct(); }
  /// Host bytes of the swap buffers (the only host memory the states use).
  [[nodiscard]] std::size_t swap_bytes() const { return 3 * chunk_bytes_; }

  /// master[off, off+len) = values; m and v of that range = 0.
  void initialise(std::size_t off, const float* values, std::size_t len);
  /// Adam on [off, off+len): `grad` is that range's gradient; on return
  /// `master_out` holds the updated master weights of the range.
  void step(std::size_t off, const float* grad, float* master_out, std::size_t len, const kernels::AdamWParams& h,
            kernels::ThreadPool& pool);

  /// The three states, in order master, m, v, as n floats each (the layout of
  /// an in-memory offload's checkpoint).
  void write_state(std::ostream& out);
  void read_state(std::istream& in);

 private:
  enum Region { kMaster = 0, kM = 1, kV = 2 };
  std::size_t region_offset(int region, std::size_t chunk) const;
  std::size_t chunk_len(std::size_t chunk) const;
  void read_chunk(std::size_t chunk);
  void write_chunk(std::size_t chunk);

  std::size_t n_;
  std::size_t chunk_floats_;
  std::size_t chunk_bytes_;   // chunk_floats_·4, aligned
  std::size_t region_bytes_;  // one state, aligned
  NvmeStore store_;
  AlignedHostBuffer swap_[3];
};

}  // namespace ztune::executor
