// DynamicLossScaler against DeepSpeed's update_scale traced by hand
// (deepspeed/runtime/fp16/loss_scaler.py; defaults from the ds_config "fp16"
// section: 2^16, window 1000, hysteresis 2, min 1). Runs on any machine.
#include <catch2/catch.hpp>

#include <vector>

#include "ztune/executor/loss_scaler.hpp"

using ztune::executor::DynamicLossScaler;
using ztune::executor::LossScaleAtMinimum;
using ztune::executor::LossScaleConfig;

TEST_CASE("default scaler: 2^16, doubles after 1000 clean steps", "[loss_scale]") {
  DynamicLossScaler s;
  CHECK(s.scale() == 65536.0f);
  for (int i = 0; i < 998; ++i) REQUIRE(s.update(false));
  CHECK(s.scale() == 65536.0f);  // iterations 0..997: (iter + 1) % 1000 != 0
  CHECK(s.update(false));        // iteration 998
  CHECK(s.scale() == 65536.0f);
  CHECK(s.update(false));        // iteration 999: (999 − (−1)) % 1000 == 0
  CHECK(s.scale() == 131072.0f);
  CHECK(s.skipped_steps() == 0);
}

TEST_CASE("hysteresis 2: the first overflow only spends the budget, it is restored on growth only",
          "[loss_scale]") {
  DynamicLossScaler s;
  CHECK_FALSE(s.update(true));  // iter 0: hysteresis 2 → 1, scale kept, step skipped
  CHECK(s.scale() == 65536.0f);
  CHECK(s.hysteresis_left() == 1);
  CHECK_FALSE(s.update(true));  // iter 1: budget spent → halve
  CHECK(s.scale() == 32768.0f);
  CHECK(s.update(false));       // iter 2: clean; not consecutive_hysteresis, so the budget stays 1
  CHECK(s.hysteresis_left() == 1);
  CHECK_FALSE(s.update(true));  // iter 3: halves at once
  CHECK(s.scale() == 16384.0f);
  for (int iter = 4; iter < 1003; ++iter) REQUIRE(s.update(false));
  CHECK(s.scale() == 16384.0f);  // 999 clean steps since the overflow at iter 3
  CHECK(s.update(false));        // iter 1003: (1003 − 3) % 1000 == 0
  CHECK(s.scale() == 32768.0f);
  CHECK(s.hysteresis_left() == 2);
  CHECK(s.skipped_steps() == 3);
  CHECK(s.steps() == 1004);
}

TEST_CASE("consecutive hysteresis restores the budget after any clean step", "[loss_scale]") {
  LossScaleConfig c;
  c.consecutive_hysteresis = true;
  DynamicLossScaler s(c);
  s.update(true);
  s.update(false);
  CHECK(s.hysteresis_left() == 2);
  s.update(true);
  CHECK(s.scale() == 65536.0f);  // budget was restored, so no halving yet
}

TEST_CASE("an overflow at the minimum scale is an error", "[loss_scale]") {
  LossScaleConfig c;
  c.initial_scale_power = 1;
  c.hysteresis = 1;
  DynamicLossScaler s(c);
  CHECK_FALSE(s.update(true));
  CHECK(s.scale() == 1.0f);
  CHECK_THROWS_AS(s.update(true), LossScaleAtMinimum);
  CHECK_THROWS_AS(DynamicLossScaler(LossScaleConfig{16, 0, 2, false, 1.0f, 2.0f}), std::invalid_argument);
}

TEST_CASE("a restored scaler goes on as the one it was saved from", "[loss_scale]") {
  // The oracle: one scaler run through a whole sequence of overflows and clean
  // steps; a second, restored from the first's state half-way, must answer
  // every later step as the first does (a checkpoint's resume).
  LossScaleConfig c;
  c.window = 5;
  const std::vector<bool> overflows{false, true, true, false, false, true, false, false, false, false,
                                    false, false, true, true, true, false, false, false, false, false};
  DynamicLossScaler whole(c), first(c);
  for (std::size_t i = 0; i < 9; ++i) (void)first.update(overflows[i]);
  DynamicLossScaler resumed(c);
  resumed.restore(first.state());
  for (std::size_t i = 0; i < overflows.size(); ++i) {
    const bool applied = whole.update(overflows[i]);
    if (i < 9) continue;
    INFO("step " << i);
    CHECK(resumed.update(overflows[i]) == applied);
    CHECK(resumed.scale() == whole.scale());
    CHECK(resumed.hysteresis_left() == whole.hysteresis_left());
    CHECK(resumed.skipped_steps() == whole.skipped_steps());
  }
  CHECK(whole.skipped_steps() == 6);
  // A state no run of this configuration reaches is refused.
  DynamicLossScaler::State bad = whole.state();
  bad.skipped = bad.iter + 1;
  CHECK_THROWS_AS(resumed.restore(bad), std::invalid_argument);
  bad = whole.state();
  bad.hysteresis_left = c.hysteresis + 1;
  CHECK_THROWS_AS(resumed.restore(bad), std::invalid_argument);
  bad = whole.state();
  bad.scale = 0.5f;  // below min_scale
  CHECK_THROWS_AS(resumed.restore(bad), std::invalid_argument);
}
