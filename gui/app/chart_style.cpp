#include "chart_style.hpp"

#include <QStringList>
#include <QtCharts/QBarSet>
#include <QtCharts/QLineSeries>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>

#include "palette.hpp"

#include <algorithm>
#include <cmath>

namespace ztune::gui {

namespace {
// A category the shown plans use: Qt's legend and the Compare tab's label list
// only these (e.g. no ZeRO-3 buffers without ZeRO-3).
bool in_use(QBarSet* set) { return set->sum() > 0; }
}  // namespace

QChart* new_planner_chart(const QString& title, Qt::Alignment legend) {
  auto* chart = new QChart;
  chart->setTitle(title);
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->legend()->setAlignment(legend);
  chart->legend()->setShowToolTips(true);  // a label cut short ("Optimizer stat…") says itself in full on hover
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
  for (int i = 0; i < markers.size() && i < sets.size(); ++i) markers[i]->setVisible(in_use(sets[i]));
}

QString legend_html(QChart* chart) {
  // From the series, not the legend's markers: a hidden legend reports none
  // visible. The entries style_breakdown_bars keeps: categories in use.
  QStringList entries;
  auto add = [&entries](const QColor& colour, const QString& name) {
    entries << QStringLiteral("<span style=\"color:%1\">&#9632;</span>&nbsp;%2")
                   .arg(colour.name(), name.toHtmlEscaped().replace(QLatin1Char(' '), QStringLiteral("&nbsp;")));
  };
  for (QAbstractSeries* series : chart->series()) {
    if (auto* bars = qobject_cast<QAbstractBarSeries*>(series)) {
      for (QBarSet* set : bars->barSets())
        if (in_use(set)) add(set->color(), set->label());
    } else if (auto* line = qobject_cast<QLineSeries*>(series)) {
      add(line->pen().color(), line->name());
    }
  }
  return entries.join(QStringLiteral(" &nbsp; "));
}

void use_legend_label(QChart* chart, QLabel* label) {
  label->setWordWrap(true);
  label->setTextFormat(Qt::RichText);
  chart->legend()->hide();
}

void set_nice_range(QValueAxis* axis, double top) {
  axis->setRange(0, top);
  axis->applyNiceNumbers();
  const double step = (axis->max() - axis->min()) / std::max(1, axis->tickCount() - 1);
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  axis->setLabelFormat(QStringLiteral("%.%1f").arg(std::min(decimals, 6)));
}

}  // namespace ztune::gui
