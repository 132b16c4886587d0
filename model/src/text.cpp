#include "ztune/model/text.hpp"

#include <cmath>

namespace ztune {

std::string grouped(double v) {
  if (!std::isfinite(v)) return "-";
  std::string digits = std::to_string(std::llabs(std::llround(v)));
  std::string out = v < 0 && digits != "0" ? "-" : "";
  const std::size_t lead = digits.size() % 3 == 0 ? 3 : digits.size() % 3;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i >= lead && (i - lead) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80 ? 1 : 0;  // count lead bytes, not continuations
  return n;
}

std::string pad_right(const std::string& s, std::size_t width) {
  const std::size_t w = display_width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

}  // namespace ztune
