#pragma once
// GPU memory of the selected plan (or of the compared plans) as stacked bars,
// one segment per category, against the GPU's capacity; host and NVMe use per
// node in the subtitle. The bars come straight from the model through a
// QHBarModelMapper (the table and the chart share one model).
#include <QtCharts/QChartView>

namespace ztune::gui {

class MemoryBreakdownModel;

class MemoryChart : public QChartView {
  Q_OBJECT
 public:
  MemoryChart(MemoryBreakdownModel* model, const QString& title, QWidget* parent = nullptr);

 private:
  void refresh();
  MemoryBreakdownModel* model_;
  QString title_;
};

}  // namespace ztune::gui
