#include "ztune/executor/storage.hpp"

#include <cstring>
#include <stdexcept>

namespace ztune::executor {

std::optional<StorageDtype> parse_storage_dtype(std::string_view s) {
  if (s == "fp32") return StorageDtype::fp32;
  if (s == "bf16") return StorageDtype::bf16;
  if (s == "fp16") return StorageDtype::fp16;
  return std::nullopt;
}

std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(u >> 16);
}

std::uint16_t float_to_fp16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // ≥ 65520 rounds past 65504: inf
  if (ax < 0x38800000u) {
    // Below 2⁻¹⁴: a multiple of 2⁻²⁴ (or zero). Adding 0.5, whose ulp is 2⁻²⁴,
    // lets the FPU round it to nearest even; the low bits are then the count.
    const float r = std::bit_cast<float>(ax) + 0.5f;
    return sign | static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(r) - 0x3f000000u);
  }
  // Normal: rebias the exponent (127 → 15) and round the 13 dropped bits to nearest even.
  ax += 0xc8000fffu + ((ax >> 13) & 1u);
  return sign | static_cast<std::uint16_t>(ax >> 13);
}

float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m · 2⁻²⁴
    const float v = static_cast<float>(m) * 0x1p-24f;
    return sign != 0 ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

namespace {
float load(const void* src, StorageDtype t, std::size_t i) {
  if (t == StorageDtype::fp32) return static_cast<const float*>(src)[i];
  const std::uint16_t h = static_cast<const std::uint16_t*>(src)[i];
  return t == StorageDtype::bf16 ? bf16_to_float(h) : fp16_to_float(h);
}
}  // namespace

void convert_host(void* dst, StorageDtype dst_dtype, const void* src, StorageDtype src_dtype, std::size_t n) {
  if (dst_dtype == src_dtype) {
    std::memcpy(dst, src, n * storage_bytes(dst_dtype));
    return;
  }
  switch (dst_dtype) {
    case StorageDtype::fp32:
      for (std::size_t i = 0; i < n; ++i) static_cast<float*>(dst)[i] = load(src, src_dtype, i);
      return;
    case StorageDtype::bf16:
      for (std::size_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(dst)[i] = float_to_bf16(load(src, src_dtype, i));
      return;
    case StorageDtype::fp16:
      for (std::size_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(dst)[i] = float_to_fp16(load(src, src_dtype, i));
      return;
  }
  throw std::logic_error("convert_host: unknown storage type");
}

}  // namespace ztune::executor
