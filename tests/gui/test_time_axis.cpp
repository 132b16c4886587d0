// The timeline's time↔pixel arithmetic against hand-computed positions.
#include <catch2/catch.hpp>

#include "ztune/gui/time_axis.hpp"

using ztune::gui::TimeAxis;

TEST_CASE("time maps linearly onto the plot and back", "[gui][time_axis]") {
  const TimeAxis a{0.0, 2.0, 100.0, 400.0};  // 2 s over 400 px from x = 100: 5 ms per pixel
  CHECK(a.seconds_per_px() == Approx(0.005));
  CHECK(a.x_of(0) == Approx(100));
  CHECK(a.x_of(1) == Approx(300));
  CHECK(a.x_of(2) == Approx(500));
  CHECK(a.x_of(3) == Approx(700));  // outside the window: beyond the right edge
  CHECK(a.t_of(300) == Approx(1));
  CHECK(a.t_of(100) == Approx(0));
  for (double t : {0.0, 0.37, 1.5, 2.0}) CHECK(a.t_of(a.x_of(t)) == Approx(t));
}

TEST_CASE("zoom keeps the time under the cursor in place", "[gui][time_axis]") {
  const TimeAxis a{0.0, 2.0, 100.0, 400.0};
  // Zoom ×4 at x = 300 (t = 1 s, the middle): the window becomes [0.75, 1.25].
  const TimeAxis z = a.zoomed(300, 4);
  CHECK(z.start_s == Approx(0.75));
  CHECK(z.end_s == Approx(1.25));
  CHECK(z.t_of(300) == Approx(1.0));
  // Zoom ×2 at the left edge keeps the left edge: [0, 1].
  const TimeAxis l = a.zoomed(100, 2);
  CHECK(l.start_s == Approx(0));
  CHECK(l.end_s == Approx(1));
  // Zoom at x = 200 (t = 0.5, a quarter in) by 2: span 1 s, 0.25 of it left of the anchor.
  const TimeAxis q = a.zoomed(200, 2);
  CHECK(q.start_s == Approx(0.25));
  CHECK(q.end_s == Approx(1.25));
  // Zooming out by the inverse factor restores the window.
  const TimeAxis back = z.zoomed(300, 0.25);
  CHECK(back.start_s == Approx(0).margin(1e-12));
  CHECK(back.end_s == Approx(2));
}

TEST_CASE("pan moves the window by whole pixels of time", "[gui][time_axis]") {
  const TimeAxis a{1.0, 2.0, 0.0, 100.0};  // 10 ms per pixel
  const TimeAxis p = a.panned(20);          // drag right 20 px: 0.2 s earlier comes into view
  CHECK(p.start_s == Approx(0.8));
  CHECK(p.end_s == Approx(1.8));
  CHECK(a.panned(-50).start_s == Approx(1.5));
}

TEST_CASE("clamping keeps the window inside the data", "[gui][time_axis]") {
  const TimeAxis a{-0.5, 0.5, 0.0, 100.0};
  const TimeAxis c = a.clamped(0, 10, 1e-6);
  CHECK(c.start_s == Approx(0));
  CHECK(c.end_s == Approx(1));
  const TimeAxis wide{-5, 20, 0, 100};  // zoomed out past the data: show all of it
  const TimeAxis w = wide.clamped(0, 10, 1e-6);
  CHECK(w.start_s == Approx(0));
  CHECK(w.end_s == Approx(10));
  const TimeAxis narrow{5, 5 + 1e-9, 0, 100};  // zoomed in too far: the minimum span around the centre
  const TimeAxis n = narrow.clamped(0, 10, 1e-3);
  CHECK(n.span_s() == Approx(1e-3));
  CHECK(0.5 * (n.start_s + n.end_s) == Approx(5 + 0.5e-9));
  const TimeAxis right{9.5, 10.5, 0, 100};
  CHECK(right.clamped(0, 10, 1e-6).end_s == Approx(10));
  CHECK(right.clamped(0, 10, 1e-6).start_s == Approx(9));
}

TEST_CASE("ticks fall on a 1-2-5 grid", "[gui][time_axis]") {
  const TimeAxis a{0.0, 1.0, 0.0, 1000.0};  // 1 ms per pixel
  // 80 px at 1 ms/px = 80 ms: the next 1-2-5 step up is 100 ms.
  CHECK(a.tick_step(80) == Approx(0.1));
  const auto t = a.ticks(80);
  REQUIRE(t.size() == 11);
  CHECK(t.front() == Approx(0));
  CHECK(t[3] == Approx(0.3));
  CHECK(t.back() == Approx(1.0));
  CHECK(a.tick_step(150) == Approx(0.2));
  CHECK(a.tick_step(300) == Approx(0.5));
  const TimeAxis b{0.123, 0.456, 0.0, 100.0};  // 3.33 ms/px; 30 px → 100 ms
  const auto u = b.ticks(30);
  REQUIRE(u.size() == 3);
  CHECK(u[0] == Approx(0.2));
  CHECK(u[2] == Approx(0.4));
}
