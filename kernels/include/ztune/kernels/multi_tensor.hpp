#pragma once
// The chunk table of a multi-tensor apply (apex's multi_tensor_apply, issue 24
// item 3): every tensor of a list is cut into chunks of at most `chunk`
// elements and each chunk becomes one row (tensor index, first element, length).
// A CUDA kernel then runs one block per row over a device copy of the table, so
// any number of tensors is updated in one launch (kernels/cuda/adamw.hpp's
// adamw_chunked). Plain C++ (17: the CUDA sources include it): built and tested
// on every machine.
#include <cstdint>
#include <vector>

namespace ztune::kernels {

struct TensorChunk {
  std::int32_t tensor = 0;  // index into the tensor list
  std::int32_t length = 0;  // elements in this chunk, 1..chunk
  std::int64_t begin = 0;   // first element within the tensor
};
inline bool operator==(const TensorChunk& a, const TensorChunk& b) {
  return a.tensor == b.tensor && a.length == b.length && a.begin == b.begin;
}

/// Rows in tensor order, then element order; empty tensors get none. Throws
/// std::invalid_argument for a negative size, a chunk outside [1, 2^30], or more
/// than 2^31 - 1 rows (one launch's grid).
std::vector<TensorChunk> build_chunk_table(const std::vector<std::int64_t>& sizes, std::int64_t chunk);

}  // namespace ztune::kernels
