#pragma once
// One look for every chart of the planner: title, no animation (the charts are
// redrawn on each selection), tight margins, the legend where the caller puts it.
#include <QLabel>
#include <QString>
#include <QtCharts/QAbstractBarSeries>
#include <QtCharts/QChart>
#include <QtCharts/QValueAxis>

namespace ztune::gui {

/// A new chart styled like the planner's others; the caller adds series and axes.
QChart* new_planner_chart(const QString& title, Qt::Alignment legend);

/// Colours each bar set of a breakdown series with its category's colour and
/// hides the legend entries of categories the shown plans do not use
/// (e.g. ZeRO-3 buffers without ZeRO-3).
void style_breakdown_bars(QChart* chart, QAbstractBarSeries* bars);

/// The chart's visible legend entries as one line of rich text (a coloured
/// square and the name each, breaking between entries), for a label that
/// wraps where the chart is too short for Qt's legend: the Compare tab's
/// charts are about 180 px high for ten categories, and Qt's right-hand legend
/// cut the last of them (issue 23) while a bottom legend never wraps.
QString legend_html(QChart* chart);
/// Makes `label` the chart's legend (word-wrapped rich text; Qt's own hidden).
void use_legend_label(QChart* chart, QLabel* label);

/// Sets `axis` to [0, top], nice numbers, and enough decimals that
/// neighbouring ticks read differently (a 0–2 axis ticks every 0.5: "%.0f"
/// printed 0, 0, 1, 2, 2).
void set_nice_range(QValueAxis* axis, double top);

}  // namespace ztune::gui
