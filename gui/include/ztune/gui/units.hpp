#pragma once
// Readable units for every number the planner shows: bytes in binary units
// (GiB, as nvidia-smi and the allocator report them), durations from µs to
// days, TFLOP/s, tokens/s and percentages. Pure functions, no Qt widgets.
//
// Example: format_bytes(32.0 * 1024 * 1024 * 1024) == "32.0 GiB".
#include <QString>

namespace ztune::gui {

/// 1536 → "1.5 KiB", 34359738368 → "32.0 GiB"; binary prefixes (1 KiB = 1024 B).
QString format_bytes(double bytes);
/// Bytes as GiB, for chart axes and table cells of one unit: 34359738368 → 32.0.
double to_gib(double bytes);
/// 2.5e-5 → "25 µs", 0.0123 → "12.3 ms", 4.56 → "4.56 s", 5400 → "1.5 h", 259200 → "3.0 days".
QString format_duration(double seconds);
/// An axis tick at t seconds, in the unit of the tick step so that every label of one
/// axis reads alike: (60, 20) → "60 s", (0.015, 0.005) → "15 ms", (2e-5, 1e-5) → "20 µs".
QString format_time_tick(double t_s, double step_s);
/// 12.34 → "12.3 days"; 0.25 → "6.0 h" (less than a day reads better in hours).
QString format_days(double days);
/// 123.4 → "123.4 TFLOP/s".
QString format_tflops(double tflops);
/// 1234567 → "1.23 M tokens/s", 45600 → "45.6 k tokens/s".
QString format_tokens_per_s(double tokens_per_s);
/// 0.4321 → "43.2 %".
QString format_percent(double fraction);
/// 1.0e11 → "100 B", 3.0e12 → "3.00 T", 1500 → "1.50 k", 5149 → "5.15 k":
/// parameter and token counts, and the plans table's tokens/s, to three figures.
QString format_count(double n);

}  // namespace ztune::gui
