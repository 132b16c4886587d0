#include "ztune/gui/time_axis.hpp"

#include <algorithm>
#include <cmath>

namespace ztune::gui {

TimeAxis TimeAxis::zoomed(double anchor_x, double factor) const {
  const double anchor_t = t_of(anchor_x);
  const double fraction = (anchor_x - left_px) / width_px;  // where the anchor sits in the plot
  const double span = span_s() / factor;
  TimeAxis a = *this;
  a.start_s = anchor_t - fraction * span;
  a.end_s = a.start_s + span;
  return a;
}

TimeAxis TimeAxis::panned(double dx_px) const {
  TimeAxis a = *this;
  const double dt = dx_px * seconds_per_px();
  a.start_s -= dt;
  a.end_s -= dt;
  return a;
}

TimeAxis TimeAxis::clamped(double lo_s, double hi_s, double min_span_s) const {
  TimeAxis a = *this;
  const double full = hi_s - lo_s;
  const double span = std::clamp(span_s(), std::min(min_span_s, full), full);
  // Keep the centre where it was, then slide back inside the data.
  const double centre = 0.5 * (start_s + end_s);
  a.start_s = centre - 0.5 * span;
  a.end_s = a.start_s + span;
  if (a.start_s < lo_s) {
    a.start_s = lo_s;
    a.end_s = lo_s + span;
  }
  if (a.end_s > hi_s) {
    a.end_s = hi_s;
    a.start_s = hi_s - span;
  }
  return a;
}

double TimeAxis::tick_step(double min_px) const {
  const double raw = min_px * seconds_per_px();
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * decade >= raw * (1 - 1e-9)) return m * decade;
  return 10 * decade;
}

std::vector<double> TimeAxis::ticks(double min_px) const {
  const double step = tick_step(min_px);
  std::vector<double> out;
  // Integer multiples of the step, so ticks land exactly on 0.1, 0.2, ... and not on accumulated sums.
  const auto first = static_cast<long long>(std::ceil(start_s / step - 1e-9));
  for (long long k = first;; ++k) {
    const double t = static_cast<double>(k) * step;
    if (t > end_s + 1e-9 * step) break;
    out.push_back(t);
  }
  return out;
}

}  // namespace ztune::gui
