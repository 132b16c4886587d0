#pragma once
// Storage element types of the executor's buffers (issue 24 item 3). The CPU
// backend computes in fp32 only; the CUDA backend may keep parameters, gradients
// and activations in 16 bits with fp32 master weights and Adam states beside them,
// as DeepSpeed and Megatron do: 2 + 2 bytes per parameter of 16-bit copies plus
// 4 + 8 of fp32 master and momentum/variance (MixedPrecisionParams).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ztune::executor {

enum class StorageDtype : std::uint8_t { fp32, bf16, fp16 };

constexpr std::size_t storage_bytes(StorageDtype d) { return d == StorageDtype::fp32 ? 4 : 2; }
constexpr const char* storage_name(StorageDtype d) {
  return d == StorageDtype::fp32 ? "fp32" : d == StorageDtype::bf16 ? "bf16" : "fp16";
}
/// "fp32", "bf16" or "fp16"; nullopt for anything else (the caller names the flag).
std::optional<StorageDtype> parse_storage_dtype(std::string_view s);

}  // namespace ztune::executor
