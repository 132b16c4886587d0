#pragma once
// Throughput and MFU of the best plan against the GPU count (log2 axis), from
// the ScalingModel; counts where nothing fits are left out of the lines.
#include <QtCharts/QChartView>

namespace ztune::gui {

class ScalingModel;

class ScalingChart : public QChartView {
  Q_OBJECT
 public:
  ScalingChart(ScalingModel* model, QWidget* parent = nullptr);

 private:
  void refresh();
  ScalingModel* model_;
};

}  // namespace ztune::gui
