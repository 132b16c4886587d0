// The plans table: every plan that fits, sorted and filtered by the model
// itself over all of them, its rows fetched lazily.
#include <catch2/catch.hpp>

#include <QAbstractItemModelTester>

#include "plan_fixtures.hpp"
#include "ztune/gui/labels.hpp"
#include "ztune/gui/plan_table_model.hpp"

using namespace ztune;
using namespace ztune::gui;
using test::four_plans;

TEST_CASE("the plans table passes QAbstractItemModelTester", "[gui][models]") {
  PlanTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.set_plans(four_plans(), 1e12);
  model.set_zero_stage(3);
  model.sort(PlanTableModel::gpu_memory);
  model.clear();
  CHECK(model.rowCount() == 0);
}

TEST_CASE("cells read in units, sort values are numbers", "[gui][models]") {
  PlanTableModel model;
  model.set_plans(four_plans(), 1e12);
  REQUIRE(model.rowCount() == 4);
  REQUIRE(model.columnCount() == PlanTableModel::column_count);
  CHECK(model.index(0, PlanTableModel::layout).data().toString() == "dp8 · tp2 · pp1");
  CHECK(model.index(0, PlanTableModel::gpus).data().toInt() == 16);
  CHECK(model.index(0, PlanTableModel::gpu_memory).data().toString() == "10.1 GiB");
  CHECK(model.index(0, PlanTableModel::throughput).data().toString() == "40.0 k");  // "Tokens/s" in the header
  CHECK(model.headerData(PlanTableModel::throughput, Qt::Horizontal).toString() == "Tokens/s");
  {
    // A plan the simulator re-timed reads its simulated figure, marked * as `ztune search` marks it.
    auto simulated = four_plans();
    TimePrediction t = simulated[0].prediction.time;
    t.tokens_per_s = 38000;
    simulated[0].simulated = t;
    PlanTableModel m2;
    m2.set_plans(simulated, 1e12);
    CHECK(m2.index(0, PlanTableModel::throughput).data().toString() == "38.0 k*");
    CHECK(m2.index(1, PlanTableModel::throughput).data().toString().endsWith("k"));
  }
  CHECK(model.index(2, PlanTableModel::offload).data().toString() == "optimizer → CPU");
  CHECK(model.index(1, PlanTableModel::zero).data().toString() == "ZeRO-1");
  // 1e12 tokens at 40,000 tokens/s: 2.5e7 s = 289.35 days.
  CHECK(model.index(0, PlanTableModel::days).data(PlanTableModel::SortRole).toDouble() == Approx(289.35).epsilon(1e-4));
  CHECK(model.index(1, PlanTableModel::gpu_memory).data(PlanTableModel::SortRole).toDouble() ==
        Approx(9.5 * test::kGiB));
  CHECK(model.headerData(PlanTableModel::mfu, Qt::Horizontal).toString() == "MFU");
  CHECK(model.index(0, PlanTableModel::attention).data().toString() == "standard");
  auto plans = four_plans();
  plans[0].plan.attention = AttentionKernel::flash;
  plans[1].plan.sparse_attention = SparseLayout::fixed;
  plans[1].plan.sparse_block = 32;
  model.set_plans(plans, 1e12);
  CHECK(model.index(0, PlanTableModel::attention).data().toString() == "flash");
  CHECK(model.index(1, PlanTableModel::attention).data().toString() == "sparse fixed/32");
  // A plan file run without Megatron's bias fusions says so beside its kernel.
  plans[0].plan.attention = AttentionKernel::eager;
  plans[0].plan.bias_fusion = false;
  model.set_plans(plans, 1e12);
  CHECK(model.index(0, PlanTableModel::attention).data().toString() == "eager · unfused bias");
}

TEST_CASE("sorting is numeric: 9.5 GiB before 10.1 GiB", "[gui][models]") {
  PlanTableModel model;
  model.set_plans(four_plans(), 1e12);
  PlanTableModel& proxy = model;
  proxy.sort(PlanTableModel::gpu_memory, Qt::AscendingOrder);
  QStringList order;
  for (int r = 0; r < proxy.rowCount(); ++r) order << proxy.index(r, PlanTableModel::gpu_memory).data().toString();
  CHECK(order == QStringList{"2.0 GiB", "9.5 GiB", "10.1 GiB", "30.0 GiB"});
  proxy.sort(PlanTableModel::throughput, Qt::DescendingOrder);
  CHECK(proxy.index(0, PlanTableModel::rank).data().toInt() == 1);
  CHECK(proxy.index(3, PlanTableModel::rank).data().toInt() == 4);
}

TEST_CASE("filters: only ZeRO-3, only without offload", "[gui][models]") {
  PlanTableModel model;
  model.set_plans(four_plans(), 1e12);
  PlanTableModel& proxy = model;
  CHECK(proxy.rowCount() == 4);
  proxy.set_zero_stage(3);
  CHECK(proxy.rowCount() == 3);  // plans 1, 3, 4
  proxy.set_hide_offload(true);
  REQUIRE(proxy.rowCount() == 1);  // plan 1 only
  CHECK(proxy.index(0, PlanTableModel::rank).data().toInt() == 1);
  proxy.set_zero_stage(std::nullopt);
  CHECK(proxy.rowCount() == 2);  // plans 1 and 2
  proxy.set_hide_offload(false);
  proxy.set_gpus(16);
  CHECK(proxy.rowCount() == 4);  // all use 16 GPUs
  proxy.set_gpus(8);
  CHECK(proxy.rowCount() == 0);
}

TEST_CASE("context parallelism shows in the layout, after tp, and sorts there", "[gui][models][cp]") {
  PlanTableModel model;
  auto plans = four_plans();
  plans[0].plan.cp = 2;
  plans[0].plan.dp = 4;
  model.set_plans(plans, 1e12);
  CHECK(model.index(0, PlanTableModel::layout).data().toString() == "dp4 · tp2 · cp2 · pp1");
  CHECK(model.index(0, PlanTableModel::gpus).data().toInt() == 16);  // dp × tp × cp × pp
  // The same tp and pp: cp 2 sorts after cp 1.
  plans[1].plan = plans[0].plan;
  plans[1].plan.cp = 1;
  plans[1].plan.dp = 8;
  model.set_plans(plans, 1e12);
  CHECK(model.index(0, PlanTableModel::layout).data(PlanTableModel::SortRole).toInt() >
        model.index(1, PlanTableModel::layout).data(PlanTableModel::SortRole).toInt());
  CHECK(model.index(1, PlanTableModel::layout).data().toString() == "dp8 · tp2 · pp1");
}

TEST_CASE("uneven stages and stated chunks show in the layout by their range", "[gui][models][stages]") {
  PlanTableModel model;
  auto plans = four_plans();
  plans[0].plan.pp = 2;
  plans[0].plan.dp = 4;
  plans[0].plan.virtual_stages = 2;
  plans[0].plan.schedule = Schedule::interleaved;
  plans[0].plan.chunk_layers = {0, 1, 1, 0};  // Megatron-Core's accounting layout: both ends empty
  plans[0].plan.stage_layers = {1, 1};
  plans[1].plan.pp = 2;
  plans[1].plan.dp = 4;
  plans[1].plan.stage_layers = {3, 1};
  model.set_plans(plans, 1e12);
  QStringList layouts;
  for (int row = 0; row < model.rowCount(); ++row) layouts << model.index(row, PlanTableModel::layout).data().toString();
  INFO(layouts.join(QStringLiteral(" | ")).toStdString());
  CHECK(layouts.contains(QStringLiteral("dp4 · tp2 · pp2 · v2 · chunks 0-1")));
  CHECK(layouts.contains(QStringLiteral("dp4 · tp1 · pp2 · stages 1-3")));
}

TEST_CASE("balanced stages that pp does not divide show as uneven, for every engine's plan", "[gui][models][stages]") {
  // 126 layers (Llama 3.1 405B) on 8 stages: 6 × 16 then 2 × 15 (stage_layer_count),
  // which only a stated partition had shown; 32 on 4 are even and say nothing.
  Plan p;
  p.pp = 8;
  p.dp = 2;
  p.tp = 8;
  CHECK(layout_label(p, 126) == QStringLiteral("dp2 · tp8 · pp8 · stages 15-16"));
  CHECK(layout_label(p, 128) == QStringLiteral("dp2 · tp8 · pp8"));
  CHECK(layout_label(p) == QStringLiteral("dp2 · tp8 · pp8"));  // the model unknown: as stated only
  PlanTableModel model;
  auto plans = four_plans();
  plans[0].plan.pp = 3;
  plans[0].plan.dp = 1;
  model.set_plans(plans, 1e12, Objective::throughput, 0, 32);  // 32 layers on 3 stages: 11, 11, 10
  bool seen = false;
  for (int row = 0; row < model.rowCount(); ++row)
    seen = seen || model.index(row, PlanTableModel::layout).data().toString().contains(QStringLiteral("pp3 · stages 10-11"));
  CHECK(seen);
}

TEST_CASE("DeepSpeed-Ulysses shows in the layout, after tp, and sorts there", "[gui][models][ulysses]") {
  PlanTableModel model;
  auto plans = four_plans();
  plans[0].plan.ulysses = 2;
  plans[0].plan.dp = 4;
  model.set_plans(plans, 1e12);
  CHECK(model.index(0, PlanTableModel::layout).data().toString() == "dp4 · tp2 · u2 · pp1");
  CHECK(model.index(0, PlanTableModel::gpus).data().toInt() == 16);  // dp × tp × ulysses × pp
  plans[1].plan = plans[0].plan;
  plans[1].plan.ulysses = 1;
  plans[1].plan.dp = 8;
  model.set_plans(plans, 1e12);
  CHECK(model.index(0, PlanTableModel::layout).data(PlanTableModel::SortRole).toInt() >
        model.index(1, PlanTableModel::layout).data(PlanTableModel::SortRole).toInt());
}

TEST_CASE("hybrid sharding shows in the layout as the shard group size", "[gui][models][hsdp]") {
  PlanTableModel model;
  auto plans = four_plans();
  plans[0].plan.dp = 8;
  plans[0].plan.zero_stage = 3;
  plans[0].plan.dp_shard = 4;
  model.set_plans(plans, 1e12);
  CHECK(model.index(0, PlanTableModel::layout).data().toString() == "dp8 · tp2 · pp1 · shard4");
  plans[0].plan.dp_shard = 0;
  model.set_plans(plans, 1e12);
  CHECK(model.index(0, PlanTableModel::layout).data().toString() == "dp8 · tp2 · pp1");
}

namespace {

/// `n` plans in rank order, each with less GPU memory than the one before:
/// the least-memory plan is the last, far beyond the first fetch.
std::vector<Candidate> many_plans(int n) {
  std::vector<Candidate> plans;
  for (int i = 0; i < n; ++i)
    plans.push_back(test::candidate(16, 1, 1, i % 4, false, 40.0 - 0.05 * i, 50000.0 - 10.0 * i));
  return plans;
}

}  // namespace

TEST_CASE("every plan is kept, and a view fetches them 200 at a time", "[gui][models][lazy]") {
  PlanTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  tester.setUseFetchMore(false);  // fetched below, where the tester checks each insertion (see test_planner_document)
  model.set_plans(many_plans(450), 1e12);
  CHECK(model.total() == 450);
  CHECK(model.matching() == 450);
  CHECK(model.rowCount() == PlanTableModel::kFetchRows);
  REQUIRE(model.canFetchMore({}));
  model.fetchMore({});
  CHECK(model.rowCount() == 400);
  model.fetchMore({});
  CHECK(model.rowCount() == 450);
  CHECK_FALSE(model.canFetchMore({}));
  // A row's "#" is its rank in the search, whatever the table's order.
  CHECK(model.index(449, PlanTableModel::rank).data().toInt() == 450);
}

TEST_CASE("sorting and filtering cover every plan, not only the rows fetched", "[gui][models][lazy]") {
  PlanTableModel model;
  model.set_plans(many_plans(450), 1e12);
  // The least memory is rank 450, never fetched yet: sorted, it is row 0.
  model.sort(PlanTableModel::gpu_memory, Qt::AscendingOrder);
  CHECK(model.rowCount() == PlanTableModel::kFetchRows);
  CHECK(model.index(0, PlanTableModel::rank).data().toInt() == 450);
  CHECK(model.index(1, PlanTableModel::rank).data().toInt() == 449);
  model.sort(PlanTableModel::rank, Qt::AscendingOrder);
  CHECK(model.index(0, PlanTableModel::rank).data().toInt() == 1);
  // ZeRO-3 is every fourth plan: 112 of 450 (ranks 4, 8, …, 448), counted over all.
  model.set_zero_stage(3);
  CHECK(model.matching() == 112);
  CHECK(model.rowCount() == 112);
  CHECK(model.index(111, PlanTableModel::rank).data().toInt() == 448);
  // Filter and sort together: the last ZeRO-3 plan has the least memory.
  model.sort(PlanTableModel::gpu_memory, Qt::AscendingOrder);
  CHECK(model.index(0, PlanTableModel::rank).data().toInt() == 448);
  model.set_zero_stage(std::nullopt);
  CHECK(model.matching() == 450);
}

TEST_CASE("a plan's row: found beyond the fetched rows, then fetched", "[gui][models][lazy]") {
  PlanTableModel model;
  model.set_plans(many_plans(450), 1e12);
  CHECK(model.row_of(300) == 300);
  CHECK(model.candidate(300) == nullptr);  // not fetched yet
  model.fetch_to(300);
  CHECK(model.rowCount() == 400);
  REQUIRE(model.candidate(300) != nullptr);
  CHECK(model.plan_index(300) == 300);
  model.set_zero_stage(3);
  CHECK(model.row_of(300) == -1);  // rank 301 is ZeRO-0: filtered out
  CHECK(model.row_of(299) == 74);  // rank 300 is the 75th ZeRO-3 plan
}

TEST_CASE("under the cost objective the days column shows the cost each plan ranks by", "[gui][models]") {
  // The cost objective had ranked by a cost the table did not show.
  auto plans = four_plans();
  plans[0].objective = 11450;  // GPU-hours (ztune search's column for gpt2-1.5b on dgx2x16)
  PlanTableModel model;
  model.set_plans(plans, 1e12, Objective::cost, 0);
  CHECK(model.headerData(PlanTableModel::days, Qt::Horizontal).toString() == "GPU-hours");
  CHECK(model.index(0, PlanTableModel::days).data().toString() == "11.4 k");
  CHECK(model.index(0, PlanTableModel::days).data(PlanTableModel::SortRole).toDouble() == 11450);
  model.set_plans(plans, 1e12, Objective::cost, 2.5);
  CHECK(model.headerData(PlanTableModel::days, Qt::Horizontal).toString() == "Cost");
  CHECK(model.index(0, PlanTableModel::days).data().toString() == "11450");
  model.set_plans(plans, 1e12);
  CHECK(model.headerData(PlanTableModel::days, Qt::Horizontal).toString() == "Days");
}

TEST_CASE("the plans count says what is shown of what fits", "[gui][models]") {
  CHECK(plan_count_text(1055, 1055, 1055) == "all 1,055 plans that fit");
  CHECK(plan_count_text(312, 1055, 1055) == "312 of 1,055 plans that fit");
  // A search reopened from history keeps its best plans only.
  CHECK(plan_count_text(50, 50, 1055) == "the best 50 of 1,055 plans that fit");
  CHECK(plan_count_text(7, 50, 1055) == "7 of the best 50 of 1,055 plans that fit");
  CHECK(plan_count_text(1, 1, 1) == "the only plan that fits");
  // A cancelled search counted the plans it reached, not all that fit.
  CHECK(plan_count_text(208, 208, 208, true) == "208 plans that fit, found before the search was cancelled");
  CHECK(plan_count_text(50, 50, 208, true) ==
        "the best 50 of 208 plans that fit, found before the search was cancelled");
}

TEST_CASE("the precision column names 16-bit optimizer states beside the training precision",
          "[gui][models][optimizer]") {
  Plan p;
  p.precision = Precision::bf16;
  CHECK(precision_label(p) == "bf16");
  p.master_dtype = Precision::bf16;
  p.moments_dtype = Precision::bf16;
  CHECK(precision_label(p) == "bf16, Adam bf16/bf16");
  p.master_dtype = Precision::fp32;
  p.param_remainders = true;
  CHECK(precision_label(p) == "bf16, Adam fp32 rem./bf16");
}

TEST_CASE("Megatron's block recomputation reads full:blockN and sorts between selective and full",
          "[gui][models][recompute]") {
  PlanTableModel model;
  auto plans = four_plans();
  plans[0].plan.recompute = Recompute::selective;
  plans[1].plan.recompute = Recompute::full;
  plans[1].plan.recompute_num_layers = 1;
  plans[2].plan.recompute = Recompute::full;
  plans[2].plan.recompute_num_layers = 6;
  plans[3].plan.recompute = Recompute::full;
  model.set_plans(plans, 1e12);
  CHECK(model.index(1, PlanTableModel::recompute).data().toString() == "full:block1");
  CHECK(model.index(3, PlanTableModel::recompute).data().toString() == "full");
  auto key = [&](int row) { return model.index(row, PlanTableModel::recompute).data(PlanTableModel::SortRole).toInt(); };
  CHECK(key(0) < key(1));
  CHECK(key(1) < key(2));
  CHECK(key(2) < key(3));
}
