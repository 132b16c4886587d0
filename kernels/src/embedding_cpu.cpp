#include "ztune/kernels/embedding.hpp"

#include <algorithm>

namespace ztune::kernels::cpu {

void embedding_forward(float* out, const std::int32_t* ids, const float* table, int n, int c, int row_begin,
                       int rows) {
  for (int i = 0; i < n; ++i) {
    float* o = out + static_cast<long>(i) * c;
    const int r = ids[i] - row_begin;
    if (r < 0 || r >= rows) {
      std::fill(o, o + c, 0.0f);
      continue;
    }
    std::copy(table + static_cast<long>(r) * c, table + static_cast<long>(r + 1) * c, o);
  }
}

void embedding_backward(float* dtable, const float* dout, const std::int32_t* ids, int n, int c, int row_begin,
                        int rows) {
  for (int i = 0; i < n; ++i) {
    const int r = ids[i] - row_begin;
    if (r < 0 || r >= rows) continue;
    float* d = dtable + static_cast<long>(r) * c;
    const float* g = dout + static_cast<long>(i) * c;
    for (int j = 0; j < c; ++j) d[j] += g[j];
  }
}

}  // namespace ztune::kernels::cpu
