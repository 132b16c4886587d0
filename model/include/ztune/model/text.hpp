#pragma once
// Small text formatting shared by the command line and the library's own
// reports (accuracy lines): numbers as people read them.
#include <cstddef>
#include <string>

namespace ztune {

/// 1234567 -> "1,234,567" (rounded to an integer; "-" for infinities and NaN).
[[nodiscard]] std::string grouped(double v);

/// Terminal columns of a UTF-8 string: its code points (the ×, → and ≥ of
/// plan summaries are one column each, three bytes each).
[[nodiscard]] std::size_t display_width(const std::string& s);

/// `s` followed by spaces to `width` columns, never cut (a longer `s` is
/// returned whole: a table sizes its columns from its rows instead).
[[nodiscard]] std::string pad_right(const std::string& s, std::size_t width);

}  // namespace ztune
