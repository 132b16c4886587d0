#pragma once
// What every libFuzzer target here shares (issue 20, part 6): the bytes are parsed
// as the reader's file would be (parse_json_text, the from-string entry point of
// read_json_file), the reader runs on the document, and an InputError is a normal
// outcome, provided its message names the file. Anything else escaping (another
// exception, a crash, a hang, a sanitizer report) is a finding: it aborts, so
// libFuzzer saves the input under findings/.
//
//   extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {
//     return ztune::fuzz::read_bytes(d, n, "fuzz-cluster.json", [](const auto& doc, const auto& file) {...});
//   }
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include <nlohmann/json.hpp>

#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"

namespace ztune::fuzz {

/// Stops the fuzzer with `what`: a finding.
[[noreturn]] inline void finding(const char* file, const std::string& what) {
  std::fprintf(stderr, "fuzz finding (%s): %s\n", file, what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// A property every accepted document must have (e.g. a round trip): a finding if false.
inline void expect(bool ok, const char* file, const char* what) {
  if (!ok) finding(file, what);
}

/// The JSON path of the first difference between `a` and `b`, numbers compared to a
/// relative 1e-12 (the readers convert units, µs ↔ s, which is not exact), or "" when
/// they agree. `a` and `b` are documents ztune wrote, so the recursion is shallow.
inline std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    const double scale = std::max(std::fabs(x), std::fabs(y));
    return std::fabs(x - y) <= 1e-12 * scale ? "" : path + ": " + a.dump() + " then " + b.dump();
  }
  if (a.type() != b.type() || a.size() != b.size()) return path + ": " + a.dump().substr(0, 200) + " then " +
                                                           b.dump().substr(0, 200);
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key())) return path + "." + it.key() + ": missing after the round trip";
      std::string d = first_difference(it.value(), b.at(it.key()), path + "." + it.key());
      if (!d.empty()) return d;
    }
    return "";
  }
  if (a.is_array()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string d = first_difference(a[i], b[i], path + "[" + std::to_string(i) + "]");
      if (!d.empty()) return d;
    }
    return "";
  }
  return a == b ? "" : path + ": " + a.dump().substr(0, 200) + " then " + b.dump().substr(0, 200);
}

/// A round trip must give back what was written (to rounding): a finding naming
/// the first difference if not.
inline void expect_same(const nlohmann::json& written, const nlohmann::json& read_back, const char* file,
                        const char* what) {
  const std::string d = first_difference(written, read_back, "$");
  if (!d.empty()) finding(file, std::string(what) + ": " + d);
}

/// Runs `read(doc, file)` on the parsed bytes. Returns 0 (libFuzzer's "keep going").
template <class Read>
int read_bytes(const std::uint8_t* data, std::size_t size, const char* file, Read read) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string name(file);
  try {
    read(parse_json_text(text, name), name);
  } catch (const InputError& e) {
    const std::string msg = e.what();
    if (msg.find(name) == std::string::npos) finding(file, "InputError does not name the file: " + msg.substr(0, 400));
    if (msg.size() > 16384) finding(file, "InputError message of " + std::to_string(msg.size()) + " bytes");
  } catch (const std::exception& e) {
    finding(file, std::string(typeid(e).name()) + " escaped the reader: " + std::string(e.what()).substr(0, 400));
  } catch (...) {
    finding(file, "a non-std exception escaped the reader");
  }
  return 0;
}

}  // namespace ztune::fuzz
