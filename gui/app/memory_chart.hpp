#pragma once
// GPU memory of the selected plan (or of the compared plans) as stacked bars,
// one segment per category, against the GPU's capacity; host and NVMe use per
// node in the subtitle. The bars come straight from the model through a
// QHBarModelMapper (the table and the chart share one model).
#include <QLabel>
#include <QtCharts/QChartView>

namespace ztune::gui {

class MemoryBreakdownModel;

class MemoryChart : public QChartView {
  Q_OBJECT
 public:
  MemoryChart(MemoryBreakdownModel* model, const QString& title, QWidget* parent = nullptr);

  /// Shows the legend in `label` (wrapping, under the chart) instead of Qt's
  /// own beside it: for a view too short for every entry (the Compare tab).
  void set_legend_label(QLabel* label);

 private:
  void refresh();
  QLabel* legend_label_ = nullptr;
  MemoryBreakdownModel* model_;
  QString title_;
};

}  // namespace ztune::gui
