#include "scaling_chart.hpp"

#include <algorithm>
#include <cmath>

#include <QtCharts/QLineSeries>
#include <QtCharts/QLogValueAxis>
#include <QtCharts/QValueAxis>

#include "chart_style.hpp"
#include "palette.hpp"
#include "ztune/gui/scaling_model.hpp"

namespace ztune::gui {

ScalingChart::ScalingChart(ScalingModel* model, QWidget* parent) : QChartView(parent), model_(model) {
  auto* chart = new_planner_chart(QStringLiteral("Scaling: best plan per GPU count"), Qt::AlignBottom);
  auto* throughput = new QLineSeries;
  // Short names, each saying its axis (whose title gives the unit): at 1280 px
  // "throughput (k tokens/s)" was elided in the legend under the chart.
  throughput->setName(QStringLiteral("tokens/s (left)"));
  throughput->setPointsVisible(true);
  QPen tp(series_color(0));
  tp.setWidth(2);
  throughput->setPen(tp);
  auto* mfu = new QLineSeries;
  mfu->setName(QStringLiteral("MFU (right)"));
  mfu->setPointsVisible(true);
  QPen mp(series_color(1));
  mp.setWidth(2);
  mfu->setPen(mp);
  chart->addSeries(throughput);
  chart->addSeries(mfu);

  auto* x = new QLogValueAxis;
  x->setBase(2);
  x->setLabelFormat(QStringLiteral("%.0f"));
  x->setTitleText(QStringLiteral("GPUs"));
  auto* left = new QValueAxis;
  left->setTitleText(QStringLiteral("k tokens/s"));
  left->setLabelFormat(QStringLiteral("%.0f"));
  auto* right = new QValueAxis;
  right->setTitleText(QStringLiteral("MFU %"));
  right->setRange(0, 100);
  right->setLabelFormat(QStringLiteral("%.0f"));
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(left, Qt::AlignLeft);
  chart->addAxis(right, Qt::AlignRight);
  throughput->attachAxis(x);
  throughput->attachAxis(left);
  mfu->attachAxis(x);
  mfu->attachAxis(right);
  setChart(chart);
  setRenderHint(QPainter::Antialiasing);

  connect(model, &QAbstractItemModel::modelReset, this, &ScalingChart::refresh);
  connect(model, &QAbstractItemModel::rowsInserted, this, &ScalingChart::refresh);
  connect(model, &QAbstractItemModel::dataChanged, this, &ScalingChart::refresh);
  refresh();
}

void ScalingChart::refresh() {
  QChart* c = chart();
  auto* throughput = qobject_cast<QLineSeries*>(c->series().value(0));
  auto* mfu = qobject_cast<QLineSeries*>(c->series().value(1));
  auto* x = qobject_cast<QLogValueAxis*>(c->axes(Qt::Horizontal).value(0));
  const auto verticals = c->axes(Qt::Vertical);
  auto* left = qobject_cast<QValueAxis*>(verticals.value(0));
  if (throughput == nullptr || mfu == nullptr || x == nullptr || left == nullptr) return;
  QList<QPointF> t;
  QList<QPointF> m;
  double lo = 1;
  double hi = 2;
  double top = 1;
  bool first = true;
  for (int r = 0; r < model_->rowCount(); ++r) {
    const double g = model_->index(r, ScalingModel::gpus).data().toDouble();
    lo = first ? g : std::min(lo, g);
    hi = first ? g : std::max(hi, g);
    first = false;
    if (!model_->index(r, 0).data(ScalingModel::FeasibleRole).toBool()) continue;
    const double k = model_->index(r, ScalingModel::tokens_per_s).data().toDouble() / 1e3;
    t << QPointF(g, k);
    m << QPointF(g, model_->index(r, ScalingModel::mfu_percent).data().toDouble());
    top = std::max(top, k);
  }
  throughput->replace(t);
  mfu->replace(m);
  // A label at every power of two elides them all ("1…", "2…") once the
  // counts span many octaves (8 to 4096 GPUs in a 300-pixel chart): about
  // six labels, at every 2^k-th power, whatever the span.
  const double octaves = std::log2(hi / lo) + 1;
  x->setBase(std::exp2(std::max(1.0, std::ceil(octaves / 6))));
  x->setRange(lo / 1.4, hi * 1.4);
  set_nice_range(left, top * 1.1);
}

}  // namespace ztune::gui
