#pragma once
// Grouped-query attention (Ainslie et al. 2023) through the dense attention
// kernels: the projection's rows [n, (nh + 2·kv)·hd] hold Q (nh heads), K and V
// (kv heads each); query head h reads key/value head h / (nh/kv), as Hugging Face's
// repeat_kv (repeat_interleave). kv_repeat_forward writes the [n, 3·nh·hd] rows
// the attention kernels take (Q copied, each K/V head repeated nh/kv times);
// backward sums the repeated heads' gradients back. See conventions.hpp (backward +=).
namespace ztune::kernels::cpu {

void kv_repeat_forward(float* out, const float* inp, int n, int nh, int kv, int hd);
/// dinp [n, (nh+2kv)·hd] += the gradient of out [n, 3·nh·hd], repeated heads summed.
void kv_repeat_backward(float* dinp, const float* dout, int n, int nh, int kv, int hd);

}  // namespace ztune::kernels::cpu
