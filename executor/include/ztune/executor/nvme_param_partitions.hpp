#pragma once
// ZeRO-Infinity's parameter offload to NVMe (Rajbhandari et al. 2021, §5,
// "offload_param": {"device": "nvme"}): this rank's ZeRO-3 parameter
// partitions live in a file on the drive, one aligned region per bucket, and
// are read for each gather and written after each optimizer step. Host memory
// holds one bucket's partition at a time (the caller's staging buffer).
//
// The values are stored as they are, so a plan offloading its parameters to
// NVMe trains bit-identically to the same plan keeping them in host memory.
#include <cstddef>
#include <filesystem>
#include <vector>

#include "ztune/executor/nvme_store.hpp"

namespace ztune::executor {

class NvmeParamPartitions {
 public:
  /// `pieces[i]`: floats of bucket i's partition. The file is created at `file`
  /// (removed on destruction); throws std::runtime_error naming it on failure.
  NvmeParamPartitions(std::filesystem::path file, const std::vector<std::size_t>& pieces);

  [[nodiscard]] const std::filesystem::path& file() const { return store_.path(); }
  /// False where the file system refused O_DIRECT and the store reads through the page cache.
  [[nodiscard]] bool direct_io() const { return store_.direct(); }
  /// Bucket `bucket`'s partition into `dst` (pieces[bucket] floats of host memory).
  void read(std::size_t bucket, float* dst);
  /// Bucket `bucket`'s partition from `src` (host memory).
  void write(std::size_t bucket, const float* src);

 private:
  std::vector<std::size_t> pieces_;
  std::vector<std::size_t> offsets_;  // byte offset of each bucket's region, aligned
  NvmeStore store_;
  AlignedHostBuffer io_;  // direct I/O needs aligned buffers: the transfer goes through here
};

}  // namespace ztune::executor
