#include "ztune/executor/safetensors.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ztune/executor/storage.hpp"
#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/input_error.hpp"

namespace ztune::executor {

namespace {
using Dtype = SafetensorsFile::Dtype;
struct DtypeInfo {
  const char* name;
  Dtype dtype;
  std::uint64_t bytes;
};
// The element types a weight file may hold: safetensors' names for them.
constexpr std::array<DtypeInfo, 4> kDtypes{{{"F32", Dtype::f32, 4}, {"BF16", Dtype::bf16, 2}, {"F16", Dtype::f16, 2},
                                            {"F64", Dtype::f64, 8}}};
const DtypeInfo& dtype_info(Dtype d) {
  return *std::find_if(kDtypes.begin(), kDtypes.end(), [&](const DtypeInfo& i) { return i.dtype == d; });
}
}  // namespace

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
  if (const auto parent = std::filesystem::path(path).parent_path(); !parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw std::runtime_error(path + ": cannot create its directory: " + ec.message());
  }
  // DurableFile: a full disk or a crash part-way leaves the previous weights file whole.
  DurableFile out(path);
  const std::uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(len, 8);
  out.write(text);
  for (const auto& t : tensors) out.write(t.values.data(), t.values.size() * sizeof(float));
  if (auto why = out.commit()) throw std::runtime_error(path + ": cannot write: " + *why);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  // A directory, a FIFO or /dev/zero would throw from the stream or never end.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError(path + ": not a regular file (expected a safetensors weight file)");
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
  if (!header.is_object()) throw InputError(path + ": header: expected a JSON object of tensors");
  const std::size_t data_size = bytes_.size() - data_start_;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    index_[it.key()] = parse_entry(path + ": $." + it.key(), it.value(), data_size);
  }
}

SafetensorsFile::Entry SafetensorsFile::parse_entry(const std::string& where, const nlohmann::json& v,
                                                    std::size_t data_size) {
  if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
    throw InputError(where + ": expected {dtype, shape, data_offsets}");
  Entry e;
  const auto& dtype = v["dtype"];
  const auto known = std::find_if(kDtypes.begin(), kDtypes.end(),
                                  [&](const DtypeInfo& d) { return dtype.is_string() && dtype == d.name; });
  if (known == kDtypes.end())
    throw InputError(where + ".dtype: expected \"F32\", \"BF16\", \"F16\" or \"F64\" (ztune converts them to fp32 and "
                             "rounds to a 16-bit plan's storage itself), got " + dtype.dump());
  e.dtype = known->dtype;
  const auto& shape = v["shape"];
  if (!shape.is_array()) throw InputError(where + ".shape: expected an array of dimensions, got " + shape.dump());
  // The element count in 64 bits, refused before it can wrap: a header is input.
  std::uint64_t numel = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const auto& d = shape[i];
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT32_MAX))
      throw InputError(where + ".shape[" + std::to_string(i) + "]: expected a dimension 0.." +
                       std::to_string(INT32_MAX) + ", got " + d.dump());
    const std::uint64_t dim = d.get<std::uint64_t>();
    e.shape.push_back(static_cast<int>(dim));
    // Saturates just above the data's size: already too large for the file.
    numel = dim == 0 ? 0 : numel > (data_size + 1) / dim ? data_size + 1 : numel * dim;
  }
  const auto& offsets = v["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    throw InputError(where + ".data_offsets: expected [begin, end] byte offsets, got " + offsets.dump());
  const std::uint64_t begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
  const std::uint64_t width = known->bytes;
  if (end < begin || end > data_size || (end - begin) / width != numel || (end - begin) % width != 0)
    throw InputError(where + ".data_offsets: [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] does not hold the shape's " + std::to_string(numel) + " " + known->name +
                     " elements inside the file's " + std::to_string(data_size) + " data bytes");
  e.begin = static_cast<std::size_t>(begin);
  e.end = static_cast<std::size_t>(end);
  return e;
}

const SafetensorsFile::Entry* SafetensorsFile::find(const std::string& name) const {
  // Hugging Face's GPT2LMHeadModel.save_pretrained prefixes the body's tensors
  // with "transformer." (the hub's GPT-2 files do not): either spelling reads.
  for (const std::string& key : {name, "transformer." + name}) {
    auto it = index_.find(key);
    if (it != index_.end()) return &it->second;
  }
  return nullptr;
}

std::vector<float> SafetensorsFile::read(const std::string& name, const std::vector<int>& expected) const {
  const Entry* e = find(name);
  if (e == nullptr) throw InputError(path_ + ": tensor \"" + name + "\" is missing");
  if (e->shape != expected) {
    auto str = [](const std::vector<int>& s) {
      std::string o = "[";
      for (std::size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
      return o + "]";
    };
    throw InputError(path_ + ": tensor \"" + name + "\" has shape " + str(e->shape) + ", the model needs " +
                     str(expected));
  }
  const DtypeInfo& info = dtype_info(e->dtype);
  const std::size_t n = (e->end - e->begin) / info.bytes;
  const char* src = bytes_.data() + data_start_ + e->begin;
  std::vector<float> out(n);
  switch (e->dtype) {
    case Dtype::f32:
      std::memcpy(out.data(), src, n * sizeof(float));
      break;
    case Dtype::f64:
      for (std::size_t i = 0; i < n; ++i) {
        double x = 0;
        std::memcpy(&x, src + i * sizeof(double), sizeof(double));
        out[i] = static_cast<float>(x);  // rounds to nearest, as the 16-bit types round below
      }
      break;
    case Dtype::bf16:
    case Dtype::f16: {
      std::vector<std::uint16_t> halves(n);  // the data need not be 2-byte aligned in the file
      std::memcpy(halves.data(), src, n * sizeof(std::uint16_t));
      convert_host(out.data(), StorageDtype::fp32, halves.data(),
                   e->dtype == Dtype::bf16 ? StorageDtype::bf16 : StorageDtype::fp16, n);
      break;
    }
  }
  // Weights that are not finite train to NaN from the first step: refused here, by element.
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(out[i]))
      throw InputError(path_ + ": tensor \"" + name + "\": element " + std::to_string(i) + " is " +
                       (std::isnan(out[i]) ? "NaN" : "infinite") + "; weights must be finite numbers");
  return out;
}

}  // namespace ztune::executor
