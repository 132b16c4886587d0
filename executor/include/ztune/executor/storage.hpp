#pragma once
// Storage element types of the executor's buffers (issue 24 item 3): fp32, or
// bf16/fp16 for the parameters, gradients and activations of a mixed-precision
// run, with fp32 master weights and Adam states beside them as DeepSpeed and
// Megatron keep them (2 + 2 bytes per parameter of 16-bit copies plus 4 + 8 of
// fp32 master and momentum/variance). Kernels compute in fp32 either way: a
// 16-bit operand is read into fp32 and a 16-bit result rounded to nearest even
// when stored (IEEE 754 binary16; bfloat16 = the top half of binary32).
// TensorRef names a tensor in backend memory together with its storage type, so
// one interface takes fp32 and 16-bit operands alike (a float* is fp32).
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ztune/vocab/cluster.hpp"

namespace ztune::executor {

enum class StorageDtype : std::uint8_t { fp32, bf16, fp16 };

constexpr std::size_t storage_bytes(StorageDtype d) { return d == StorageDtype::fp32 ? 4 : 2; }
/// A plan's precision as a storage type, and back (Precision is the plan's vocabulary).
constexpr StorageDtype storage_of(Precision p) {
  return p == Precision::bf16 ? StorageDtype::bf16 : p == Precision::fp16 ? StorageDtype::fp16 : StorageDtype::fp32;
}
constexpr Precision precision_of(StorageDtype d) {
  return d == StorageDtype::bf16 ? Precision::bf16 : d == StorageDtype::fp16 ? Precision::fp16 : Precision::fp32;
}
constexpr const char* storage_name(StorageDtype d) {
  return d == StorageDtype::fp32 ? "fp32" : d == StorageDtype::bf16 ? "bf16" : "fp16";
}
/// "fp32", "bf16" or "fp16"; nullopt for anything else (the caller names the flag).
std::optional<StorageDtype> parse_storage_dtype(std::string_view s);

/// bfloat16: the upper 16 bits of the fp32 pattern, rounded to nearest even; NaN stays NaN.
std::uint16_t float_to_bf16(float f);
constexpr float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }
/// IEEE binary16, rounded to nearest even: overflow to ±inf, subnormals below 2⁻¹⁴.
std::uint16_t float_to_fp16(float f);
float fp16_to_float(std::uint16_t h);
/// Host conversion of n elements between storage types (dst and src must not overlap).
void convert_host(void* dst, StorageDtype dst_dtype, const void* src, StorageDtype src_dtype, std::size_t n);

/// A tensor in backend memory: its address and storage type. A float* converts
/// implicitly (fp32), so fp32 callers pass pointers as before.
struct TensorRef {
  void* ptr = nullptr;
  StorageDtype dtype = StorageDtype::fp32;

  TensorRef() = default;
  TensorRef(std::nullptr_t) {}                // NOLINT(google-explicit-constructor)
  TensorRef(float* p) : ptr(p) {}             // NOLINT(google-explicit-constructor)
  TensorRef(void* p, StorageDtype d) : ptr(p), dtype(d) {}

  [[nodiscard]] bool is_fp32() const { return dtype == StorageDtype::fp32; }
  /// The fp32 pointer (only for fp32 storage).
  [[nodiscard]] float* f32() const {
    assert(is_fp32());
    return static_cast<float*>(ptr);
  }
  /// The tensor `elems` elements further on.
  [[nodiscard]] TensorRef operator+(std::size_t elems) const {
    return {ptr == nullptr ? nullptr : static_cast<unsigned char*>(ptr) + elems * storage_bytes(dtype), dtype};
  }
  explicit operator bool() const { return ptr != nullptr; }
};

struct ConstTensorRef {
  const void* ptr = nullptr;
  StorageDtype dtype = StorageDtype::fp32;

  ConstTensorRef() = default;
  ConstTensorRef(std::nullptr_t) {}                      // NOLINT(google-explicit-constructor)
  ConstTensorRef(const float* p) : ptr(p) {}             // NOLINT(google-explicit-constructor)
  ConstTensorRef(TensorRef r) : ptr(r.ptr), dtype(r.dtype) {}  // NOLINT(google-explicit-constructor)
  ConstTensorRef(const void* p, StorageDtype d) : ptr(p), dtype(d) {}

  [[nodiscard]] bool is_fp32() const { return dtype == StorageDtype::fp32; }
  [[nodiscard]] const float* f32() const {
    assert(is_fp32());
    return static_cast<const float*>(ptr);
  }
  [[nodiscard]] ConstTensorRef operator+(std::size_t elems) const {
    return {ptr == nullptr ? nullptr : static_cast<const unsigned char*>(ptr) + elems * storage_bytes(dtype), dtype};
  }
  explicit operator bool() const { return ptr != nullptr; }
};

}  // namespace ztune::executor
