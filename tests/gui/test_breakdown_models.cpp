// Memory and time breakdowns, the scaling curve and the comparison table, on
// hand-made predictions.
#include <catch2/catch.hpp>

#include <QAbstractItemModelTester>

#include "plan_fixtures.hpp"
#include "ztune/gui/compare_model.hpp"
#include "ztune/gui/memory_breakdown_model.hpp"
#include "ztune/gui/scaling_model.hpp"
#include "ztune/gui/time_breakdown_model.hpp"

using namespace ztune;
using namespace ztune::gui;
using test::kGiB;

namespace {

MemoryPrediction memory(double params_gib, double activations_gib) {
  MemoryPrediction m;
  m.gpu[static_cast<std::size_t>(MemLine::params)] = params_gib * kGiB;
  m.gpu[static_cast<std::size_t>(MemLine::activations)] = activations_gib * kGiB;
  m.gpu_total_bytes = (params_gib + activations_gib) * kGiB;
  m.gpu_capacity_bytes = 32 * kGiB;
  return m;
}

}  // namespace

TEST_CASE("memory breakdown: rows are the cost model's lines, cells GiB", "[gui][models]") {
  MemoryBreakdownModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  CHECK(model.rowCount() == static_cast<int>(MemLine::count));
  CHECK(model.columnCount() == 0);
  model.set_memory({"#1", "#2"}, {memory(4, 12), memory(1, 3)});
  REQUIRE(model.columnCount() == 2);
  const int params = static_cast<int>(MemLine::params);
  const int acts = static_cast<int>(MemLine::activations);
  CHECK(model.headerData(params, Qt::Vertical).toString() == "Parameters");
  CHECK(model.headerData(1, Qt::Horizontal).toString() == "#2");
  CHECK(model.index(params, 0).data().toDouble() == Approx(4.0));
  CHECK(model.index(acts, 0).data().toDouble() == Approx(12.0));
  CHECK(model.index(acts, 0).data(BreakdownModel::FormattedRole).toString() == "12.0 GiB");
  CHECK(model.index(acts, 0).data(BreakdownModel::ShareRole).toDouble() == Approx(0.75));
  CHECK(model.total(0) == Approx(16 * kGiB));
  CHECK(model.total(1) == Approx(4 * kGiB));
  model.clear();
  CHECK(model.columnCount() == 0);
}

TEST_CASE("memory breakdown: a model under one GiB is plotted in MiB (KiB under one MiB)", "[gui][models]") {
  // memory(p, a) is p and a GiB of parameters and activations: 3 and 1 MiB as
  // fractions of a GiB. The bars must not sit at 0.003 on a GiB axis.
  MemoryBreakdownModel model;
  model.set_memory({"#1"}, {memory(3.0 / 1024, 1.0 / 1024)});
  CHECK(model.plot_unit_name() == "MiB");
  CHECK(model.index(static_cast<int>(MemLine::params), 0).data().toDouble() == Approx(3.0));
  CHECK(model.index(static_cast<int>(MemLine::params), 0).data(BreakdownModel::FormattedRole).toString() == "3.0 MiB");
  model.set_memory({"#1"}, {memory(3.0 / (1024 * 1024), 0)});
  CHECK(model.plot_unit_name() == "KiB");
  CHECK(model.index(static_cast<int>(MemLine::params), 0).data().toDouble() == Approx(3.0));
  model.set_memory({"#1", "#2"}, {memory(3.0 / 1024, 0), memory(2, 0)});  // the largest plan decides
  CHECK(model.plot_unit_name() == "GiB");
  CHECK(model.index(static_cast<int>(MemLine::params), 1).data().toDouble() == Approx(2.0));
}

TEST_CASE("time breakdown: the parts of an iteration in seconds", "[gui][models]") {
  TimeBreakdownModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  TimePrediction t;
  t.parts[static_cast<std::size_t>(TimePart::forward)] = 1.0;
  t.parts[static_cast<std::size_t>(TimePart::backward)] = 2.0;
  t.parts[static_cast<std::size_t>(TimePart::bubble)] = 0.5;
  t.iteration_s = 3.5;
  model.set_times({"Analytical"}, {t});
  CHECK(model.rowCount() == static_cast<int>(TimePart::count));
  CHECK(model.index(static_cast<int>(TimePart::backward), 0).data().toDouble() == Approx(2.0));
  CHECK(model.index(static_cast<int>(TimePart::bubble), 0).data(BreakdownModel::FormattedRole).toString() ==
        "500 ms");
  CHECK(model.headerData(static_cast<int>(TimePart::bubble), Qt::Vertical).toString() == "Pipeline bubble");
  CHECK(model.total(0) == Approx(3.5));
}

TEST_CASE("scaling model keeps points sorted by GPU count", "[gui][models]") {
  ScalingModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.add_point({0, 64, true, 6000, 0.45, 56, "dp64"});
  model.add_point({0, 16, false, 0, 0, 0, ""});
  model.add_point({0, 32, true, 3000, 0.44, 55, "dp32"});
  REQUIRE(model.rowCount() == 3);
  CHECK(model.index(0, ScalingModel::gpus).data().toInt() == 16);
  CHECK(model.index(2, ScalingModel::gpus).data().toInt() == 64);
  CHECK(model.index(1, ScalingModel::mfu_percent).data().toDouble() == Approx(44.0));
  CHECK(model.index(0, ScalingModel::tokens_per_s).data(ScalingModel::FormattedRole).toString() == "does not fit");
  CHECK_FALSE(model.index(0, 0).data(ScalingModel::FeasibleRole).toBool());
  model.add_point({0, 32, true, 3100, 0.45, 55, "dp32 again"});  // replaces
  CHECK(model.rowCount() == 3);
  CHECK(model.index(1, ScalingModel::tokens_per_s).data().toDouble() == Approx(3100));
  model.clear();
  CHECK(model.rowCount() == 0);
}

TEST_CASE("compare model puts plans side by side and marks the best", "[gui][models]") {
  CompareModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  auto plans = test::four_plans();
  model.set_plans({"#1", "#2", "#3"}, {plans[0], plans[1], plans[2]}, 1e12);
  REQUIRE(model.columnCount() == 3);
  CHECK(model.index(CompareModel::layout, 2).data().toString() == "dp4 · tp2 · pp2");
  CHECK(model.index(CompareModel::throughput, 0).data(CompareModel::BestRole).toBool());   // 40k tokens/s
  CHECK_FALSE(model.index(CompareModel::throughput, 1).data(CompareModel::BestRole).toBool());
  CHECK(model.index(CompareModel::gpu_memory, 1).data(CompareModel::BestRole).toBool());   // 9.5 GiB, least
  CHECK_FALSE(model.index(CompareModel::layout, 0).data(CompareModel::BestRole).toBool()); // not ranked
  CHECK(model.headerData(CompareModel::mfu, Qt::Vertical).toString() == "MFU");
  CHECK(model.index(CompareModel::attention, 0).data().toString() == "standard");
}
