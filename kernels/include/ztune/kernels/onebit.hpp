#pragma once
// 1-bit compression with error feedback (Seide et al. 2014, "1-Bit Stochastic
// Gradient Descent"; Tang et al. 2021, "1-bit Adam", Algorithm 1; DeepSpeed
// NcclBackend.compressed_allreduce): a vector x is sent as its signs plus one
// scale, and what the compression lost is kept and added to the next vector.
//   c     = x + error
//   scale = ‖c‖₂ / √n                       (DeepSpeed's worker/server scale)
//   bit i = 1 when c[i] >= 0 (sign +1), else 0 (sign −1; DeepSpeed maps 0 to +1)
//   error = c − scale·sign(c)
// Bits are packed little-endian: element i is bit (i mod 8) of byte i/8.
// Convention (conventions.hpp): compress writes its outputs; decompress_add
// accumulates (+=).
#include <cstdint>

namespace ztune::kernels {
namespace cpu {

/// Compresses x[n] with the error-feedback buffer error[n] (updated in place);
/// writes ⌈n/8⌉ bytes of bits and returns the scale.
float onebit_compress(std::uint8_t* bits, float* error, const float* x, long n);

/// out[i] += weight · scale · (bit i ? +1 : −1) for i < n.
void onebit_decompress_add(float* out, const std::uint8_t* bits, float scale, float weight, long n);

}  // namespace cpu
}  // namespace ztune::kernels
