#pragma once
// 1-bit compression with error feedback on the device (issue 10): the CPU
// reference kernels/onebit.hpp applied independently to each chunk of `chunk`
// elements of x[n] (DeepSpeed compresses one scale per chunk/worker; the last
// chunk may be shorter). For chunk k:
//   c        = x + error                    (error updated in place)
//   scale[k] = ‖c‖₂ / √len                  (len = the chunk's length)
//   bit i    = 1 when c[i] >= 0, else 0     error = c − scale·sign(c)
// Bits are packed little-endian over the whole vector (element i is bit i mod 8
// of byte i/8), so chunk k's bits start at byte k·chunk/8: chunk must be a
// multiple of 8. All pointers are device pointers; compress writes bits[⌈n/8⌉]
// and scales[⌈n/chunk⌉]; decompress_add accumulates (conventions.hpp).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ztune::kernels::cuda {

/// One thread block per chunk; the sum of squares in fp64 per thread, fp32 across the block.
void onebit_compress(std::uint8_t* bits, float* scales, float* error, const float* x, long n, long chunk,
                     cudaStream_t stream);

/// out[i] += weight · scales[i / chunk] · (bit i ? +1 : −1) for i < n.
void onebit_decompress_add(float* out, const std::uint8_t* bits, const float* scales, float weight, long n,
                           long chunk, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
