// The breakdown charts' legends: beside the chart only where Qt's own layout
// shows every entry whole, else wrapped in the label under it. The oracle is
// Qt Charts' layout itself: a legend shown beside a chart in a view of that
// size, laid out, is cut short when the room it is given is below the size it
// asks for (its preferred size hint), and then its names are elided or its last
// rows dropped (the main window at 1280 px, sessions 50-52).
#include <catch2/catch.hpp>

#include <QApplication>
#include <QLabel>
#include <QStringList>
#include <QtCharts/QBarSet>
#include <QtCharts/QChartView>
#include <QtCharts/QLegend>
#include <QtCharts/QStackedBarSeries>

#include "chart_style.hpp"

using namespace ztune::gui;

namespace {

// The memory chart's categories, each in use (a ZeRO-3 plan's every line).
const QStringList kMemoryLines = {"Parameters",  "Gradients",      "Optimizer states", "Activations",
                                  "Comm. buckets", "ZeRO-3 gathered", "Workspace",       "Logits and loss",
                                  "CUDA runtime", "Fragmentation"};

QChart* memory_like_chart() {
  QChart* chart = new_planner_chart(QStringLiteral("GPU memory of the selected plan<br><small>79.0 GiB of 80.0 GiB "
                                                   "per GPU</small><br><small>per node: host 0 B</small>"),
                                    Qt::AlignRight);
  auto* bars = new QStackedBarSeries;
  for (const QString& name : kMemoryLines) {
    auto* set = new QBarSet(name);
    *set << 1.0;
    bars->append(set);
  }
  chart->addSeries(bars);
  chart->createDefaultAxes();
  return chart;
}

// Whether Qt, laying the chart out in a view of w × h with its legend beside
// it, gives the legend less room than it asks for.
bool qt_cuts_legend(int w, int h) {
  QChartView view(memory_like_chart());
  view.chart()->legend()->setVisible(true);
  view.resize(w, h);
  view.show();
  for (int i = 0; i < 3; ++i) QApplication::processEvents();
  const QLegend* legend = view.chart()->legend();
  const QSizeF want = legend->effectiveSizeHint(Qt::PreferredSize);
  const QRectF got = legend->geometry();
  return got.width() + 0.5 < want.width() || got.height() + 0.5 < want.height();
}

}  // namespace

TEST_CASE("chart legends: beside the chart only where Qt shows every entry whole", "[gui][charts]") {
  // Sizes of the main window's memory chart from 1280 px (about 270 × 190)
  // to 1920 px and beyond, and a few in between.
  const std::vector<std::pair<int, int>> sizes = {{270, 190}, {270, 260}, {320, 300}, {360, 330}, {400, 300},
                                                  {420, 420}, {480, 360}, {560, 420}, {700, 520}, {900, 600}};
  int beside = 0;
  for (const auto& [w, h] : sizes) {
    QChart* chart = memory_like_chart();
    const bool fits = legend_fits_beside(chart, w, h);
    delete chart;
    const bool cut = qt_cuts_legend(w, h);
    INFO(w << " x " << h << ": ztune says " << (fits ? "beside" : "under") << ", Qt "
            << (cut ? "cuts the legend" : "shows it whole"));
    // Never beside where Qt would cut it.
    CHECK((!fits || !cut));
    beside += fits ? 1 : 0;
  }
  // And not under everywhere: the wide views keep Qt's legend beside the plot.
  CHECK(beside >= 3);
  {
    QChart* chart = memory_like_chart();
    CHECK_FALSE(legend_fits_beside(chart, 270, 190));  // the 1280-px window's
    CHECK(legend_fits_beside(chart, 900, 600));
    delete chart;
  }
}

TEST_CASE("chart legends: the placer shows the label, or Qt's legend, never both", "[gui][charts]") {
  QChartView view(memory_like_chart());
  QLabel label;
  LegendPlacer placer;
  placer.attach(view.chart(), &label, LegendPlace::beside_if_room);
  placer.update(QSize(270, 190));
  CHECK_FALSE(placer.beside());
  CHECK_FALSE(label.isHidden());
  CHECK_FALSE(view.chart()->legend()->isVisible());
  for (const QString& name : kMemoryLines) CHECK(label.text().contains(QString(name).replace(' ', "&nbsp;")));
  placer.update(QSize(900, 600));
  CHECK(placer.beside());
  CHECK(label.isHidden());
  CHECK(view.chart()->legend()->isVisible());
  CHECK_FALSE(placer.always_label());

  // The Compare tab's: the label at any size.
  LegendPlacer compare;
  compare.attach(view.chart(), &label, LegendPlace::label);
  compare.update(QSize(900, 600));
  CHECK(compare.always_label());
  CHECK_FALSE(compare.beside());
  CHECK_FALSE(label.isHidden());
  CHECK_FALSE(view.chart()->legend()->isVisible());
}
