#pragma once
// safetensors (Hugging Face's format): an 8-byte little-endian header length, a
// JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {...}}, then the raw little-endian data. fp32 ("F32") only.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

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
  /// Reads and validates the header; throws InputError naming the file.
  explicit SafetensorsFile(const std::string& path);
  [[nodiscard]] bool has(const std::string& name) const { return index_.count(name) != 0; }
  /// The tensor's values; InputError naming the file and tensor when absent or of another shape.
  [[nodiscard]] std::vector<float> read(const std::string& name, const std::vector<int>& expected_shape) const;

 private:
  struct Entry {
    std::vector<int> shape;
    std::size_t begin = 0, end = 0;
  };
  std::string path_;
  std::vector<char> bytes_;
  std::size_t data_start_ = 0;
  std::map<std::string, Entry> index_;
};

}  // namespace ztune::executor
