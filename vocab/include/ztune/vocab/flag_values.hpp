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

}  // namespace ztune
