#pragma once
// One iteration's time by part as horizontal stacked bars: the analytical
// estimate and, once simulated, the simulator's (or one bar per compared plan).
#include <QLabel>
#include <QtCharts/QChartView>

namespace ztune::gui {

class TimeBreakdownModel;

class TimeChart : public QChartView {
  Q_OBJECT
 public:
  TimeChart(TimeBreakdownModel* model, const QString& title, QWidget* parent = nullptr);

  /// Shows the legend in `label` (wrapping, under the chart) instead of Qt's
  /// own beside it: for a view too short for every entry (the Compare tab).
  void set_legend_label(QLabel* label);

 private:
  void refresh();
  QLabel* legend_label_ = nullptr;
  TimeBreakdownModel* model_;
  QString title_;
};

}  // namespace ztune::gui
