#include "memory_chart.hpp"

#include <algorithm>

#include <QResizeEvent>
#include <QtCharts/QBarCategoryAxis>
#include <QtCharts/QBarSet>
#include <QtCharts/QHBarModelMapper>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QLineSeries>
#include <QtCharts/QStackedBarSeries>
#include <QtCharts/QValueAxis>

#include "chart_style.hpp"
#include "palette.hpp"
#include "ztune/gui/memory_breakdown_model.hpp"
#include "ztune/gui/units.hpp"

namespace ztune::gui {
MemoryChart::MemoryChart(MemoryBreakdownModel* model, const QString& title, QWidget* parent)
    : QChartView(parent), model_(model), title_(title) {
  auto* chart = new_planner_chart(title, Qt::AlignRight);
  auto* bars = new QStackedBarSeries;
  bars->setBarWidth(0.55);
  chart->addSeries(bars);
  auto* capacity = new QLineSeries;
  capacity->setName(QStringLiteral("GPU capacity"));
  QPen pen(capacity_color());
  pen.setWidth(2);
  pen.setStyle(Qt::DashLine);
  capacity->setPen(pen);
  chart->addSeries(capacity);

  auto* x = new QBarCategoryAxis;
  auto* y = new QValueAxis;
  y->setTitleText(QStringLiteral("GiB per GPU"));
  y->setLabelFormat(QStringLiteral("%.0f"));
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  bars->attachAxis(x);
  bars->attachAxis(y);
  capacity->attachAxis(x);
  capacity->attachAxis(y);
  setChart(chart);
  setRenderHint(QPainter::Antialiasing);

  auto* mapper = new QHBarModelMapper(this);
  mapper->setFirstBarSetRow(0);
  mapper->setLastBarSetRow(model->rowCount() - 1);
  mapper->setFirstColumn(0);
  mapper->setColumnCount(-1);  // every plan column
  mapper->setSeries(bars);
  mapper->setModel(model);
  connect(model, &QAbstractItemModel::modelReset, this, &MemoryChart::refresh);
  refresh();
}

void MemoryChart::refresh() {
  QChart* c = chart();
  auto* bars = qobject_cast<QStackedBarSeries*>(c->series().value(0));
  auto* capacity = qobject_cast<QLineSeries*>(c->series().value(1));
  auto* x = qobject_cast<QBarCategoryAxis*>(c->axes(Qt::Horizontal).value(0));
  auto* y = qobject_cast<QValueAxis*>(c->axes(Qt::Vertical).value(0));
  if (bars == nullptr || capacity == nullptr || x == nullptr || y == nullptr) return;

  const int columns = model_->columnCount();
  QStringList categories;
  for (int col = 0; col < columns; ++col) categories << model_->headerData(col, Qt::Horizontal).toString();
  // setCategories() with an empty list appends nothing and signals nothing,
  // so the axis would keep drawing the previous plans' labels (a new search
  // empties Compare): clear() drops them and says so.
  if (categories.isEmpty()) x->clear();
  else x->setCategories(categories);

  style_breakdown_bars(c, bars);

  double top = 1;
  double capacity_gib = 0;
  QString subtitle;
  const auto& mem = model_->memory();
  const double unit = model_->plot_unit_bytes();
  // The Compare tab's short chart (its legend underneath) elided "GiB per GPU";
  // its title already says GPU memory.
  y->setTitleText(legend_.always_label() ? model_->plot_unit_name()
                                         : model_->plot_unit_name() + QStringLiteral(" per GPU"));
  for (int col = 0; col < columns; ++col) top = std::max(top, model_->total(col) / unit);
  capacity->clear();
  QString off_scale;
  if (!mem.empty()) {
    capacity_gib = mem.front().gpu_capacity_bytes / unit;  // in the plotted unit
    // A capacity 20× above the tallest bar would flatten the bars to nothing
    // (a tiny model on a CPU rank): the axis keeps to the bars and says where
    // the capacity is instead of drawing it.
    if (capacity_gib <= 20 * top) {
      capacity->append(-0.5, capacity_gib);
      capacity->append(columns - 0.5, capacity_gib);
      top = std::max(top, capacity_gib);
    } else {
      off_scale = QStringLiteral("capacity %1: off the scale").arg(format_bytes(mem.front().gpu_capacity_bytes));
    }
    if (columns == 1) {
      const auto& m = mem.front();
      const QString of = m.gpu_usable_bytes < m.gpu_capacity_bytes
                             ? QStringLiteral("%1 usable (headroom) of %2").arg(format_bytes(m.gpu_usable_bytes),
                                                                               format_bytes(m.gpu_capacity_bytes))
                             : format_bytes(m.gpu_capacity_bytes);
      subtitle = QStringLiteral("%1 of %2 per GPU<br>per node: host %3 of %4 · NVMe %5 of %6")
                     .arg(format_bytes(m.gpu_total_bytes), of,
                          format_bytes(m.host_bytes_per_node), format_bytes(m.host_capacity_bytes),
                          format_bytes(m.nvme_bytes_per_node), format_bytes(m.nvme_capacity_bytes));
    }
  }
  if (!off_scale.isEmpty()) subtitle += subtitle.isEmpty() ? off_scale : QStringLiteral("<br>") + off_scale;
  set_nice_range(y, top * 1.08);
  c->setTitle(subtitle.isEmpty() ? title_ : title_ + QStringLiteral("<br><small>") + subtitle + QStringLiteral("</small>"));
  legend_.update(size());
}

void MemoryChart::set_legend_label(QLabel* label, LegendPlace place) {
  legend_.attach(chart(), label, place);
  refresh();
}

void MemoryChart::resizeEvent(QResizeEvent* event) {
  QChartView::resizeEvent(event);
  legend_.update(event->size());
}

}  // namespace ztune::gui
