#include "compare_panel.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "memory_chart.hpp"
#include "time_chart.hpp"
#include "ztune/gui/planner_document.hpp"

namespace ztune::gui {

ComparePanel::ComparePanel(PlannerDocument* doc, QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(0, 0, 0, 0);
  auto* hint = new QLabel(QStringLiteral(
      "Select two or more plans in the table (Ctrl+click) and press Compare (Ctrl+D). The best value of each row is bold."));
  hint->setWordWrap(true);
  v->addWidget(hint);
  auto* split = new QSplitter(Qt::Horizontal);
  auto* table = new QTableView;
  table->setModel(&doc->compare());
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->setAlternatingRowColors(true);
  split->addWidget(table);
  // Each chart with its legend wrapped underneath: beside it, Qt's legend
  // cut the last categories at this panel's height (issue 23).
  split->addWidget(chart_with_legend(new MemoryChart(&doc->compare_memory(), QStringLiteral("GPU memory")),
                                   LegendPlace::label, QStringLiteral("compareLegend")));
  split->addWidget(chart_with_legend(new TimeChart(&doc->compare_time(), QStringLiteral("Iteration time")),
                                   LegendPlace::label, QStringLiteral("compareLegend")));
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setStretchFactor(2, 3);
  // Stretch factors share only what is beyond the size hints, and a table's
  // hint is narrow: the side-by-side table got one plan's column (issue 23).
  // Start with the table as wide as three plans need.
  split->setSizes({560, 500, 540});
  v->addWidget(split, 1);
  connect(doc, &PlannerDocument::compareChanged, hint,
          [hint, doc] { hint->setVisible(doc->compare().columnCount() == 0); });
}

}  // namespace ztune::gui
