#include "ztune/kernels/cross_entropy.hpp"

#include <cmath>
#include <limits>
#include <vector>

namespace ztune::kernels::cpu {

void cross_entropy_row_max(float* row_max, const float* logits, int n, int v) {
  for (int i = 0; i < n; ++i) {
    const float* l = logits + static_cast<long>(i) * v;
    float m = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < v; ++j) m = std::max(m, l[j]);
    row_max[i] = m;
  }
}

void cross_entropy_row_sumexp(float* row_sum, const float* logits, const float* row_max, int n, int v) {
  for (int i = 0; i < n; ++i) {
    const float* l = logits + static_cast<long>(i) * v;
    float s = 0.0f;
    for (int j = 0; j < v; ++j) s += std::exp(l[j] - row_max[i]);
    row_sum[i] = s;
  }
}

void cross_entropy_target_logit(float* target_logit, const float* logits, const std::int32_t* targets, int n, int v,
                                int vocab_begin) {
  for (int i = 0; i < n; ++i) {
    const int j = targets[i] - vocab_begin;
    target_logit[i] = (j >= 0 && j < v) ? logits[static_cast<long>(i) * v + j] : 0.0f;
  }
}

void cross_entropy_loss(float* losses, const float* row_max, const float* row_sum, const float* target_logit, int n) {
  for (int i = 0; i < n; ++i) losses[i] = std::log(row_sum[i]) + row_max[i] - target_logit[i];
}

void cross_entropy_backward(float* dlogits, const float* logits, const float* row_max, const float* row_sum,
                            const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin) {
  for (int i = 0; i < n; ++i) {
    const float* l = logits + static_cast<long>(i) * v;
    float* d = dlogits + static_cast<long>(i) * v;
    const float inv = 1.0f / row_sum[i];
    const int target = targets[i] - vocab_begin;
    for (int j = 0; j < v; ++j) {
      const float p = std::exp(l[j] - row_max[i]) * inv;
      d[j] += dloss[i] * (p - (j == target ? 1.0f : 0.0f));
    }
  }
}

void cross_entropy_forward(float* losses, const float* logits, const std::int32_t* targets, int n, int v) {
  std::vector<float> mx(static_cast<std::size_t>(n)), sum(mx.size()), tl(mx.size());
  cross_entropy_row_max(mx.data(), logits, n, v);
  cross_entropy_row_sumexp(sum.data(), logits, mx.data(), n, v);
  cross_entropy_target_logit(tl.data(), logits, targets, n, v, 0);
  cross_entropy_loss(losses, mx.data(), sum.data(), tl.data(), n);
}

}  // namespace ztune::kernels::cpu
