#pragma once
// GPU memory of the selected plan (or of the compared plans) as stacked bars,
// one segment per category, against the GPU's capacity; host and NVMe use per
// node in the subtitle. The bars come straight from the model through a
// QHBarModelMapper (the table and the chart share one model).
#include <QLabel>
#include <QtCharts/QChartView>

#include "chart_style.hpp"

namespace ztune::gui {

class MemoryBreakdownModel;

class MemoryChart : public QChartView {
  Q_OBJECT
 public:
  MemoryChart(MemoryBreakdownModel* model, const QString& title, QWidget* parent = nullptr);

  /// Gives the chart `label` (under it, wrapping) for its legend, used
  /// always or only where Qt's own beside the chart would cut an entry short
  /// (chart_style.hpp, LegendPlace).
  void set_legend_label(QLabel* label, LegendPlace place);

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void refresh();
  LegendPlacer legend_;
  MemoryBreakdownModel* model_;
  QString title_;
};

}  // namespace ztune::gui
