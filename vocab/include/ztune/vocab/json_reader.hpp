#pragma once
// Strict JSON object reading: every key must be read exactly once (unknown keys
// are rejected by finish()), every value is type- and range-checked, and every
// error names the file and the JSON path (STYLE.md #7).
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/vocab/input_error.hpp"

namespace ztune {

/// Limits every JSON reader enforces, so that no input crashes, hangs or runs away
/// (issue 20). Arrays and objects may nest this deep (the top-level value is level 1);
/// no ztune file needs more than 6.
inline constexpr int kMaxJsonDepth = 64;
/// The largest JSON file read_json_file accepts (the largest ztune writes is a few MiB).
inline constexpr std::uint64_t kMaxJsonFileBytes = 64ull << 20;

/// Parses `text` as JSON. Every failure is an InputError naming `file`: a syntax error
/// with line and column; a number out of range for a double (1e309), nesting deeper
/// than kMaxJsonDepth and a key given twice in one object also with the JSON path.
nlohmann::json parse_json_text(const std::string& text, const std::string& file);
/// Reads and parses a file. A missing file, one that is not a regular file (a
/// directory, FIFO or device: refused without blocking) or one larger than
/// kMaxJsonFileBytes is an InputError naming it.
nlohmann::json read_json_file(const std::string& path);
/// Short rendering of a JSON value for error messages (strings quoted, long values
/// cut). Bounded in time, memory and stack whatever the value's size or depth.
std::string describe_json(const nlohmann::json& value);

/// The smallest efficiency a profile may state (ObjectReader::fraction).
inline constexpr double kMinEfficiency = 1e-6;
/// The range of a physical rate a file may state (ObjectReader::rate): GB/s,
/// TFLOP/s, Gparam/s. A million is 1,000 times NVLink 5 or a B200, and past it
/// the times and byte counts computed from it overflow; a millionth (a kB/s, a
/// MFLOP/s) is the floor under the rates times divide by (1e-310 reads as > 0
/// and made every time infinite). Cluster and profile files share it.
inline constexpr double kMinRate = 1e-6;
inline constexpr double kMaxRate = 1e6;
/// The longest latency or per-operation cost a file may state, in µs (a second).
inline constexpr double kMaxLatencyUs = 1e6;

class ObjectReader {
 public:
  /// `file` names the source in messages; `path` is the JSON path of `object` ("$" at the top).
  ObjectReader(const nlohmann::json& object, std::string file, std::string path);

  /// Whether `key` is present and not null (an optional field given as null
  /// reads as absent). Asking names `key` a field of this object: finish()
  /// neither refuses it as unknown nor leaves it out of its list of fields.
  [[nodiscard]] bool has(std::string_view key) const;
  /// A number > 0 (or >= 0 when `allow_zero`), and at most `hi` when one is given
  /// (a physical quantity's plausible ceiling: past it the times overflow).
  double positive(std::string_view key, bool allow_zero = false,
                  double hi = std::numeric_limits<double>::infinity());
  /// A fraction in (0, 1] (an efficiency, at least kMinEfficiency: times divide
  /// by it), or [0, 1] with allow_zero (overlap shares).
  double fraction(std::string_view key, bool allow_zero = false);
  std::optional<double> optional_positive(std::string_view key, bool allow_zero = false,
                                          double hi = std::numeric_limits<double>::infinity());
  std::optional<double> optional_fraction(std::string_view key, bool allow_zero = false);
  /// A physical rate in [kMinRate, kMaxRate] (or 0 with allow_zero).
  double rate(std::string_view key, bool allow_zero = false);
  std::optional<double> optional_rate(std::string_view key);
  /// A number in [lo, hi] (finite: lo and hi must be).
  double number(std::string_view key, double lo, double hi);
  /// An integer in [lo, hi].
  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi);
  std::optional<std::int64_t> optional_integer(std::string_view key, std::int64_t lo, std::int64_t hi);
  bool boolean(std::string_view key);
  std::optional<bool> optional_boolean(std::string_view key);
  std::string string(std::string_view key);
  /// A name ztune prints (a cluster's, a GPU's, a model's): a non-empty string
  /// without control characters, which would reach the terminal and the
  /// files ztune writes as they are.
  std::string name(std::string_view key);
  std::optional<std::string> optional_string(std::string_view key);
  /// A string that must be one of `choices`.
  std::string choice(std::string_view key, std::initializer_list<std::string_view> choices);
  /// choice(), or `fallback` when the key is absent (fields added to a schema later).
  std::string optional_choice(std::string_view key, std::initializer_list<std::string_view> choices,
                              std::string_view fallback);
  /// The same over a name table (a vocabulary's one list of names, e.g. kAttentionKernelNames).
  std::string choice(std::string_view key, std::span<const char* const> choices);
  std::string optional_choice(std::string_view key, std::span<const char* const> choices, std::string_view fallback);
  ObjectReader object(std::string_view key);
  std::optional<ObjectReader> optional_object(std::string_view key);
  /// The raw value (marks it read). Use for embedded documents parsed elsewhere.
  const nlohmann::json& raw(std::string_view key);
  /// Checks the "schema" field equals `expected` ("ztune.cluster/1").
  void schema(std::string_view expected);
  /// Rejects keys that were never read.
  void finish() const;

  /// An InputError for `key` (or the object itself when key is empty).
  [[nodiscard]] InputError error(std::string_view key, const std::string& what) const;
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] std::string path_of(std::string_view key) const;

 private:
  template <class Names>
  std::string choice_of(std::string_view key, const Names& choices);
  const nlohmann::json& require(std::string_view key);
  const nlohmann::json* object_;
  std::string file_;
  std::string path_;
  // The fields asked for (read or tested by has(): bookkeeping, so mutable).
  mutable std::set<std::string, std::less<>> read_;
};

}  // namespace ztune
