#pragma once
// The independent oracle of the sequence-split attention tests (ring attention
// for context parallelism, DeepSpeed-Ulysses): every rank draws the same qkv
// and output gradient for all T rows, and the CPU backend's standard causal
// kernel over the whole sequence gives the output and dQ|dK|dV each rank's rows
// must match. rows() keeps a rank's rows by their global positions.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "ztune/executor/cpu_backend.hpp"

namespace ztune::executor::test {

inline float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

struct AttentionOracle {
  int B, T, C, NH;
  std::vector<float> qkv, dout;  // [B, T, 3C] and [B, T, C], the same on every rank
  std::vector<float> out, dqkv;  // the whole-sequence reference
  std::vector<float> probs;      // its standard kernel's state: [B, NH, T, T] probabilities

  AttentionOracle(CpuBackend& be, int b, int t, int nh, int hd, unsigned seed)
      : B(b), T(t), C(nh * hd), NH(nh), qkv(static_cast<std::size_t>(b) * t * 3 * nh * hd),
        dout(static_cast<std::size_t>(b) * t * nh * hd) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (auto& v : qkv) v = n(rng);
    for (auto& v : dout) v = n(rng);
    Buffer ref_out = be.allocate(dout.size(), MemCategory::workspace);
    Buffer ref_att = be.allocate(Backend::attention_state_elems(B, T, NH, false), MemCategory::workspace);
    Buffer ref_d = be.allocate(qkv.size(), MemCategory::workspace);
    be.attention_forward(ref_out.data(), ref_att.data(), qkv.data(), B, T, C, NH, false);
    be.attention_backward(ref_d.data(), dout.data(), qkv.data(), ref_out.data(), ref_att.data(), B, T, C, NH, false);
    out.assign(ref_out.data(), ref_out.data() + dout.size());
    dqkv.assign(ref_d.data(), ref_d.data() + qkv.size());
    probs.assign(ref_att.data(), ref_att.data() + Backend::attention_state_elems(B, T, NH, false));
  }

  /// The L rows i of each sequence at global positions pos(i) of `full`
  /// ([B, T, width]), as [B, L, width].
  template <class Pos>
  [[nodiscard]] std::vector<float> rows(const std::vector<float>& full, int L, int width, Pos pos) const {
    std::vector<float> local(static_cast<std::size_t>(B) * L * width);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < L; ++i)
        std::copy_n(full.data() + (static_cast<std::size_t>(b) * T + pos(i)) * width, width,
                    local.data() + (static_cast<std::size_t>(b) * L + i) * width);
    return local;
  }
};

}  // namespace ztune::executor::test
