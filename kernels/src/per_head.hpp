#pragma once
// Shared by the dense and block-sparse CPU attention references: row-major
// Eigen views over strided q/k/v slices, and the loop over (batch, head).
#include <Eigen/Core>

#include "ztune/kernels/thread_pool.hpp"

namespace ztune::kernels::cpu::detail {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;
using ConstStrided = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;

/// Runs body(batch, head) for every head, spread over the pool (heads are independent).
template <typename Body>
void for_each_head(int b, int nh, ThreadPool* pool, Body body) {
  const int heads = b * nh;
  auto slice = [&](int part, int parts) {
    auto [h0, h1] = split_range(heads, part, parts);
    for (auto h = h0; h < h1; ++h) body(static_cast<int>(h / nh), static_cast<int>(h % nh));
  };
  if (pool == nullptr) {
    slice(0, 1);
  } else {
    pool->run(pool->size(), slice);
  }
}

}  // namespace ztune::kernels::cpu::detail
