#pragma once
// Shared helpers of the GPU tests (STYLE.md #4): device buffers that convert to and
// from the storage type on upload/download, inputs rounded to that type first (so
// the CPU reference sees exactly the values the GPU sees), and a comparison with
// tolerance atol + eps(T)·|ref| that prints the first mismatches and stops after 10.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "ztune/kernels/cuda/check.hpp"

namespace ztune::test {

template <typename T>
float to_float(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half2float(x);
  } else {
    return __bfloat162float(x);
  }
}
template <typename T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(x);
  } else {
    return __float2bfloat16_rn(x);
  }
}

/// Machine epsilon of the storage type: the spacing of values in [1, 2).
template <typename T>
constexpr float eps_of() {
  if constexpr (std::is_same_v<T, float>) {
    return 1.1920929e-7f;  // 2^-23
  } else if constexpr (std::is_same_v<T, __half>) {
    return 9.765625e-4f;  // 2^-10
  } else {
    return 7.8125e-3f;  // 2^-7
  }
}
template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) {
    return "fp32";
  } else if constexpr (std::is_same_v<T, __half>) {
    return "fp16";
  } else {
    return "bf16";
  }
}

/// Uniform values in [lo, hi), reproducible from `seed`.
inline std::vector<float> uniform(std::size_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

/// The values as the storage type T holds them.
template <typename T>
std::vector<float> rounded(std::vector<float> v) {
  for (auto& x : v) x = to_float(from_float<T>(x));
  return v;
}

/// A device array of T, RAII.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : n_(n) {
    if (n_ > 0) ZT_CUDA_CHECK(cudaMalloc(&p_, n_ * sizeof(T)));
    if (n_ > 0) ZT_CUDA_CHECK(cudaMemset(p_, 0, n_ * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<float>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(const std::vector<float>& host) {
    std::vector<T> tmp(host.size());
    for (std::size_t i = 0; i < host.size(); ++i) tmp[i] = from_float<T>(host[i]);
    ZT_CUDA_CHECK(cudaMemcpy(p_, tmp.data(), tmp.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() const {
    ZT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> tmp(n_);
    ZT_CUDA_CHECK(cudaMemcpy(tmp.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> out(n_);
    for (std::size_t i = 0; i < n_; ++i) out[i] = to_float(tmp[i]);
    return out;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Device copy of int32 ids.
class DeviceIds {
 public:
  explicit DeviceIds(const std::vector<std::int32_t>& ids) : n_(ids.size()) {
    ZT_CUDA_CHECK(cudaMalloc(&p_, n_ * sizeof(std::int32_t)));
    ZT_CUDA_CHECK(cudaMemcpy(p_, ids.data(), n_ * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  }
  ~DeviceIds() { cudaFree(p_); }
  DeviceIds(const DeviceIds&) = delete;
  DeviceIds& operator=(const DeviceIds&) = delete;
  const std::int32_t* get() const { return p_; }

 private:
  std::int32_t* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Number of i with |got − ref| > atol + rtol·|ref| (NaN counts); prints the first 10.
inline int mismatches(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref,
                      float atol, float rtol) {
  if (got.size() != ref.size()) {
    std::printf("%s: size %zu, expected %zu\n", what.c_str(), got.size(), ref.size());
    return 1;
  }
  int bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == ref[i] || (std::isnan(got[i]) && std::isnan(ref[i]))) continue;  // infinities, exact hits
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double tol = atol + rtol * std::fabs(static_cast<double>(ref[i]));
    if (!(err <= tol)) {
      if (bad < 10) std::printf("  %s[%zu]: got %.8g, expected %.8g (|err| %.3g > tol %.3g)\n", what.c_str(), i,
                                static_cast<double>(got[i]), static_cast<double>(ref[i]), err, tol);
      ++bad;
    }
    if (err > worst) worst = err;
  }
  if (bad > 0) std::printf("%s: %d of %zu elements outside tolerance (max |err| %.3g)\n", what.c_str(), bad,
                           got.size(), worst);
  return bad;
}

}  // namespace ztune::test
