#pragma once
// The simulated iteration as a Gantt chart: one row per pipeline stage and
// resource, one bar per operation (runs of operations too narrow to see merge
// into bands when zoomed out: timeline_bars), idle compute in pale red. Mouse wheel zooms
// at the cursor, dragging pans, double-click (or Home) shows the whole
// iteration. All time↔pixel arithmetic is TimeAxis's.
#include <optional>

#include <QWidget>

#include "ztune/gui/time_axis.hpp"
#include "ztune/gui/timeline_data.hpp"

namespace ztune::gui {

class TimelineWidget : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineWidget(QWidget* parent = nullptr);

  void set_timeline(TimelineData timeline, const QString& caption);
  /// Shows a message instead of a timeline ("simulating…", an error).
  void set_message(const QString& message);
  void reset_zoom();
  void zoom(double factor);  // at the plot's centre

  QSize sizeHint() const override { return {900, 260}; }
  QSize minimumSizeHint() const override { return {300, 120}; }

 protected:
  void paintEvent(QPaintEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  bool event(QEvent* event) override;

 private:
  [[nodiscard]] QRectF plot_rect() const;
  [[nodiscard]] double row_height() const;
  void fit_axis_to_width();
  void clamp();
  /// The bar under `pos` as painted (an operation, or a merged run when zoomed out).
  [[nodiscard]] std::optional<TimelineBar> bar_at(QPointF pos) const;

  TimelineData data_;
  QString caption_;
  QString message_;
  TimeAxis axis_;
  bool dragging_ = false;
  double drag_x_ = 0;
};

}  // namespace ztune::gui
