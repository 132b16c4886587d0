#pragma once
// One look for every chart of the planner: title, no animation (the charts are
// redrawn on each selection), tight margins, the legend where the caller puts it.
#include <QLabel>
#include <QVBoxLayout>
#include <QWidget>
#include <QSize>
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

/// Where a breakdown chart's legend goes.
enum class LegendPlace {
  /// Always the label under the chart: the Compare tab's charts are about
  /// 180 px high for ten categories.
  label,
  /// Qt's legend beside the chart where every entry fits in it whole, else
  /// the label: the main window's charts are 270 px wide at 1280 px, where
  /// the legend beside them elided every long name ("Optimize…") and cut the
  /// memory chart's last entries off (sessions 50-52).
  beside_if_room,
};

/// Whether Qt's right-hand legend shows every entry legend_html lists for
/// `chart` whole in a view of `width` × `height` pixels: Qt Charts gives a
/// legend beside the plot at most 40 % of the chart's width
/// (AbstractChartLayout, golden_ratio 0.4) and the height below the title,
/// and elides or drops what does not fit.
bool legend_fits_beside(QChart* chart, int width, int height);

/// Keeps one chart's legend where its LegendPlace says. update() after the
/// chart's entries or its view's size change; the label (under the chart in
/// the same layout) is shown, filled, or hidden accordingly.
class LegendPlacer {
 public:
  void attach(QChart* chart, QLabel* label, LegendPlace place);
  void update(QSize view);
  /// Whether Qt's legend is the one shown (false before attach).
  [[nodiscard]] bool beside() const { return beside_; }
  /// Whether the label is the legend whatever the size (LegendPlace::label).
  [[nodiscard]] bool always_label() const { return label_ != nullptr && place_ == LegendPlace::label; }

 private:
  QChart* chart_ = nullptr;
  QLabel* label_ = nullptr;
  LegendPlace place_ = LegendPlace::label;
  bool beside_ = false;
};

/// Sets `axis` to [0, top], nice numbers, and enough decimals that
/// neighbouring ticks read differently (a 0–2 axis ticks every 0.5: "%.0f"
/// printed 0, 0, 1, 2, 2).
void set_nice_range(QValueAxis* axis, double top);

/// `chart` (a MemoryChart or TimeChart) in a box with a legend label under
/// it, named `label_name`, placed as `place` says.
template <class Chart>
QWidget* chart_with_legend(Chart* chart, LegendPlace place, const QString& label_name) {
  auto* box = new QWidget;
  auto* col = new QVBoxLayout(box);
  col->setContentsMargins(0, 0, 0, 0);
  col->setSpacing(2);
  col->addWidget(chart, 1);
  auto* legend = new QLabel;
  legend->setObjectName(label_name);
  col->addWidget(legend);
  chart->set_legend_label(legend, place);
  return box;
}

}  // namespace ztune::gui
