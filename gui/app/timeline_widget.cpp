#include "timeline_widget.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <QFontMetrics>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include "palette.hpp"
#include "ztune/gui/units.hpp"

namespace ztune::gui {
namespace {

constexpr double kLabelWidth = 200;  // row labels, left of the plot
constexpr double kHeader = 40;       // caption, legend and time ticks, above the plot
constexpr double kMaxRowHeight = 34;
constexpr double kMinRowHeight = 6;
constexpr double kMergePx = 8;  // operations narrower than this merge into bands (timeline_bars)

/// The header's font: the caption and the legend, a little smaller than the rows'.
QFont header_font(QFont f) {
  f.setPointSizeF(f.pointSizeF() * 0.9);
  return f;
}

/// The kinds of operation this iteration has, which the legend lists.
std::vector<TimelineKind> present_kinds(const TimelineData& data) {
  bool present[static_cast<int>(TimelineKind::count)] = {};
  for (const auto& it : data.items) present[static_cast<int>(it.kind)] = true;
  std::vector<TimelineKind> out;
  for (int k = 0; k < static_cast<int>(TimelineKind::count); ++k)
    if (present[k]) out.push_back(static_cast<TimelineKind>(k));
  return out;
}

double legend_entry_width(const QFontMetrics& fm, TimelineKind kind) {
  return 14 + fm.horizontalAdvance(timeline_kind_label(kind)) + 14;
}

/// The caption as the header shows it: elided in the middle (the plan's start
/// and the simulated time stay) where it and the legend would not fit the
/// widget's width, so that the legend stays in view (audit50gui L2); its
/// tooltip then has the whole caption.
QString shown_caption(const QString& caption, const TimelineData& data, const QFontMetrics& fm, int width) {
  double legend = 0;
  for (const TimelineKind kind : present_kinds(data)) legend += legend_entry_width(fm, kind);
  const int room = static_cast<int>(width - 6 - 24 - legend);
  return fm.elidedText(caption, Qt::ElideMiddle, std::max(room, 160));
}

}  // namespace

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAutoFillBackground(true);
  setBackgroundRole(QPalette::Base);
  set_message(QStringLiteral("Select a plan to simulate one iteration."));
}

void TimelineWidget::set_timeline(TimelineData timeline, const QString& caption) {
  data_ = std::move(timeline);
  caption_ = caption;
  message_.clear();
  reset_zoom();
}

void TimelineWidget::set_message(const QString& message) {
  data_ = {};
  message_ = message;
  update();
}

QRectF TimelineWidget::plot_rect() const {
  return QRectF(kLabelWidth, kHeader, std::max(10.0, width() - kLabelWidth - 12), std::max(10.0, height() - kHeader - 8));
}

double TimelineWidget::row_height() const {
  if (data_.rows.empty()) return kMaxRowHeight;
  return std::clamp(plot_rect().height() / static_cast<double>(data_.rows.size()), kMinRowHeight, kMaxRowHeight);
}

void TimelineWidget::fit_axis_to_width() {
  const QRectF p = plot_rect();
  axis_.left_px = p.left();
  axis_.width_px = p.width();
}

void TimelineWidget::reset_zoom() {
  fit_axis_to_width();
  axis_.start_s = 0;
  axis_.end_s = data_.end_s > 0 ? data_.end_s : 1;
  update();
}

void TimelineWidget::clamp() {
  if (data_.end_s <= 0) return;
  axis_ = axis_.clamped(0, data_.end_s, data_.end_s * 1e-6);
}

void TimelineWidget::zoom(double factor) {
  fit_axis_to_width();
  axis_ = axis_.zoomed(axis_.left_px + axis_.width_px / 2, factor);
  clamp();
  update();
}

void TimelineWidget::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fit_axis_to_width();
}

void TimelineWidget::paintEvent(QPaintEvent* /*event*/) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing, false);
  const QRectF plot = plot_rect();
  const QPalette pal = palette();
  if (!message_.isEmpty() || data_.empty()) {
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap, message_.isEmpty() ? QStringLiteral("No timeline") : message_);
    return;
  }
  fit_axis_to_width();

  // Caption and legend.
  p.setFont(header_font(font()));
  p.setPen(pal.color(QPalette::Text));
  const QString caption = shown_caption(caption_, data_, p.fontMetrics(), width());
  p.drawText(QPointF(6, 14), caption);
  double lx = std::max(kLabelWidth, 12.0 + p.fontMetrics().horizontalAdvance(caption) + 24);
  for (const TimelineKind kind : present_kinds(data_)) {
    p.fillRect(QRectF(lx, 5, 10, 10), timeline_color(kind));
    p.drawText(QPointF(lx + 14, 14), timeline_kind_label(kind));
    lx += legend_entry_width(p.fontMetrics(), kind);
  }

  // Time ticks.
  const double tick_step = axis_.tick_step(90);
  p.setPen(pal.color(QPalette::Mid));
  for (double t : axis_.ticks(90)) {
    const double x = axis_.x_of(t);
    p.drawLine(QPointF(x, kHeader - 6), QPointF(x, plot.bottom()));
    p.setPen(pal.color(QPalette::Text));
    p.drawText(QRectF(x - 45, kHeader - 22, 90, 14), Qt::AlignCenter, format_time_tick(t, tick_step));
    p.setPen(pal.color(QPalette::Mid));
  }

  // Rows.
  const double h = row_height();
  const int nrows = static_cast<int>(data_.rows.size());
  // Stages alternate in shade; rows too thin to label are labelled per stage.
  for (int r = 0; r < nrows;) {
    const int stage = data_.rows[static_cast<std::size_t>(r)].stage;
    int end = r;
    while (end < nrows && data_.rows[static_cast<std::size_t>(end)].stage == stage) ++end;
    const double y0 = plot.top() + r * h;
    const double y1 = plot.top() + end * h;
    if (stage % 2 == 1) p.fillRect(QRectF(0, y0, width(), y1 - y0), pal.color(QPalette::AlternateBase));
    p.setPen(pal.color(QPalette::Text));
    if (h >= 11) {
      for (int i = r; i < end; ++i) {
        const auto& row = data_.rows[static_cast<std::size_t>(i)];
        const QRectF cell(6, plot.top() + i * h, kLabelWidth - 12, h);
        p.setPen(pal.color(QPalette::Text));
        p.drawText(cell, Qt::AlignVCenter | Qt::AlignLeft, row.label);
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(cell, Qt::AlignVCenter | Qt::AlignRight, format_percent(row.busy_fraction).remove(QLatin1Char(' ')));
      }
    } else {
      p.drawText(QRectF(6, y0, kLabelWidth - 10, y1 - y0), Qt::AlignVCenter | Qt::AlignLeft,
                 QStringLiteral("stage %1 (%2 rows)").arg(stage).arg(end - r));
    }
    r = end;
  }
  p.setClipRect(plot.adjusted(0, 0, 1, 0));
  // Bars for the window (timeline_bars): each operation once it is a few pixels
  // wide, runs of narrower ones merged into bands when zoomed out; a bar still
  // gets one pixel so nothing vanishes.
  for (const auto& bar : timeline_bars(data_, axis_, kMergePx)) {
    const double x0 = axis_.x_of(bar.start_s);
    const double x1 = std::max(axis_.x_of(bar.end_s), x0 + 1);
    const double y = plot.top() + bar.row * h;
    const double pad = bar.kind == TimelineKind::idle ? 0 : std::min(2.0, h * 0.12);
    if (bar.count > 1) {
      // A merged run: each kind's share of its time, stacked in the legend's
      // order from the row's floor, as high as the run keeps its row busy
      // (occupancy; at least a pixel, so nothing vanishes).
      const double total = bar.busy_s();
      const double filled = std::max(1.0, (h - 2 * pad) * bar.occupancy());
      double top = y + h - pad - filled;
      for (std::size_t k = 0; k < bar.time.size() && total > 0; ++k) {
        if (bar.time[k] <= 0) continue;
        const double hk = filled * bar.time[k] / total;
        p.fillRect(QRectF(x0, top, x1 - x0, hk), timeline_color(static_cast<TimelineKind>(k)));
        top += hk;
      }
      continue;
    }
    p.fillRect(QRectF(x0, y + pad, x1 - x0, h - 2 * pad), timeline_color(bar.kind));
    if (x1 - x0 > 6 && bar.kind != TimelineKind::idle) {
      p.setPen(timeline_color(bar.kind).darker(130));
      p.drawLine(QPointF(x0, y + pad), QPointF(x0, y + h - pad));
    }
  }
  p.setClipping(false);
  p.setPen(pal.color(QPalette::Dark));
  p.drawRect(QRectF(plot.left(), plot.top(), plot.width(), nrows * h));
}

void TimelineWidget::wheelEvent(QWheelEvent* event) {
  if (data_.empty()) return;
  fit_axis_to_width();
  const double steps = event->angleDelta().y() / 120.0;
  axis_ = axis_.zoomed(event->position().x(), std::pow(1.25, steps));
  clamp();
  update();
  event->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) {
    dragging_ = true;
    drag_x_ = event->position().x();
    setCursor(Qt::ClosedHandCursor);
  }
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* event) {
  if (!dragging_) return;
  const double x = event->position().x();
  axis_ = axis_.panned(x - drag_x_);
  drag_x_ = x;
  clamp();
  update();
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* /*event*/) {
  dragging_ = false;
  unsetCursor();
}

void TimelineWidget::mouseDoubleClickEvent(QMouseEvent* /*event*/) { reset_zoom(); }

void TimelineWidget::keyPressEvent(QKeyEvent* event) {
  switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoom(1.5); break;
    case Qt::Key_Minus: zoom(1 / 1.5); break;
    case Qt::Key_Home:
    case Qt::Key_0: reset_zoom(); break;
    case Qt::Key_Left: axis_ = axis_.panned(axis_.width_px / 8); clamp(); update(); break;
    case Qt::Key_Right: axis_ = axis_.panned(-axis_.width_px / 8); clamp(); update(); break;
    default: QWidget::keyPressEvent(event);
  }
}

std::optional<TimelineBar> TimelineWidget::bar_at(QPointF pos) const {
  const QRectF plot = plot_rect();
  if (!plot.contains(pos) || data_.empty()) return std::nullopt;
  const int row = static_cast<int>((pos.y() - plot.top()) / row_height());
  const double t = axis_.t_of(pos.x());
  const double slack = 2 * axis_.seconds_per_px();  // thin bars are hard to hit exactly
  std::optional<TimelineBar> best;
  for (const auto& bar : timeline_bars(data_, axis_, kMergePx)) {
    if (bar.row != row || bar.start_s > t + slack || bar.end_s < t - slack) continue;
    if (!best || best->kind == TimelineKind::idle) best = bar;
  }
  return best;
}

bool TimelineWidget::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    const auto* help = static_cast<QHelpEvent*>(event);
    if (const auto bar = bar_at(help->pos())) {
      const auto& first = data_.items[bar->first];
      const QString what =
          bar->count == 1 ? first.label.toHtmlEscaped()
                          : QStringLiteral("%1 operations, %2 … %3 (zoom in for each)<br>%4")
                                .arg(bar->count)
                                .arg(first.label.toHtmlEscaped(),
                                     data_.items[bar->first + static_cast<std::size_t>(bar->count) - 1]
                                         .label.toHtmlEscaped(),
                                     timeline_bar_mix(*bar));
      QToolTip::showText(help->globalPos(),
                         QStringLiteral("<b>%1</b><br>%2<br>%3 → %4 (%5)")
                             .arg(what, data_.rows[static_cast<std::size_t>(bar->row)].label,
                                  format_duration(bar->start_s), format_duration(bar->end_s),
                                  format_duration(bar->end_s - bar->start_s)),
                         this);
    } else if (help->pos().y() < kHeader - 22 && message_.isEmpty() && !data_.empty() &&
               shown_caption(caption_, data_, QFontMetrics(header_font(font())), width()) != caption_) {
      QToolTip::showText(help->globalPos(), caption_.toHtmlEscaped(), this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(event);
}

}  // namespace ztune::gui
