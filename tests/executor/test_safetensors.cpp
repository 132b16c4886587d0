// Weight files (`ztune-worker --init-from`): safetensors read from F32, BF16,
// F16 and F64, each element against its IEEE 754 closed form; every malformed
// header refused with the file and the header's JSON path. The files are built
// here byte by byte, not by write_safetensors, so the reader is checked against
// the format rather than against its own writer.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ztune/executor/safetensors.hpp"
#include "ztune/vocab/input_error.hpp"

using namespace ztune::executor;

namespace {

std::string temp_path(const std::string& name) { return "/tmp/ztune_test_safetensors_" + name + ".safetensors"; }

/// header_json verbatim, then data: safetensors' 8-byte little-endian length first.
std::string write_file(const std::string& name, const std::string& header_json, const std::vector<unsigned char>& data) {
  const std::string path = temp_path(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::uint64_t n = header_json.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header_json;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return path;
}

void put16(std::vector<unsigned char>& d, std::uint16_t v) {
  d.push_back(static_cast<unsigned char>(v & 0xff));
  d.push_back(static_cast<unsigned char>(v >> 8));
}

/// The InputError's message for reading `path` (and tensor `name` when given); "" when it reads.
std::string refusal(const std::string& path, const std::string& name = "", std::vector<int> shape = {}) {
  try {
    SafetensorsFile f(path);
    if (!name.empty()) (void)f.read(name, shape);
  } catch (const ztune::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("weight files in BF16, F16 and F64 read as their exact fp32 values", "[safetensors]") {
  std::vector<unsigned char> data;
  // bf16 (offset 0, 4 elements): 1, -2, 1 + 2^-7, the largest finite 0x7f7f = (2 - 2^-7)·2^127.
  for (std::uint16_t v : {std::uint16_t{0x3f80}, std::uint16_t{0xc000}, std::uint16_t{0x3f81}, std::uint16_t{0x7f7f}}) put16(data, v);
  // fp16 (offset 8, 4 elements): 1, -2.5, the smallest subnormal 2^-24, the largest finite 65504.
  for (std::uint16_t v : {std::uint16_t{0x3c00}, std::uint16_t{0xc100}, std::uint16_t{0x0001}, std::uint16_t{0x7bff}}) put16(data, v);
  // f64 (offset 16, 2 elements): 0.1 rounds to fp32's nearest, 1 + 2^-30 rounds to 1.
  for (double x : {0.1, 1.0 + 0x1p-30}) {
    unsigned char b[8];
    std::memcpy(b, &x, 8);
    data.insert(data.end(), b, b + 8);
  }
  // f32 (offset 32), one element.
  const float third = 1.0f / 3.0f;
  unsigned char b[4];
  std::memcpy(b, &third, 4);
  data.insert(data.end(), b, b + 4);
  // The header's 267 bytes put the data at an odd offset: 16-bit elements need not be aligned.
  const std::string header =
      R"({"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F16","shape":[4],"data_offsets":[8,16]},)"
      R"("c":{"dtype":"F64","shape":[2],"data_offsets":[16,32]},)"
      R"("transformer.d":{"dtype":"F32","shape":[1],"data_offsets":[32,36]},"__metadata__":{"format":"pt"}}   )";
  const std::string path = write_file("dtypes", header, data);
  SafetensorsFile f(path);
  CHECK(f.read("a", {2, 2}) == std::vector<float>{1.0f, -2.0f, 1.0f + 0x1p-7f, (2.0f - 0x1p-7f) * 0x1p127f});
  CHECK(f.read("b", {4}) == std::vector<float>{1.0f, -2.5f, 0x1p-24f, 65504.0f});
  CHECK(f.read("c", {2}) == std::vector<float>{0.1f, 1.0f});
  // Hugging Face's GPT2LMHeadModel.save_pretrained names the body "transformer.…".
  CHECK(f.has("d"));
  CHECK(f.read("d", {1}) == std::vector<float>{third});
  CHECK(refusal(path, "a", {4}) == path + R"(: tensor "a" has shape [2, 2], the model needs [4])");
  CHECK(refusal(path, "e", {1}) == path + R"(: tensor "e" is missing)");
  std::remove(path.c_str());
}

TEST_CASE("a malformed weight-file header is refused with the file and the header's path", "[safetensors]") {
  const std::vector<unsigned char> eight(8, 0);
  struct Case {
    const char* header;
    const char* expected;  // the message after "<path>: "
  };
  const std::vector<Case> cases{
      {R"([1,2])", "header: expected a JSON object of tensors"},
      {R"({"w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
       R"($.w.dtype: expected "F32", "BF16", "F16" or "F64")"},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "$.w.shape[0]: expected a dimension 0..2147483647, got -2"},
      {R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", "$.w.shape[0]: expected a dimension"},
      {R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", "$.w.shape: expected an array of dimensions, got 2"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", "$.w.data_offsets: expected [begin, end] byte offsets"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":["0","8"]}})", "$.w.data_offsets: expected [begin, end]"},
      {R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       "$.w.data_offsets: [0, 8] does not hold the shape's 3 F32 elements inside the file's 8 data bytes"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", "$.w.data_offsets: [8, 0] does not hold"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", "$.w.data_offsets: [4, 12] does not hold"},
      // 2^31-1 cubed wraps a 64-bit product; the count saturates instead.
      {R"({"w":{"dtype":"F32","shape":[2147483647,2147483647,2147483647,8],"data_offsets":[0,8]}})",
       "$.w.data_offsets: [0, 8] does not hold the shape's 9 F32 elements"},
      {R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,7]}})", "$.w.data_offsets: [0, 7] does not hold"},
      {R"({"w":[1]})", "$.w: expected {dtype, shape, data_offsets}"},
      {R"({"w":)", "header is not JSON"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string path = write_file("bad" + std::to_string(i), cases[i].header, eight);
    INFO(cases[i].header);
    const std::string message = refusal(path);
    CHECK(message.rfind(path + ": " + cases[i].expected, 0) == 0);
    std::remove(path.c_str());
  }
  // A header longer than the file, and a file shorter than the length field.
  const std::string path = temp_path("short");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write("\xff\x00\x00\x00\x00\x00\x00\x00{}", 10);
  }
  CHECK(refusal(path) == path + ": header length 255 exceeds the file");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write("\x02\x00", 2);
  }
  CHECK(refusal(path) == path + ": not a safetensors file (shorter than its 8-byte header length)");
  std::remove(path.c_str());
  // A directory, or a device that never ends, is not read at all.
  CHECK(refusal("/tmp") == "/tmp: not a regular file (expected a safetensors weight file)");
  CHECK(refusal("/dev/zero") == "/dev/zero: not a regular file (expected a safetensors weight file)");
}

TEST_CASE("weights that are not finite are refused by tensor and element", "[safetensors]") {
  std::vector<unsigned char> data;
  // bf16: 1, then NaN (0x7fc0); fp16: 2, then +inf (0x7c00).
  for (std::uint16_t v : {std::uint16_t{0x3f80}, std::uint16_t{0x7fc0}, std::uint16_t{0x4000}, std::uint16_t{0x7c00}})
    put16(data, v);
  const std::string path =
      write_file("nonfinite",
                 R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]}})",
                 data);
  CHECK(refusal(path, "a", {2}) == path + R"(: tensor "a": element 1 is NaN; weights must be finite numbers)");
  CHECK(refusal(path, "b", {2}) == path + R"(: tensor "b": element 1 is infinite; weights must be finite numbers)");
  std::remove(path.c_str());
}
