#pragma once
// What a command-line flag's value must be, one rule each for `ztune` and
// `ztune-worker` (each wraps them in its own CLI11 validators): the whole text
// parses, a number is finite and in range. CLI11's own PositiveNumber accepts
// "nan", and its range messages quote DBL_MAX's 309 digits.
#include <string>

namespace ztune {

/// Threads per process (`--threads` of both programs): more than this cannot be
/// started on any machine ztune targets, and asking the OS for 100,000 ends in
/// std::system_error.
inline constexpr int kMaxThreads = 1024;

/// "" when `v`, whole, is a finite number above `lo` (or equal to it when
/// `allow_equal`) and at most `hi`; else "expected EXPECT, got "v"".
[[nodiscard]] std::string finite_number_complaint(const std::string& v, double lo, bool allow_equal, double hi,
                                                  const std::string& expect);

/// "" when `v`, whole, is an integer in [lo, hi]; else "expected WHAT from LO
/// to HI, got "v"".
[[nodiscard]] std::string integer_complaint(const std::string& v, long long lo, long long hi, const std::string& what);

/// A whole-number flag's range and what its values are called in the message
/// ("expected a sequence length from 1 to 16777216"). flag_ranges.hpp names
/// those the command line and the planner's form share.
struct IntegerRange {
  long long lo, hi;
  const char* what;
};
[[nodiscard]] std::string integer_complaint(const std::string& v, const IntegerRange& r);

/// A decimal flag's range: from `lo` (only above it unless `lo_allowed`) up to
/// `hi`, and what its values are called.
struct NumberRange {
  double lo, hi;
  const char* what;
  bool lo_allowed;
};
/// finite_number_complaint with the range said: "expected a percentage from 0
/// to 50, got "60"", "expected a price above 0 up to 1e+09, got "-1"".
[[nodiscard]] std::string number_complaint(const std::string& v, const NumberRange& r);

}  // namespace ztune
