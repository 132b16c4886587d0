#include "chart_style.hpp"

#include <QFontMetrics>
#include <QList>
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

namespace {
// The entries a chart's legend lists: its in-use bar sets and its lines.
struct LegendEntry {
  QColor colour;
  QString name;
};
QList<LegendEntry> legend_entries(QChart* chart) {
  // From the series, not the legend's markers: a hidden legend reports none
  // visible. The entries style_breakdown_bars keeps: categories in use.
  QList<LegendEntry> entries;
  for (QAbstractSeries* series : chart->series()) {
    if (auto* bars = qobject_cast<QAbstractBarSeries*>(series)) {
      for (QBarSet* set : bars->barSets())
        if (in_use(set)) entries.push_back({set->color(), set->label()});
    } else if (auto* line = qobject_cast<QLineSeries*>(series)) {
      entries.push_back({line->pen().color(), line->name()});
    }
  }
  return entries;
}
}  // namespace

QString legend_html(QChart* chart) {
  QStringList html;
  for (const LegendEntry& e : legend_entries(chart))
    html << QStringLiteral("<span style=\"color:%1\">&#9632;</span>&nbsp;%2")
                .arg(e.colour.name(), e.name.toHtmlEscaped().replace(QLatin1Char(' '), QStringLiteral("&nbsp;")));
  return html.join(QStringLiteral(" &nbsp; "));
}

bool legend_fits_beside(QChart* chart, int width, int height) {
  const auto entries = legend_entries(chart);
  if (entries.isEmpty()) return true;
  const QFontMetrics fm(chart->legend()->font());
  int widest = 0;
  for (const LegendEntry& e : entries) widest = std::max(widest, fm.horizontalAdvance(e.name));
  // A legend row (Qt's LegendMarkerItem): the marker, about a line high, and
  // the name, with a few pixels around each and the legend's own margins.
  const int line = fm.height();
  const double row_width = widest + line + 24;
  const double rows_height = static_cast<double>(entries.size()) * (line + 8) + 16;
  // The title's lines (its subtitles are <br>-separated, <small> or not)
  // stand above the legend; the chart's margins around everything.
  const QMargins m = chart->margins();
  const QString& t = chart->title();
  const int title_lines = t.isEmpty() ? 0 : static_cast<int>(t.count(QStringLiteral("<br>"))) + 1;
  const double title = title_lines * QFontMetrics(chart->titleFont()).height() * 1.15 + 8;
  const double inner_width = width - m.left() - m.right();
  const double inner_height = height - m.top() - m.bottom() - title;
  return row_width <= 0.4 * inner_width && rows_height <= inner_height;
}

void LegendPlacer::attach(QChart* chart, QLabel* label, LegendPlace place) {
  chart_ = chart;
  label_ = label;
  place_ = place;
  label->setWordWrap(true);
  label->setTextFormat(Qt::RichText);
}

void LegendPlacer::update(QSize view) {
  if (chart_ == nullptr || label_ == nullptr) return;
  // The label, when shown, takes its height from the view's: the room the
  // legend beside would have is the two together (else a label shown for
  // want of height would keep itself shown).
  const int height = view.height() + (label_->isHidden() ? 0 : label_->sizeHint().height());
  beside_ = place_ == LegendPlace::beside_if_room && legend_fits_beside(chart_, view.width(), height);
  chart_->legend()->setVisible(beside_);
  if (!beside_) label_->setText(legend_html(chart_));
  label_->setHidden(beside_);
}

void set_nice_range(QValueAxis* axis, double top) {
  axis->setRange(0, top);
  axis->applyNiceNumbers();
  const double step = (axis->max() - axis->min()) / std::max(1, axis->tickCount() - 1);
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  axis->setLabelFormat(QStringLiteral("%.%1f").arg(std::min(decimals, 6)));
}

}  // namespace ztune::gui
