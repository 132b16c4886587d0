// Rotary position embedding, CPU reference (Su et al. 2021, RoFormer eq. 34) in
// the "rotate half" layout of GPT-NeoX / Hugging Face Llama (see rope.hpp).
//
// The angle, as both this reference and kernels/cuda/src/rope.cu compute it (and as
// HF Llama does, whose inv_freq and t·inv_freq are fp32 tensors):
//   inv_freq_i = fp32(θ^(−2i/rot_dims))    evaluated in double, rounded once to fp32
//   angle      = fp32(float(p) · inv_freq_i) one fp32 multiply
// and cos/sin are taken of that fp32 angle. Here they and the rotation are computed
// in double; the GPU uses sincosf and fp32 arithmetic, so the two differ by a few
// fp32 ulps, not by the angle's own rounding (up to p·2^−24 rad at large positions).
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "ztune/kernels/rope.hpp"

namespace ztune::kernels::cpu {
namespace {

void check_shape(const char* who, int row_stride, int heads, int hd, int rot_dims) {
  if (hd <= 0 || rot_dims <= 0 || rot_dims > hd || rot_dims % 2 != 0)
    throw std::invalid_argument(std::string(who) + ": rotary dims " + std::to_string(rot_dims) + " of head dim " +
                                std::to_string(hd) + " must be even, positive and at most the head dim");
  if (heads < 0 || static_cast<long>(heads) * hd > row_stride)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(heads) + " heads of " + std::to_string(hd) +
                                " do not fit a row of " + std::to_string(row_stride));
}

// sign = +1 turns each pair by +angle (forward), −1 by −angle (backward: Rᵀ = R(−angle)).
void rotate(float* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd, int rot_dims,
            float theta, double sign) {
  const auto half = static_cast<std::size_t>(rot_dims / 2);
  // The angles depend on the position and the pair, not the head: one table of
  // frequencies per call, one of cos/sin per row.
  std::vector<float> inv_freq(half);
  for (std::size_t i = 0; i < half; ++i)
    inv_freq[i] = static_cast<float>(std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / rot_dims));
  std::vector<double> cos_row(half), sin_row(half);
  for (int r = 0; r < n; ++r) {
    const float pos = static_cast<float>(positions[r]);
    for (std::size_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];
      cos_row[i] = std::cos(static_cast<double>(angle));
      sin_row[i] = sign * std::sin(static_cast<double>(angle));
    }
    for (int h = 0; h < heads; ++h) {
      float* head = x + static_cast<long>(r) * row_stride + static_cast<long>(h) * hd;
      for (std::size_t i = 0; i < half; ++i) {
        const double a = head[i], b = head[i + half];
        head[i] = static_cast<float>(a * cos_row[i] - b * sin_row[i]);
        head[i + half] = static_cast<float>(b * cos_row[i] + a * sin_row[i]);
      }
    }
  }
}

}  // namespace

void rope_forward(float* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd, float theta,
                  int rot_dims) {
  if (rot_dims == 0) rot_dims = hd;
  check_shape("rope_forward", row_stride, heads, hd, rot_dims);
  rotate(x, positions, n, row_stride, heads, hd, rot_dims, theta, 1.0);
}

void rope_backward(float* dx, const std::int32_t* positions, int n, int row_stride, int heads, int hd, float theta,
                   int rot_dims) {
  if (rot_dims == 0) rot_dims = hd;
  check_shape("rope_backward", row_stride, heads, hd, rot_dims);
  rotate(dx, positions, n, row_stride, heads, hd, rot_dims, theta, -1.0);
}

}  // namespace ztune::kernels::cpu
