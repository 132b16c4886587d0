// Grouped-query head repetition, CPU reference (Ainslie et al. 2023, GQA §2.2;
// Hugging Face Llama's repeat_kv, i.e. repeat_interleave over heads): query head h
// reads key/value head h / (nh/kv). inp rows [n, (nh + 2kv)·hd] = [Q | K | V];
// out rows [n, 3·nh·hd] = [Q | K repeated | V repeated]. Forward writes, backward
// accumulates (conventions.hpp); backward is the adjoint of forward: each K/V head's
// gradient is the sum over the nh/kv query heads that read it.
#include <stdexcept>
#include <string>

#include "ztune/kernels/kv_repeat.hpp"

namespace ztune::kernels::cpu {
namespace {

void check_heads(const char* who, int nh, int kv, int hd) {
  if (nh <= 0 || kv <= 0 || hd <= 0 || nh % kv != 0)
    throw std::invalid_argument(std::string(who) + ": need positive heads with kv (" + std::to_string(kv) +
                                ") dividing nh (" + std::to_string(nh) + "), hd " + std::to_string(hd));
}

}  // namespace

void kv_repeat_forward(float* out, const float* inp, int n, int nh, int kv, int hd) {
  check_heads("kv_repeat_forward", nh, kv, hd);
  const int group = nh / kv;
  const long in_row = static_cast<long>(nh + 2 * kv) * hd, out_row = 3L * nh * hd;
  for (int r = 0; r < n; ++r) {
    const float* in = inp + r * in_row;
    float* o = out + r * out_row;
    for (long j = 0; j < static_cast<long>(nh) * hd; ++j) o[j] = in[j];  // Q
    for (int part = 1; part <= 2; ++part) {                                // K, then V
      const float* src = in + static_cast<long>(nh) * hd + static_cast<long>(part - 1) * kv * hd;
      float* dst = o + static_cast<long>(part) * nh * hd;
      for (int h = 0; h < nh; ++h)
        for (int d = 0; d < hd; ++d) dst[static_cast<long>(h) * hd + d] = src[static_cast<long>(h / group) * hd + d];
    }
  }
}

void kv_repeat_backward(float* dinp, const float* dout, int n, int nh, int kv, int hd) {
  check_heads("kv_repeat_backward", nh, kv, hd);
  const int group = nh / kv;
  const long in_row = static_cast<long>(nh + 2 * kv) * hd, out_row = 3L * nh * hd;
  for (int r = 0; r < n; ++r) {
    float* din = dinp + r * in_row;
    const float* g = dout + r * out_row;
    for (long j = 0; j < static_cast<long>(nh) * hd; ++j) din[j] += g[j];  // Q
    for (int part = 1; part <= 2; ++part) {
      float* dst = din + static_cast<long>(nh) * hd + static_cast<long>(part - 1) * kv * hd;
      const float* src = g + static_cast<long>(part) * nh * hd;
      for (int j = 0; j < kv; ++j) {
        for (int d = 0; d < hd; ++d) {
          float sum = 0.0f;  // the group's gradients first, then one += (as the CUDA kernel)
          for (int k = 0; k < group; ++k) sum += src[static_cast<long>(j * group + k) * hd + d];
          dst[static_cast<long>(j) * hd + d] += sum;
        }
      }
    }
  }
}

}  // namespace ztune::kernels::cpu
