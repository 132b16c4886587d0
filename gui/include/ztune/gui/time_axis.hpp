#pragma once
// The timeline's time ↔ pixel arithmetic, apart from any widget so it can be
// tested on its own (hotspot's TimeLineDelegate keeps it in a plain struct too).
// The visible window [start_s, end_s] maps linearly onto [left_px, left_px + width_px].
//
// Example: TimeAxis a{0, 2, 100, 400}; a.x_of(1) == 300; a.t_of(300) == 1.
#include <vector>

namespace ztune::gui {

struct TimeAxis {
  double start_s = 0;    // time at the plot's left edge, seconds
  double end_s = 1;      // time at the plot's right edge, seconds (> start_s)
  double left_px = 0;    // x of the plot's left edge, pixels
  double width_px = 1;   // plot width, pixels (> 0)

  [[nodiscard]] double span_s() const { return end_s - start_s; }
  [[nodiscard]] double seconds_per_px() const { return span_s() / width_px; }
  /// Pixel x of time t (may lie outside the plot when t is outside the window).
  [[nodiscard]] double x_of(double t_s) const { return left_px + (t_s - start_s) / seconds_per_px(); }
  /// Time at pixel x.
  [[nodiscard]] double t_of(double x_px) const { return start_s + (x_px - left_px) * seconds_per_px(); }

  /// Zooms by `factor` (> 1 zooms in, < 1 out) keeping the time under `anchor_x` where it is.
  [[nodiscard]] TimeAxis zoomed(double anchor_x, double factor) const;
  /// The view dragged right by dx pixels: earlier times come into view.
  [[nodiscard]] TimeAxis panned(double dx_px) const;
  /// Keeps the window inside [lo_s, hi_s] and no narrower than min_span_s,
  /// preserving its span where possible (a zoom-out past the data shows all of it).
  [[nodiscard]] TimeAxis clamped(double lo_s, double hi_s, double min_span_s) const;
  /// Tick times inside the window, on a 1-2-5 grid, at least `min_px` pixels apart.
  [[nodiscard]] std::vector<double> ticks(double min_px) const;
  /// The tick step ticks() uses (seconds).
  [[nodiscard]] double tick_step(double min_px) const;
};

}  // namespace ztune::gui
