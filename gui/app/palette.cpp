#include "palette.hpp"

#include <array>

#include "ztune/model/prediction.hpp"

namespace ztune::gui {

QColor series_color(std::size_t i) {
  // Tableau 10: distinguishable, readable on white, colour-blind friendlier than Qt's defaults.
  // Tableau 10 and four more, as many as the longest series (the iteration
  // time's parts, TimePart): a wrapped index had drawn framework overhead in
  // backward's orange.
  static constexpr std::array<QRgb, 14> kColors{0x4e79a7, 0xf28e2b, 0x59a14f, 0xe15759, 0x76b7b2,
                                                0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0xbab0ac,
                                                0x86bcb6, 0x2f4b7c, 0x8cd17d, 0xd37295};
  static_assert(kColors.size() >= static_cast<std::size_t>(TimePart::count), "a colour for every time part");
  return QColor::fromRgb(kColors[i % kColors.size()]);
}

QColor timeline_color(TimelineKind k) {
  switch (k) {
    case TimelineKind::forward: return QColor::fromRgb(0x4e79a7);
    case TimelineKind::backward: return QColor::fromRgb(0xf28e2b);
    case TimelineKind::recompute: return QColor::fromRgb(0xb07aa1);
    case TimelineKind::communication: return QColor::fromRgb(0x59a14f);
    case TimelineKind::offload: return QColor::fromRgb(0x9c755f);
    case TimelineKind::optimizer: return QColor::fromRgb(0xedc948);
    case TimelineKind::idle: return QColor::fromRgb(0xf3d0d0);
    case TimelineKind::other:
    case TimelineKind::count: break;
  }
  return QColor::fromRgb(0xbab0ac);
}

QColor error_color() { return QColor::fromRgb(0xc0392b); }
QColor capacity_color() { return QColor::fromRgb(0xc0392b); }

}  // namespace ztune::gui
