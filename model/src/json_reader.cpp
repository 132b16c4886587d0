#include "ztune/model/json_reader.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

namespace ztune {

nlohmann::json parse_json_text(const std::string& text, const std::string& file) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // Translate the byte offset into line:column, which is what an editor shows.
    // e.byte is the 1-based position of the last character read (the offending
    // one), so the characters before it are [0, e.byte - 1).
    std::size_t line = 1, col = 1;
    const std::size_t before = e.byte > 0 ? e.byte - 1 : 0;
    for (std::size_t i = 0; i < before && i < text.size(); ++i) {
      if (text[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    std::string what = e.what();
    auto pos = what.find("parse error");
    throw InputError(file + ":" + std::to_string(line) + ":" + std::to_string(col) +
                     ": malformed JSON: " + (pos == std::string::npos ? what : what.substr(pos)));
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_json_text(buffer.str(), path);
}

std::string describe_json(const nlohmann::json& value) {
  std::string s = value.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

ObjectReader::ObjectReader(const nlohmann::json& object, std::string file, std::string path)
    : object_(&object), file_(std::move(file)), path_(std::move(path)) {
  if (!object.is_object())
    throw InputError(file_ + ": " + path_ + ": expected an object, got " + describe_json(object));
}

std::string ObjectReader::path_of(std::string_view key) const {
  if (key.empty()) return path_;
  return path_ + "." + std::string(key);
}

InputError ObjectReader::error(std::string_view key, const std::string& what) const {
  return InputError(file_ + ": " + path_of(key) + ": " + what);
}

bool ObjectReader::has(std::string_view key) const {
  return object_->contains(std::string(key)) && !(*object_)[std::string(key)].is_null();
}

const nlohmann::json& ObjectReader::require(std::string_view key) {
  std::string k(key);
  read_.insert(k);
  auto it = object_->find(k);
  if (it == object_->end()) throw error(key, "missing required field");
  return *it;
}

const nlohmann::json& ObjectReader::raw(std::string_view key) { return require(key); }

double ObjectReader::positive(std::string_view key, bool allow_zero) {
  const auto& v = require(key);
  const char* expect = allow_zero ? "expected a number >= 0" : "expected a number > 0";
  if (!v.is_number()) throw error(key, std::string(expect) + ", got " + describe_json(v));
  double d = v.get<double>();
  if (!std::isfinite(d) || d < 0.0 || (!allow_zero && d == 0.0))
    throw error(key, std::string(expect) + ", got " + describe_json(v));
  return d;
}

std::optional<double> ObjectReader::optional_positive(std::string_view key, bool allow_zero) {
  if (!has(key)) { read_.insert(std::string(key)); return std::nullopt; }
  return positive(key, allow_zero);
}

std::int64_t ObjectReader::integer(std::string_view key, std::int64_t lo, std::int64_t hi) {
  const auto& v = require(key);
  auto fail = [&] {
    return error(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "], got " + describe_json(v));
  };
  std::int64_t n = 0;
  if (v.is_number_integer()) {
    n = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9e15) throw fail();
    n = static_cast<std::int64_t>(d);
  } else {
    throw fail();
  }
  if (n < lo || n > hi) throw fail();
  return n;
}

std::optional<std::int64_t> ObjectReader::optional_integer(std::string_view key, std::int64_t lo,
                                                           std::int64_t hi) {
  if (!has(key)) { read_.insert(std::string(key)); return std::nullopt; }
  return integer(key, lo, hi);
}

bool ObjectReader::boolean(std::string_view key) {
  const auto& v = require(key);
  if (!v.is_boolean()) throw error(key, "expected true or false, got " + describe_json(v));
  return v.get<bool>();
}

std::optional<bool> ObjectReader::optional_boolean(std::string_view key) {
  if (!has(key)) { read_.insert(std::string(key)); return std::nullopt; }
  return boolean(key);
}

std::string ObjectReader::string(std::string_view key) {
  const auto& v = require(key);
  if (!v.is_string()) throw error(key, "expected a string, got " + describe_json(v));
  return v.get<std::string>();
}

std::optional<std::string> ObjectReader::optional_string(std::string_view key) {
  if (!has(key)) { read_.insert(std::string(key)); return std::nullopt; }
  return string(key);
}

std::string ObjectReader::choice(std::string_view key, std::initializer_list<std::string_view> choices) {
  const auto& v = require(key);
  std::string list;
  for (auto c : choices) list += (list.empty() ? "" : "|") + std::string(c);
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    for (auto c : choices)
      if (s == c) return s;
  }
  throw error(key, "expected one of " + list + ", got " + describe_json(v));
}

std::string ObjectReader::optional_choice(std::string_view key, std::initializer_list<std::string_view> choices,
                                          std::string_view fallback) {
  if (!has(key)) {
    read_.insert(std::string(key));
    return std::string(fallback);
  }
  return choice(key, choices);
}

ObjectReader ObjectReader::object(std::string_view key) {
  const auto& v = require(key);
  if (!v.is_object()) throw error(key, "expected an object, got " + describe_json(v));
  return ObjectReader(v, file_, path_of(key));
}

std::optional<ObjectReader> ObjectReader::optional_object(std::string_view key) {
  if (!has(key)) { read_.insert(std::string(key)); return std::nullopt; }
  return object(key);
}

void ObjectReader::schema(std::string_view expected) {
  const auto& v = require("schema");
  if (!v.is_string() || v.get<std::string>() != expected) {
    std::string hint;
    if (v.is_string()) {
      auto got = v.get<std::string>();
      auto slash_e = expected.rfind('/');
      auto slash_g = got.rfind('/');
      if (slash_e != std::string_view::npos && slash_g != std::string::npos &&
          got.substr(0, slash_g) == expected.substr(0, slash_e))
        hint = " (a different version of this format: this ztune reads " + std::string(expected) + ")";
    }
    throw error("schema", "expected \"" + std::string(expected) + "\", got " + describe_json(v) + hint);
  }
}

void ObjectReader::finish() const {
  for (const auto& [key, value] : object_->items()) {
    if (read_.find(key) == read_.end()) {
      std::string known;
      for (const auto& k : read_) known += (known.empty() ? "" : ", ") + k;
      throw InputError(file_ + ": " + path_of(key) + ": unknown field (expected only: " + known + ")");
    }
  }
}

}  // namespace ztune
