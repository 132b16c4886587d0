#include "ztune/executor/zeropp_reduce.hpp"

namespace ztune::executor {

void hierarchical_quantized_reduce_scatter(Backend& be, Communicator& intra, Communicator& inter, float* bucket,
                                           float* out, std::size_t piece, int bits, long group) {
  const auto g = static_cast<std::size_t>(intra.size()), k = static_cast<std::size_t>(inter.size());
  const std::size_t chunk = k * piece;
  // Chunk l = pieces (n·g + l) for n = 0..k−1, in node order.
  Buffer work = be.allocate(g * chunk, MemCategory::comm_buckets);
  for (std::size_t l = 0; l < g; ++l)
    for (std::size_t n = 0; n < k; ++n) be.copy(work.data() + l * chunk + n * piece, bucket + (n * g + l) * piece, piece);
  be.quantize_dequantize(work.data(), static_cast<long>(g * chunk), bits, group);
  Buffer partial = be.allocate(chunk, MemCategory::comm_buckets);
  intra.reduce_scatter(work.data(), partial.data(), chunk);
  be.quantize_dequantize(partial.data(), static_cast<long>(chunk), bits, group);
  inter.reduce_scatter(partial.data(), out, piece);
}

}  // namespace ztune::executor
