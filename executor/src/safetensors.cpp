#include "ztune/executor/safetensors.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ztune/vocab/input_error.hpp"

namespace ztune::executor {

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::size_t offset = 0;
  for (const auto& t : tensors) {
    const std::size_t bytes = t.values.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // keep the data 8-byte aligned
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(path + ": cannot write");
    const std::uint64_t n = text.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors)
      out.write(reinterpret_cast<const char*>(t.values.data()),
                static_cast<std::streamsize>(t.values.size() * sizeof(float)));
    if (!out) throw std::runtime_error(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": rename failed");
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open safetensors file");
  bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (bytes_.size() < 8) throw InputError(path + ": not a safetensors file (shorter than its 8-byte header length)");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes_[static_cast<std::size_t>(i)]);
  if (n > bytes_.size() - 8) throw InputError(path + ": header length " + std::to_string(n) + " exceeds the file");
  data_start_ = 8 + n;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes_.begin() + 8, bytes_.begin() + static_cast<long>(data_start_));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": header is not JSON: " + e.what());
  }
  const std::size_t data_size = bytes_.size() - data_start_;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& v = it.value();
    const std::string where = path + ": $." + it.key();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      throw InputError(where + ": expected {dtype, shape, data_offsets}");
    if (v["dtype"] != "F32")
      throw InputError(where + ".dtype: expected \"F32\" (ztune reads fp32 weights and rounds them to a 16-bit plan's storage itself), got " + v["dtype"].dump());
    Entry e;
    for (const auto& d : v["shape"]) e.shape.push_back(d.get<int>());
    e.begin = v["data_offsets"][0].get<std::size_t>();
    e.end = v["data_offsets"][1].get<std::size_t>();
    std::size_t numel = 1;
    for (int d : e.shape) numel *= static_cast<std::size_t>(d);
    if (e.end < e.begin || e.end > data_size || e.end - e.begin != numel * sizeof(float))
      throw InputError(where + ".data_offsets: [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                       "] does not hold " + std::to_string(numel) + " floats inside the file");
    index_[it.key()] = e;
  }
}

std::vector<float> SafetensorsFile::read(const std::string& name, const std::vector<int>& expected) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw InputError(path_ + ": tensor \"" + name + "\" is missing");
  if (it->second.shape != expected) {
    auto str = [](const std::vector<int>& s) {
      std::string o = "[";
      for (std::size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
      return o + "]";
    };
    throw InputError(path_ + ": tensor \"" + name + "\" has shape " + str(it->second.shape) + ", the model needs " +
                     str(expected));
  }
  std::vector<float> out((it->second.end - it->second.begin) / sizeof(float));
  std::memcpy(out.data(), bytes_.data() + data_start_ + it->second.begin, out.size() * sizeof(float));
  return out;
}

}  // namespace ztune::executor
