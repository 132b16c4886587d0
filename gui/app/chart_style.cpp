#include "chart_style.hpp"

#include <QtCharts/QBarSet>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>

#include "palette.hpp"

namespace ztune::gui {

QChart* new_planner_chart(const QString& title, Qt::Alignment legend) {
  auto* chart = new QChart;
  chart->setTitle(title);
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->legend()->setAlignment(legend);
  chart->setMargins(QMargins(4, 4, 4, 4));
  return chart;
}

void style_breakdown_bars(QChart* chart, QAbstractBarSeries* bars) {
  const auto sets = bars->barSets();
  for (int i = 0; i < sets.size(); ++i) {
    sets[i]->setColor(series_color(static_cast<std::size_t>(i)));
    sets[i]->setBorderColor(series_color(static_cast<std::size_t>(i)).darker(115));
  }
  const auto markers = chart->legend()->markers(bars);
  for (int i = 0; i < markers.size() && i < sets.size(); ++i) markers[i]->setVisible(sets[i]->sum() > 0);
}

}  // namespace ztune::gui
