#pragma once
// The planner's colours: one per memory line, time part and timeline kind, so a
// category has the same colour in every chart.
#include <cstddef>

#include <QColor>

#include "ztune/gui/timeline_data.hpp"

namespace ztune::gui {

QColor series_color(std::size_t i);  // a qualitative palette, cycling
QColor timeline_color(TimelineKind k);
QColor error_color();
QColor capacity_color();

}  // namespace ztune::gui
