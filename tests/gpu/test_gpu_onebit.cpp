// 1-bit compression with error feedback on the device against kernels/onebit.hpp's
// CPU reference applied chunk by chunk: three full chunks and a ragged tail (not a
// multiple of 8), a non-zero error buffer carried in, two rounds so the second
// compresses with the first's error (the CPU's, uploaded, so both sides start equal). Signs (c = x + error is the same fp32 add on
// both sides) and packed bytes must match exactly; the scale is a sum of squares
// whose order differs (fp64 on the CPU, fp64 per thread then fp32 across the block).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/onebit.hpp"
#include "ztune/kernels/onebit.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

namespace {

class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t n) : n_(n) {
    ZT_CUDA_CHECK(cudaMalloc(&p_, n_));
    ZT_CUDA_CHECK(cudaMemset(p_, 0, n_));
  }
  explicit DeviceBytes(const std::vector<std::uint8_t>& host) : DeviceBytes(host.size()) {
    ZT_CUDA_CHECK(cudaMemcpy(p_, host.data(), n_, cudaMemcpyHostToDevice));
  }
  ~DeviceBytes() { cudaFree(p_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  std::uint8_t* get() const { return p_; }
  std::vector<float> download() const {  // as floats, for mismatches()
    ZT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint8_t> tmp(n_);
    ZT_CUDA_CHECK(cudaMemcpy(tmp.data(), p_, n_, cudaMemcpyDeviceToHost));
    return {tmp.begin(), tmp.end()};
  }

 private:
  std::uint8_t* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace

TEST_CASE("1-bit compression per chunk matches the CPU reference", "[gpu][onebit]") {
  const long chunk = 4096;
  const long n = 3 * chunk + 1003;  // ragged tail chunk
  const long chunks = (n + chunk - 1) / chunk;
  std::vector<float> error = uniform(static_cast<std::size_t>(n), 11, -0.05f, 0.05f);
  DeviceArray<float> d_error(error);
  DeviceArray<float> d_x(static_cast<std::size_t>(n));
  DeviceArray<float> d_scales(static_cast<std::size_t>(chunks));
  DeviceBytes d_bits(static_cast<std::size_t>((n + 7) / 8));
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    const std::vector<float> x = uniform(static_cast<std::size_t>(n), 20 + static_cast<std::uint32_t>(round));
    d_x.upload(x);
    // Both sides start the round from the same error (the CPU's): a carried-over
    // few-ulp difference could otherwise flip the sign of an element with c ≈ 0.
    d_error.upload(error);
    cuda::onebit_compress(d_bits.get(), d_scales.get(), d_error.get(), d_x.get(), n, chunk, nullptr);
    std::vector<std::uint8_t> bits(static_cast<std::size_t>((n + 7) / 8));
    std::vector<float> scales(static_cast<std::size_t>(chunks));
    for (long k = 0; k < chunks; ++k) {
      const long begin = k * chunk, len = std::min(chunk, n - begin);
      scales[static_cast<std::size_t>(k)] =
          cpu::onebit_compress(bits.data() + begin / 8, error.data() + begin, x.data() + begin, len);
    }
    CHECK(mismatches("bits", d_bits.download(), std::vector<float>(bits.begin(), bits.end()), 0.0f, 0.0f) == 0);
    CHECK(mismatches("scales", d_scales.download(), scales, 0.0f, 16 * eps_of<float>()) == 0);
    // error = c ∓ scale: off by the scale's few ulps at most.
    CHECK(mismatches("error", d_error.download(), error, 16 * eps_of<float>(), 4 * eps_of<float>()) == 0);
  }
}

TEST_CASE("1-bit decompress_add matches the CPU reference", "[gpu][onebit]") {
  const long chunk = 1024;
  const long n = 5 * chunk + 13;
  const long chunks = (n + chunk - 1) / chunk;
  std::vector<std::uint8_t> bits(static_cast<std::size_t>((n + 7) / 8));
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 13);
  const std::vector<float> scales = uniform(static_cast<std::size_t>(chunks), 31, 0.01f, 2.0f);
  std::vector<float> out = uniform(static_cast<std::size_t>(n), 32);
  const float weight = 0.25f;
  DeviceBytes d_bits(bits);
  DeviceArray<float> d_scales(scales), d_out(out);
  cuda::onebit_decompress_add(d_out.get(), d_bits.get(), d_scales.get(), weight, n, chunk, nullptr);
  for (long k = 0; k < chunks; ++k) {
    const long begin = k * chunk, len = std::min(chunk, n - begin);
    // The CPU reference reads bits from byte 0 of its chunk: chunk is a multiple of 8.
    cpu::onebit_decompress_add(out.data() + begin, bits.data() + begin / 8, scales[static_cast<std::size_t>(k)],
                               weight, len);
  }
  // weight·scale then one add, the same fp32 operations on both sides.
  CHECK(mismatches("out", d_out.download(), out, 0.0f, eps_of<float>()) == 0);
}
