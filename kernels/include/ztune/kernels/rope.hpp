#pragma once
// Rotary position embedding (Su et al. 2021, RoFormer eq. 34) in the
// "rotate half" layout of GPT-NeoX and Hugging Face Llama: within each head of
// hd channels, channel i < hd/2 pairs with i + hd/2, and the pair at position p
// turns by the angle p·θ^(−2i/hd):
//   y_i        = x_i·cos − x_{i+hd/2}·sin
//   y_{i+hd/2} = x_{i+hd/2}·cos + x_i·sin
// x is `heads` consecutive heads at the start of each row of `row_stride` floats
// (pass qkv for Q, qkv + nh·hd for K). positions[n] gives each row's position.
// Partial rotary (GPT-NeoX's rotary_pct): only the first `rot_dims` channels of
// each head turn, as above with rot_dims in place of hd (pairs i, i + rot_dims/2;
// angle p·θ^(−2i/rot_dims)); the rest pass through. rot_dims = 0 means hd.
// Both directions work in place: backward turns the gradient by the opposite
// angle (the rotation's transpose), an exception to conventions.hpp's +=, since
// RoPE has no parameters and its input is not kept.
#include <cstdint>

namespace ztune::kernels::cpu {

void rope_forward(float* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd, float theta,
                  int rot_dims = 0);
/// dx ← Rᵀ·dx in place (the gradient of the input, given the gradient of the output).
void rope_backward(float* dx, const std::int32_t* positions, int n, int row_stride, int heads, int hd, float theta,
                   int rot_dims = 0);

}  // namespace ztune::kernels::cpu
