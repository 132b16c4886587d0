#pragma once
// Small text formatting shared by the command line and the library's own
// reports (accuracy lines): numbers as people read them.
#include <string>

namespace ztune {

/// 1234567 -> "1,234,567" (rounded to an integer; "-" for infinities and NaN).
[[nodiscard]] std::string grouped(double v);

}  // namespace ztune
