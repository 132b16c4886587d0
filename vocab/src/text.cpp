#include "ztune/vocab/text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace ztune {

std::string nearest_name(std::string_view typed, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = 3;
  for (const auto& c : candidates) {
    std::vector<std::size_t> row(c.size() + 1);
    for (std::size_t j = 0; j <= c.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= typed.size(); ++i) {
      std::size_t diag = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= c.size(); ++j) {
        const std::size_t up = row[j];
        const bool same = std::tolower(static_cast<unsigned char>(typed[i - 1])) ==
                          std::tolower(static_cast<unsigned char>(c[j - 1]));
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
        diag = up;
      }
    }
    if (row[c.size()] < best_d) {
      best_d = row[c.size()];
      best = c;
    }
  }
  return best;
}

std::string ascii_lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string ascii_upper(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

std::string formatted(const char* printf_format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, v);
  return buf;
}

std::string grouped(double v) {
  if (!std::isfinite(v)) return "-";
  // Beyond what a 64-bit integer holds llround's result is unspecified (a
  // cost of 2.5e20 had printed as 0): such a figure reads in powers of ten.
  if (std::fabs(v) >= 1e18) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
  }
  std::string digits = std::to_string(std::llabs(std::llround(v)));
  std::string out = v < 0 && digits != "0" ? "-" : "";
  const std::size_t lead = digits.size() % 3 == 0 ? 3 : digits.size() % 3;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i >= lead && (i - lead) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string counted(double n, std::string_view noun) {
  return grouped(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
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

std::size_t invalid_utf8_offset(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (b0 < 0x80) {
      ++i;
      continue;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      if (b0 == 0xE0) lo = 0xA0;  // overlong
      if (b0 == 0xED) hi = 0x9F;  // UTF-16 surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      if (b0 == 0xF0) lo = 0x90;  // overlong
      if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80u) || b > (k == 1 ? hi : 0xBFu)) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

std::string params_text(double params) {
  char b[32];
  if (params >= 1e9)
    std::snprintf(b, sizeof b, "%.2fB", params / 1e9);
  else
    std::snprintf(b, sizeof b, "%.2fM", params / 1e6);
  return b;
}

ByteUnit byte_unit_for(double largest_bytes) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024.0;
  if (largest_bytes >= kBytesPerGiB) return {"GiB", kBytesPerGiB};
  if (largest_bytes >= kMiB) return {"MiB", kMiB};
  return {"KiB", kKiB};
}

std::string signal_name(int sig) {
  // glibc's sigabbrev_np (2.32): "TERM" for SIGTERM, nullptr for a number that names no signal.
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace ztune
