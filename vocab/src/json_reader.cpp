#include "ztune/vocab/json_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "ztune/vocab/text.hpp"

namespace ztune {

namespace {

using nlohmann::json;

/// At most `n` bytes of `s`, with "..." when cut (for quoting tokens in messages;
/// not cut inside a UTF-8 character). Control bytes, and where the text is not
/// valid UTF-8 every byte above 0x7f, are written as \xNN: a garbage file's
/// bytes are not echoed raw into the user's terminal.
std::string bounded(const std::string& s, std::size_t n = 60) {
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  const std::string cut = s.size() <= n ? s : s.substr(0, n);
  const bool utf8 = invalid_utf8_offset(cut) == std::string_view::npos;
  std::string out;
  for (const char ch : cut) {
    const auto b = static_cast<unsigned char>(ch);
    if (b < 0x20 || b == 0x7f || (b >= 0x80 && !utf8)) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    } else {
      out += ch;
    }
  }
  return s.size() <= n ? out : out + "...";
}

/// line:column of the character before the 1-based byte position `byte`, which is
/// what an editor shows: nlohmann reports the position of the last character read
/// (the offending one), so the characters before it are [0, byte - 1).
std::string line_col(const std::string& text, std::size_t byte) {
  std::size_t line = 1, col = 1;
  const std::size_t before = byte > 0 ? byte - 1 : 0;
  for (std::size_t i = 0; i < before && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

/// Builds the document from nlohmann's SAX events (as its own DOM parser does) while
/// knowing the JSON path of the value being read, so that a number out of range,
/// too deep a nesting or a repeated key is refused with the path. Never recursive.
class DomBuilder : public nlohmann::json_sax<json> {
 public:
  DomBuilder(const std::string& text, const std::string& file) : text_(text), file_(file) {}

  bool null() override { return add(nullptr); }
  bool boolean(bool v) override { return add(v); }
  bool number_integer(number_integer_t v) override { return add(v); }
  bool number_unsigned(number_unsigned_t v) override { return add(v); }
  bool number_float(number_float_t v, const string_t& token) override {
    if (!std::isfinite(v)) fail("number " + bounded(token) + " is out of range for a double");
    return add(v);
  }
  bool string(string_t& v) override { return add(std::move(v)); }
  bool binary(binary_t& v) override { return add(std::move(v)); }
  bool start_object(std::size_t) override { return open(json::value_t::object); }
  bool key(string_t& k) override {
    json& top = *frames_.back().value;
    frames_.back().key = k;
    if (top.contains(k)) fail("key given twice in one object");
    frames_.back().element = &top[k];
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::value_t::array); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& e) override {
    const std::string where = file_ + ":" + line_col(text_, position) + ": ";
    if (e.id == 406)  // out_of_range.406: the lexer's strtod overflowed (1e309, -1e309)
      throw InputError(where + path() + ": number " + bounded(last_token) +
                       " is out of range for a double (at most about 1.8e308)");
    std::string what = e.what();
    const auto pos = what.find("parse error");
    throw InputError(where + "malformed JSON: " + bounded(pos == std::string::npos ? what : what.substr(pos), 200));
  }

  json take() { return std::move(root_); }

 private:
  struct Frame {
    json* value;
    std::string key;              // the key being read, when *value is an object
    json* element = nullptr;      // where that key's value goes
  };

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(file_ + ": " + path() + ": " + what);
  }

  /// The JSON path of the value about to be added ("$.node.gpu", "$.steps[3]").
  [[nodiscard]] std::string path() const {
    std::string p = "$";
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const json& v = *frames_[i].value;
      if (v.is_object()) {
        p += "." + bounded(frames_[i].key);
      } else {
        // Outer arrays already hold the element being built; the innermost does not yet.
        const std::size_t index = i + 1 < frames_.size() ? v.size() - 1 : v.size();
        p += "[" + std::to_string(index) + "]";
      }
    }
    return p;
  }

  template <class V>
  json* place(V&& v) {
    if (frames_.empty()) {
      root_ = json(std::forward<V>(v));
      return &root_;
    }
    Frame& top = frames_.back();
    if (top.value->is_array()) {
      top.value->emplace_back(std::forward<V>(v));
      return &top.value->back();
    }
    *top.element = json(std::forward<V>(v));
    return top.element;
  }
  template <class V>
  bool add(V&& v) {
    place(std::forward<V>(v));
    return true;
  }
  bool open(json::value_t kind) {
    if (frames_.size() >= static_cast<std::size_t>(kMaxJsonDepth))
      fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels of arrays and objects");
    frames_.push_back({place(kind), {}, nullptr});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }

  const std::string& text_;
  const std::string& file_;
  json root_;
  std::vector<Frame> frames_;
};

/// Appends a rendering of `v` to `out` (as compact as dump()), stopping once `out` holds `budget` bytes and
/// descending at most `depth` levels (so it never recurses over a deep value).
void describe_into(const json& v, std::string& out, std::size_t budget, int depth) {
  if (out.size() >= budget) return;
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    // Cut before quoting; replace, not throw, on a code point cut in half.
    json cut = s.size() > budget ? s.substr(0, budget) : s;
    out += cut.dump(-1, ' ', false, json::error_handler_t::replace);
  } else if (v.is_object() || v.is_array()) {
    const bool obj = v.is_object();
    out += obj ? '{' : '[';
    if (depth <= 0 && !v.empty()) {
      out += "...";
    } else {
      bool first = true;
      for (auto it = v.begin(); it != v.end() && out.size() < budget; ++it) {
        if (!first) out += ',';
        first = false;
        if (obj) out += json(it.key()).dump(-1, ' ', false, json::error_handler_t::replace) + ':';
        describe_into(*it, out, budget, depth - 1);
      }
    }
    out += obj ? '}' : ']';
  } else {
    out += v.dump();  // a scalar: short
  }
}

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& file) {
  // nlohmann's lexer ends the input at a NUL byte, so what follows one (27 NULs
  // after a cluster's closing brace) was never read: JSON text has none.
  if (const auto nul = text.find('\0'); nul != std::string::npos) {
    const auto line_start = text.rfind('\n', nul);
    const std::size_t line = 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<long>(nul), '\n'));
    const std::size_t column = line_start == std::string::npos ? nul + 1 : nul - line_start;
    throw InputError(file + ":" + std::to_string(line) + ":" + std::to_string(column) +
                     ": a NUL byte; JSON text has none (a binary file, or one padded with zeros)");
  }
  DomBuilder builder(text, file);
  // strict: trailing characters after the value are an error. parse_error() above
  // throws, so a false return (which only it could cause) cannot be reached.
  (void)nlohmann::json::sax_parse(text, &builder, nlohmann::json::input_format_t::json, true);
  return builder.take();
}

nlohmann::json read_json_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open file");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(path + ": cannot read file: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a plain file";
    throw InputError(path + ": is " + std::string(kind) + ", expected a regular JSON file");
  }
  auto too_big = [&](std::uint64_t bytes) {
    return InputError(path + ": is " + std::to_string(bytes) + " bytes; JSON input files are limited to " +
                      std::to_string(kMaxJsonFileBytes >> 20) + " MiB");
  };
  if (static_cast<std::uint64_t>(st.st_size) > kMaxJsonFileBytes) throw too_big(static_cast<std::uint64_t>(st.st_size));
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(path + ": cannot read file: " + std::strerror(errno));
    }
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxJsonFileBytes) throw too_big(text.size());  // grew while being read
  }
  return parse_json_text(text, path);
}

std::string describe_json(const nlohmann::json& value) {
  constexpr std::size_t kLimit = 40;
  std::string s;
  describe_into(value, s, kLimit + 1, 3);
  if (s.size() > kLimit) s = s.substr(0, kLimit - 3) + "...";
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
  read_.insert(std::string(key));
  const auto it = object_->find(std::string(key));
  return it != object_->end() && !it->is_null();
}

const nlohmann::json& ObjectReader::require(std::string_view key) {
  std::string k(key);
  read_.insert(k);
  auto it = object_->find(k);
  if (it == object_->end()) {
    // A field of the object this key's spelling is close to: the user's typo
    // ("ffn_hiden" for ffn_hidden), named rather than only "missing".
    std::vector<std::string> present;
    for (const auto& [name, value] : object_->items())
      if (name.size() >= 4) present.push_back(name);
    if (const std::string near = nearest_name(k, present); k.size() >= 4 && !near.empty())
      throw error(key, "missing required field (the object has \"" + near + "\": did you mean " + k + "?)");
    throw error(key, "missing required field");
  }
  return *it;
}

const nlohmann::json& ObjectReader::raw(std::string_view key) { return require(key); }

double ObjectReader::positive(std::string_view key, bool allow_zero, double hi) {
  const auto& v = require(key);
  std::string expect = allow_zero ? "expected a number >= 0" : "expected a number > 0";
  if (std::isfinite(hi)) {
    char most[48];
    std::snprintf(most, sizeof most, " and at most %g", hi);
    expect += most;
  }
  if (!v.is_number()) throw error(key, expect + ", got " + describe_json(v));
  double d = v.get<double>();
  if (!std::isfinite(d) || d < 0.0 || (!allow_zero && d == 0.0) || d > hi)
    throw error(key, expect + ", got " + describe_json(v));
  return d;
}

double ObjectReader::number(std::string_view key, double lo, double hi) {
  const auto& v = require(key);
  const double d = v.is_number() ? v.get<double>() : std::nan("");
  if (!(d >= lo && d <= hi)) {  // NaN (not a number) fails too
    char range[96];
    std::snprintf(range, sizeof range, "[%.17g, %.17g]", lo, hi);
    throw error(key, std::string("expected a number in ") + range + ", got " + describe_json(v));
  }
  return d;
}

std::optional<double> ObjectReader::optional_positive(std::string_view key, bool allow_zero, double hi) {
  if (!has(key)) return std::nullopt;  // has() named the field
  return positive(key, allow_zero, hi);
}

std::optional<double> ObjectReader::optional_fraction(std::string_view key, bool allow_zero) {
  if (!has(key)) return std::nullopt;  // has() named the field
  return fraction(key, allow_zero);
}

std::int64_t ObjectReader::integer(std::string_view key, std::int64_t lo, std::int64_t hi) {
  const auto& v = require(key);
  auto fail = [&] {
    return error(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "], got " + describe_json(v));
  };
  std::int64_t n = 0;
  if (v.is_number_unsigned()) {
    // Above INT64_MAX the conversion would wrap to a negative number.
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) throw fail();
    n = static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
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
  if (!has(key)) return std::nullopt;  // has() named the field
  return integer(key, lo, hi);
}

bool ObjectReader::boolean(std::string_view key) {
  const auto& v = require(key);
  if (!v.is_boolean()) throw error(key, "expected true or false, got " + describe_json(v));
  return v.get<bool>();
}

std::optional<bool> ObjectReader::optional_boolean(std::string_view key) {
  if (!has(key)) return std::nullopt;  // has() named the field
  return boolean(key);
}

std::string ObjectReader::string(std::string_view key) {
  const auto& v = require(key);
  if (!v.is_string()) throw error(key, "expected a string, got " + describe_json(v));
  return v.get<std::string>();
}

std::string ObjectReader::name(std::string_view key) {
  std::string v = string(key);
  if (v.empty()) throw error(key, "expected a name, got an empty string");
  for (const char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f)
      throw error(key, "expected a name without control characters, got " + describe_json(nlohmann::json(v)));
  }
  return v;
}

std::optional<std::string> ObjectReader::optional_string(std::string_view key) {
  if (!has(key)) return std::nullopt;  // has() named the field
  return string(key);
}

template <class Names>
std::string ObjectReader::choice_of(std::string_view key, const Names& choices) {
  const auto& v = require(key);
  std::string list;
  for (std::string_view c : choices) list += (list.empty() ? "" : "|") + std::string(c);
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    for (std::string_view c : choices)
      if (s == c) return s;
  }
  throw error(key, "expected one of " + list + ", got " + describe_json(v));
}

std::string ObjectReader::choice(std::string_view key, std::initializer_list<std::string_view> choices) {
  return choice_of(key, choices);
}

std::string ObjectReader::choice(std::string_view key, std::span<const char* const> choices) {
  return choice_of(key, choices);
}

std::string ObjectReader::optional_choice(std::string_view key, std::initializer_list<std::string_view> choices,
                                          std::string_view fallback) {
  if (!has(key)) return std::string(fallback);  // has() named the field
  return choice(key, choices);
}

std::string ObjectReader::optional_choice(std::string_view key, std::span<const char* const> choices,
                                          std::string_view fallback) {
  if (!has(key)) return std::string(fallback);  // has() named the field
  return choice(key, choices);
}

ObjectReader ObjectReader::object(std::string_view key) {
  const auto& v = require(key);
  if (!v.is_object()) throw error(key, "expected an object, got " + describe_json(v));
  return ObjectReader(v, file_, path_of(key));
}

std::optional<ObjectReader> ObjectReader::optional_object(std::string_view key) {
  if (!has(key)) return std::nullopt;  // has() named the field
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

double ObjectReader::rate(std::string_view key, bool allow_zero) {
  const double v = positive(key, allow_zero, kMaxRate);
  if (v != 0 && v < kMinRate) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", v);
    throw error(key, (allow_zero ? "expected 0 or a number from 1e-06" : "expected a number from 1e-06") +
                         std::string(" to 1e+06, got ") + got);
  }
  return v;
}

std::optional<double> ObjectReader::optional_rate(std::string_view key) {
  if (!has(key)) return std::nullopt;
  return rate(key);
}

double ObjectReader::fraction(std::string_view key, bool allow_zero) {
  // Either end out of range is said with the whole range ("> 0" alone had
  // answered a 0, the range a 1.5).
  const auto& raw = require(key);
  const double v = raw.is_number() ? raw.get<double>() : std::nan("");
  if (!(v <= 1.0 && (allow_zero ? v >= 0.0 : v > 0.0)))
    throw error(key, std::string("expected a fraction in ") + (allow_zero ? "[0, 1]" : "(0, 1]") + ", got " +
                         describe_json(raw));
  // A fraction that may not be 0 is an efficiency, and times divide by it: one
  // below a millionth (1e-310 is read as > 0) makes them overflow.
  if (!allow_zero && v < kMinEfficiency) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", v);
    throw error(key, std::string("expected a fraction in (0, 1] of at least 1e-06, got ") + got);
  }
  return v;
}

}  // namespace ztune
