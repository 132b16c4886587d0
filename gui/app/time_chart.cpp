#include "time_chart.hpp"

#include <algorithm>

#include <QResizeEvent>
#include <QtCharts/QBarCategoryAxis>
#include <QtCharts/QBarSet>
#include <QtCharts/QHBarModelMapper>
#include <QtCharts/QHorizontalStackedBarSeries>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QValueAxis>

#include "chart_style.hpp"
#include "palette.hpp"
#include "ztune/gui/time_breakdown_model.hpp"
#include "ztune/gui/units.hpp"

namespace ztune::gui {

TimeChart::TimeChart(TimeBreakdownModel* model, const QString& title, QWidget* parent)
    : QChartView(parent), model_(model), title_(title) {
  auto* chart = new_planner_chart(title, Qt::AlignRight);
  auto* bars = new QHorizontalStackedBarSeries;
  bars->setBarWidth(0.6);
  chart->addSeries(bars);
  auto* y = new QBarCategoryAxis;
  auto* x = new QValueAxis;
  x->setTitleText(QStringLiteral("seconds per iteration"));
  chart->addAxis(y, Qt::AlignLeft);
  chart->addAxis(x, Qt::AlignBottom);
  bars->attachAxis(x);
  bars->attachAxis(y);
  setChart(chart);
  setRenderHint(QPainter::Antialiasing);

  auto* mapper = new QHBarModelMapper(this);
  mapper->setFirstBarSetRow(0);
  mapper->setLastBarSetRow(model->rowCount() - 1);
  mapper->setFirstColumn(0);
  mapper->setColumnCount(-1);
  mapper->setSeries(bars);
  mapper->setModel(model);
  connect(model, &QAbstractItemModel::modelReset, this, &TimeChart::refresh);
  refresh();
}

void TimeChart::refresh() {
  QChart* c = chart();
  auto* bars = qobject_cast<QHorizontalStackedBarSeries*>(c->series().value(0));
  auto* y = qobject_cast<QBarCategoryAxis*>(c->axes(Qt::Vertical).value(0));
  auto* x = qobject_cast<QValueAxis*>(c->axes(Qt::Horizontal).value(0));
  if (bars == nullptr || x == nullptr || y == nullptr) return;
  const int columns = model_->columnCount();
  QStringList categories;
  double top = 0;
  for (int col = 0; col < columns; ++col) {
    categories << model_->headerData(col, Qt::Horizontal).toString();
    top = std::max(top, model_->total(col));
  }
  if (categories.isEmpty()) y->clear();  // as MemoryChart: an empty setCategories() keeps the old labels drawn
  else y->setCategories(categories);
  style_breakdown_bars(c, bars);
  x->setRange(0, top > 0 ? top * 1.05 : 1);
  x->applyNiceNumbers();
  const auto& times = model_->times();
  if (columns >= 1 && !times.empty()) {
    QStringList per;
    for (int col = 0; col < columns && col < static_cast<int>(times.size()); ++col)
      per << QStringLiteral("%1 %2").arg(categories[col], format_duration(times[static_cast<std::size_t>(col)].iteration_s));
    c->setTitle(title_ + QStringLiteral("<br><small>") + per.join(QStringLiteral(" · ")) + QStringLiteral("</small>"));
  } else {
    c->setTitle(title_);
  }
  legend_.update(size());
}

void TimeChart::set_legend_label(QLabel* label, LegendPlace place) {
  legend_.attach(chart(), label, place);
  refresh();
}

void TimeChart::resizeEvent(QResizeEvent* event) {
  QChartView::resizeEvent(event);
  legend_.update(event->size());
}

}  // namespace ztune::gui
