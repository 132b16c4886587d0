#include "ztune/kernels/multi_tensor.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace ztune::kernels {

std::vector<TensorChunk> build_chunk_table(const std::vector<std::int64_t>& sizes, std::int64_t chunk) {
  if (chunk < 1 || chunk > (std::int64_t{1} << 30))
    throw std::invalid_argument("build_chunk_table: chunk of " + std::to_string(chunk) +
                                " elements, expected 1..2^30");
  std::int64_t rows = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] < 0)
      throw std::invalid_argument("build_chunk_table: tensor " + std::to_string(k) + " has " +
                                  std::to_string(sizes[k]) + " elements, expected >= 0");
    rows += (sizes[k] + chunk - 1) / chunk;
  }
  if (rows > std::numeric_limits<std::int32_t>::max() ||
      sizes.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw std::invalid_argument("build_chunk_table: " + std::to_string(rows) +
                                " chunks do not fit one launch's grid (2^31 - 1)");
  std::vector<TensorChunk> table;
  table.reserve(static_cast<std::size_t>(rows));
  for (std::size_t k = 0; k < sizes.size(); ++k)
    for (std::int64_t b = 0; b < sizes[k]; b += chunk)
      table.push_back({static_cast<std::int32_t>(k), static_cast<std::int32_t>(std::min(chunk, sizes[k] - b)), b});
  return table;
}

}  // namespace ztune::kernels
