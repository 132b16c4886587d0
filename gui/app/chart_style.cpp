#include "chart_style.hpp"

#include <QtCharts/QLegend>

namespace ztune::gui {

QChart* new_planner_chart(const QString& title, Qt::Alignment legend) {
  auto* chart = new QChart;
  chart->setTitle(title);
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->legend()->setAlignment(legend);
  chart->setMargins(QMargins(4, 4, 4, 4));
  return chart;
}

}  // namespace ztune::gui
