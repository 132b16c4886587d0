#pragma once
// Small text formatting shared by the command line and the library's own
// reports (accuracy lines): numbers as people read them.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ztune {

/// 1234567 -> "1,234,567" (rounded to an integer; "-" for infinities and NaN).
[[nodiscard]] std::string grouped(double v);

/// A count and its noun, singular for one: counted(1, "device") -> "1 device",
/// counted(1024, "device") -> "1,024 devices" (grouped).
[[nodiscard]] std::string counted(double n, std::string_view noun);

/// The candidate within edit distance 2 of `typed` (Levenshtein, ASCII letters
/// compared case-blind: LLAMA-7B is llama-7b; the smallest distance, the first
/// on ties), or "" when none is that close: the name a user meant (a
/// subcommand, a file's field, a catalog entry) beside the one typed.
[[nodiscard]] std::string nearest_name(std::string_view typed, const std::vector<std::string>& candidates);

/// A signal's name for messages: signal_name(SIGTERM) -> "SIGTERM" (the C
/// library's abbreviation), "signal 77" for a number it does not know.
[[nodiscard]] std::string signal_name(int sig);

/// ASCII case folding (GPU names, engine and model words in free text; UTF-8
/// bytes above 0x7F pass unchanged).
[[nodiscard]] std::string ascii_lower(std::string s);
[[nodiscard]] std::string ascii_upper(std::string s);

/// One number through a printf format of one double conversion:
/// formatted("%.3g", 2.3456) -> "2.35".
[[nodiscard]] std::string formatted(const char* printf_format, double v);

/// Terminal columns of a UTF-8 string: its code points (the ×, → and ≥ of
/// plan summaries are one column each, three bytes each).
[[nodiscard]] std::size_t display_width(const std::string& s);

/// `s` followed by spaces to `width` columns, never cut (a longer `s` is
/// returned whole: a table sizes its columns from its rows instead).
[[nodiscard]] std::string pad_right(const std::string& s, std::size_t width);

/// The offset of the first byte of `s` that is not well-formed UTF-8 (RFC 3629:
/// no overlong forms, no surrogates, nothing above U+10FFFF), or npos when all
/// of it is. JSON text must be UTF-8, so every string ztune writes into JSON
/// (a path, a database row) is checked where it enters.
[[nodiscard]] std::size_t invalid_utf8_offset(std::string_view s);

/// A parameter count as people read it: "101.10B", or millions below 1B
/// ("0.22M": the tiny test model), never "0.00B".
[[nodiscard]] std::string params_text(double params);

/// Bytes in a GiB: memory is shown in GiB, as nvidia-smi and the planner show it.
inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

/// The binary unit a column of byte counts reads best in: GiB when its largest
/// value is at least 1 GiB, else MiB, else KiB (a tiny model's states are not
/// a column of 0.00 GiB). `bytes` is the unit's size.
struct ByteUnit {
  const char* name;
  double bytes;
};
[[nodiscard]] ByteUnit byte_unit_for(double largest_bytes);

}  // namespace ztune
