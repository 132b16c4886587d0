#include "ztune/executor/nvme_param_partitions.hpp"

#include <algorithm>
#include <cstring>

namespace ztune::executor {

namespace {

std::size_t aligned(std::size_t bytes) {
  return (bytes + NvmeStore::kAlignment - 1) / NvmeStore::kAlignment * NvmeStore::kAlignment;
}

std::vector<std::size_t> region_offsets(const std::vector<std::size_t>& pieces) {
  std::vector<std::size_t> out;
  std::size_t at = 0;
  for (std::size_t n : pieces) {
    out.push_back(at);
    at += aligned(n * sizeof(float));
  }
  out.push_back(at);  // the file's size
  return out;
}

std::size_t largest_region(const std::vector<std::size_t>& pieces) {
  const std::size_t n = pieces.empty() ? 0 : *std::max_element(pieces.begin(), pieces.end());
  return std::max(aligned(n * sizeof(float)), NvmeStore::kAlignment);
}

}  // namespace

NvmeParamPartitions::NvmeParamPartitions(std::filesystem::path file, const std::vector<std::size_t>& pieces)
    : pieces_(pieces),
      offsets_(region_offsets(pieces)),
      // Direct I/O where the file system allows it (tmpfs refuses O_DIRECT:
      // buffered there, as for the optimizer states).
      store_(std::move(file), std::max(offsets_.back(), NvmeStore::kAlignment), DirectIo::prefer),
      io_(largest_region(pieces)) {}

void NvmeParamPartitions::read(std::size_t bucket, float* dst) {
  const std::size_t n = pieces_.at(bucket);
  store_.read_async(offsets_[bucket], io_.data(), aligned(n * sizeof(float))).get();
  std::memcpy(dst, io_.data(), n * sizeof(float));
}

void NvmeParamPartitions::write(std::size_t bucket, const float* src) {
  const std::size_t n = pieces_.at(bucket);
  const std::size_t bytes = aligned(n * sizeof(float));
  std::memcpy(io_.data(), src, n * sizeof(float));
  std::memset(static_cast<char*>(io_.data()) + n * sizeof(float), 0, bytes - n * sizeof(float));
  store_.write_async(offsets_[bucket], io_.data(), bytes).get();
}

}  // namespace ztune::executor
