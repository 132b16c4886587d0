#pragma once
// One iteration's time by part as horizontal stacked bars: the analytical
// estimate and, once simulated, the simulator's (or one bar per compared plan).
#include <QtCharts/QChartView>

namespace ztune::gui {

class TimeBreakdownModel;

class TimeChart : public QChartView {
  Q_OBJECT
 public:
  TimeChart(TimeBreakdownModel* model, const QString& title, QWidget* parent = nullptr);

 private:
  void refresh();
  TimeBreakdownModel* model_;
  QString title_;
};

}  // namespace ztune::gui
