#pragma once
// Symmetric group quantization, applied and undone in place: what a value
// looks like after it crossed ZeRO++'s quantized collectives (Wang et al. 2023,
// arXiv:2306.10209, §3.1 qwZ: int8 weights, §3.3 qgZ: int4 gradients;
// DeepSpeed's CUDAQuantizer quantizes both Symmetric). For each group of
// `group` consecutive elements (the last may be shorter), with L = 2^(bits−1) − 1
// levels each side (127 for int8, 7 for int4):
//   scale = max|x| / L      (a group of zeros stays zero)
//   x    ← scale · round(x / scale)      (|error| ≤ scale / 2)
#include <cstddef>

namespace ztune::kernels {
namespace cpu {

void quantize_dequantize(float* x, long n, int bits, long group);

}  // namespace cpu
}  // namespace ztune::kernels
