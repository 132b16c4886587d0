#pragma once
// One iteration's time by part as horizontal stacked bars: the analytical
// estimate and, once simulated, the simulator's (or one bar per compared plan).
#include <QLabel>
#include <QtCharts/QChartView>

#include "chart_style.hpp"

namespace ztune::gui {

class TimeBreakdownModel;

class TimeChart : public QChartView {
  Q_OBJECT
 public:
  TimeChart(TimeBreakdownModel* model, const QString& title, QWidget* parent = nullptr);

  /// Gives the chart `label` (under it, wrapping) for its legend, used
  /// always or only where Qt's own beside the chart would cut an entry short
  /// (chart_style.hpp, LegendPlace).
  void set_legend_label(QLabel* label, LegendPlace place);

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void refresh();
  LegendPlacer legend_;
  TimeBreakdownModel* model_;
  QString title_;
};

}  // namespace ztune::gui
