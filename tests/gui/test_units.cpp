// Unit formatting: each expected string is the closed-form conversion written by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "ztune/gui/units.hpp"

using namespace ztune::gui;

TEST_CASE("bytes use binary prefixes", "[gui][units]") {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  CHECK(format_bytes(32 * gib) == "32.0 GiB");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(300.0 * 1024 * 1024) == "300.0 MiB");
  CHECK(format_bytes(1.5 * 1024 * gib) == "1.50 TiB");
  // A "32 GB" datasheet V100 (32e9 bytes) is 29.8 GiB.
  CHECK(format_bytes(32e9) == "29.8 GiB");
  CHECK(to_gib(8 * gib) == Approx(8.0));
}

TEST_CASE("durations from microseconds to days", "[gui][units]") {
  CHECK(format_duration(2.5e-5) == "25 µs");
  CHECK(format_duration(0.0123) == "12.3 ms");
  CHECK(format_duration(0.5) == "500 ms");
  CHECK(format_duration(4.56) == "4.56 s");
  CHECK(format_duration(90) == "1.50 min");
  CHECK(format_duration(5400) == "1.50 h");
  // Three digits below ten of a unit: two plans 1.5 s apart read apart.
  CHECK(format_duration(75.26) == "1.25 min");
  CHECK(format_duration(76.79) == "1.28 min");
  CHECK(format_duration(1500) == "25.0 min");
  CHECK(format_duration(3 * 86400.0) == "3.0 days");
  CHECK(format_duration(std::numeric_limits<double>::infinity()) == "∞");
  CHECK(format_days(12.34) == "12.3 days");
  CHECK(format_days(0.25) == "6.0 h");
  CHECK(format_days(0.5 / 24) == "30.0 min");   // a tiny model's budget
  CHECK(format_days(12.0 / 86400) == "12.0 s");
  CHECK(format_days(1.0) == "1.0 day");
  CHECK(format_days(250) == "250 days");
}

TEST_CASE("rates, percentages and counts", "[gui][units]") {
  CHECK(format_tflops(123.44) == "123 TFLOP/s");
  CHECK(format_tflops(45.67) == "45.7 TFLOP/s");
  CHECK(format_tflops(0.0123) == "12.3 GFLOP/s");  // a CPU rank
  CHECK(format_tflops(4.56e-4) == "456 MFLOP/s");
  CHECK(format_tflops(0) == "0.0 TFLOP/s");
  CHECK(format_tokens_per_s(1234567) == "1.23 M tokens/s");
  CHECK(format_tokens_per_s(45600) == "45.6 k tokens/s");
  CHECK(format_tokens_per_s(1151) == "1.15 k tokens/s");
  CHECK(format_tokens_per_s(1249) == "1.25 k tokens/s");
  CHECK(format_tokens_per_s(812) == "812 tokens/s");
  CHECK(format_percent(0.4321) == "43.2 %");
  CHECK(format_count(1.0e11) == "100 B");
  CHECK(format_count(3.0e12) == "3.00 T");
  CHECK(format_count(1500) == "1.50 k");
  // Three figures: the plans table's tokens/s of plans a percent apart differ.
  CHECK(format_count(5149) == "5.15 k");
  CHECK(format_count(5083) == "5.08 k");
}

TEST_CASE("zero reads as zero seconds", "[gui][units]") { CHECK(format_duration(0) == "0 s"); }

TEST_CASE("axis ticks read in the unit of their step", "[gui][units]") {
  CHECK(format_time_tick(60, 20) == "60 s");
  CHECK(format_time_tick(100, 20) == "100 s");
  CHECK(format_time_tick(0.015, 0.005) == "15 ms");
  CHECK(format_time_tick(0.0015, 0.0005) == "1.5 ms");
  CHECK(format_time_tick(2e-5, 1e-5) == "20 µs");
  CHECK(format_time_tick(2.5, 0.5) == "2.5 s");
  CHECK(format_time_tick(0.6, 0.2) == "600 ms");
  CHECK(format_time_tick(3, 1) == "3 s");
  CHECK(format_time_tick(-1e-17, 0.1) == "0 ms");
}
