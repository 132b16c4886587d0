#pragma once
// Two or more plans side by side: the attribute table, their memory and their time.
#include <QWidget>

namespace ztune::gui {

class PlannerDocument;

class ComparePanel : public QWidget {
  Q_OBJECT
 public:
  explicit ComparePanel(PlannerDocument* doc, QWidget* parent = nullptr);
};

}  // namespace ztune::gui
