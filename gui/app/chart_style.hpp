#pragma once
// One look for every chart of the planner: title, no animation (the charts are
// redrawn on each selection), tight margins, the legend where the caller puts it.
#include <QString>
#include <QtCharts/QChart>

namespace ztune::gui {

/// A new chart styled like the planner's others; the caller adds series and axes.
QChart* new_planner_chart(const QString& title, Qt::Alignment legend);

}  // namespace ztune::gui
