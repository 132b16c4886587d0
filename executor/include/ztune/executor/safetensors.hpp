#pragma once
// safetensors (Hugging Face's format): an 8-byte little-endian header length, a
// JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {...}}, then the raw little-endian data. Written as fp32
// ("F32"); read from F32, BF16, F16 or F64, converted to fp32 (a 16-bit plan
// rounds the weights to its own storage afterwards).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ztune::executor {

struct NamedTensor {
  std::string name;
  std::vector<int> shape;
  std::vector<float> values;
};

/// Writes atomically (temporary file, then rename). Throws std::runtime_error on I/O failure.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

class SafetensorsFile {
 public:
  enum class Dtype { f32, bf16, f16, f64 };

  /// Reads and validates the header; throws InputError naming the file.
  explicit SafetensorsFile(const std::string& path);
  [[nodiscard]] bool has(const std::string& name) const { return find(name) != nullptr; }
  /// The tensor's values in fp32; InputError naming the file and tensor when
  /// absent or of another shape. A name is also found under "transformer."
  /// (Hugging Face's GPT2LMHeadModel saves the body under it).
  [[nodiscard]] std::vector<float> read(const std::string& name, const std::vector<int>& expected_shape) const;

 private:
  struct Entry {
    std::vector<int> shape;
    Dtype dtype = Dtype::f32;
    std::size_t begin = 0, end = 0;
  };
  /// One header entry, every field checked against the data's size.
  static Entry parse_entry(const std::string& where, const nlohmann::json& v, std::size_t data_size);
  [[nodiscard]] const Entry* find(const std::string& name) const;
  std::string path_;
  std::vector<char> bytes_;
  std::size_t data_start_ = 0;
  std::map<std::string, Entry> index_;
};

}  // namespace ztune::executor
