#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ztune/vocab/input_error.hpp"
#include "ztune/tuner/stored_search_options.hpp"

using namespace ztune;
using Catch::Matchers::Contains;

// The oracle is the rows the two programs stored before they shared one
// writer: cmd_search.cpp's options_json and planner_worker.cpp's (at
// 1d601a6), written out here as they came out of the database.

TEST_CASE("stored search options: a row of ztune search from before the shared writer reads back", "[tuner][db]") {
  const auto row = nlohmann::json::parse(R"({"cluster": "dgx2x16", "model": "100b", "nodes": 0, "seq": 0,
    "gpus": 0, "min_gpus": 0, "max_gpus": 0, "allow_tp_across_nodes": false, "engine": "deepspeed",
    "compile": false, "global_batch": 0, "precision": "", "max_micro_batch": 0, "tp": 16, "pp": 0, "zero": 1,
    "onebit_adam": false, "zeropp": false, "freeze_step": -1, "sparse_attention": "none", "sparse_block": 64,
    "attention": "any", "objective": "cost", "tokens": 3e11, "gpu_hour_price": 2.5, "top": 5, "simulate_top": 3,
    "memory_headroom_pct": 10, "threads": 2, "max_plans": 100000000, "passes_off": ["simulate"],
    "profile": "", "accounting": "paper", "cp": 2,
    "accuracy": {"band": {"tokens_per_s": [1, 2]}}})");
  const StoredSearchOptions s = search_options_from_json(row, "results database, search 7");
  CHECK(s.request.source == "ztune search");  // not stored then: the command line's
  CHECK(s.request.cluster == "dgx2x16");
  CHECK(s.request.model == "100b");
  const SearchOptions& o = s.options;
  CHECK(o.space.engine == Engine::deepspeed);
  CHECK(o.memory.accounting == StateAccounting::paper);  // --accounting paper over the engine's
  CHECK_FALSE(o.space.precision.has_value());             // "" was an unpinned precision
  CHECK(o.space.tp == 16);
  CHECK_FALSE(o.space.pp.has_value());
  CHECK(o.space.zero_stage == 1);
  CHECK(o.space.cp == 2);
  CHECK_FALSE(o.space.attention.has_value());
  CHECK(o.objective == Objective::cost);
  CHECK(o.tokens == 3e11);
  CHECK(o.gpu_hour_price == 2.5);
  CHECK(o.top == 5);
  CHECK(o.memory.gpu_headroom == Approx(0.10));
  CHECK(o.prune_enabled);
  CHECK_FALSE(o.simulate_enabled);
}

TEST_CASE("stored search options: a planner row without the later keys takes their defaults", "[tuner][db]") {
  const auto row = nlohmann::json::parse(R"({"source": "ztune-planner", "cluster": "selene", "model": "gpt3-175b",
    "gpus": 64, "global_batch": 512, "seq": 2048, "engine": "megatron", "attention": "flash", "precision": "bf16",
    "objective": "throughput", "tokens": 0, "gpu_hour_price": 0, "top": 50, "simulate_top": 3})");
  const StoredSearchOptions s = search_options_from_json(row, "db");
  CHECK(s.request.source == "ztune-planner");
  CHECK_FALSE(s.request.compile);
  const SearchOptions& o = s.options;
  CHECK(o.space.gpus == 64);
  CHECK(o.space.global_batch == 512);
  CHECK(o.space.engine == Engine::megatron);
  CHECK(o.memory.accounting == StateAccounting::megatron);  // the engine's, as the planner searched it
  CHECK(o.space.attention == AttentionKernel::flash);
  CHECK(o.space.precision == Precision::bf16);
  CHECK(o.space.master_dtype == Precision::fp32);
  CHECK(o.space.fp8 == Fp8Recipe::none);
  CHECK_FALSE(o.space.zero_stage.has_value());
  CHECK(o.memory.gpu_headroom == 0);
  // A row stored with no options at all: every default, the engine ztune's.
  CHECK(search_options_from_json(nlohmann::json(), "db").options.space.engine == Engine::ztune);
}

TEST_CASE("stored search options: a damaged row names the search and the key", "[tuner][db]") {
  auto refused = [](const char* text) {
    try {
      (void)search_options_from_json(nlohmann::json::parse(text), "results database, search 3");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refused(R"({"tp": "16"})"), Contains("search 3") && Contains("tp") && Contains("integer"));
  CHECK_THAT(refused(R"({"engine": "horovod"})"), Contains("engine") && Contains("deepspeed"));
  CHECK_THAT(refused(R"({"zero": 4})"), Contains("zero"));
  CHECK_THAT(refused(R"({"memory_headroom_pct": 80})"), Contains("memory_headroom_pct"));
  CHECK_THAT(refused(R"({"passes_off": ["prune", "bake"]})"), Contains("passes_off") && Contains("bake"));
  CHECK_THAT(refused(R"({"precision": "fp64"})"), Contains("precision"));
  CHECK_THAT(refused(R"([1, 2])"), Contains("search 3") && Contains("object"));
  // A key no version of either program stored: misspelt, it would have read as its default.
  CHECK_THAT(refused(R"({"gpu_hour_prise": 2.5})"), Contains("gpu_hour_prise"));
}

TEST_CASE("stored search options: what the writer stores, and both programs' rows read back alike", "[tuner][db]") {
  SearchOptions o;
  o.space.engine = Engine::fsdp;
  o.memory.accounting = state_accounting_of(Engine::fsdp);
  o.space.tp = 8;
  o.space.dp_shard = 4;
  o.space.precision = Precision::bf16;
  o.space.fp8 = Fp8Recipe::tensorwise;
  o.space.grad_reduce_dtype = Precision::fp32;
  o.objective = Objective::time;
  o.memory.gpu_headroom = 0.05;
  o.rank_enabled = false;
  const SearchRequest q{"ztune search", "h100x64", "llama3-70b", 4, 8192, true, "my.json"};
  const nlohmann::json j = search_options_to_json(q, o);
  // The conventions the stored rows have always used: pins unset as 0 or -1, "any" for no pin.
  CHECK(j.at("tp") == 8);
  CHECK(j.at("pp") == 0);
  CHECK(j.at("zero") == -1);
  CHECK(j.at("dp_shard") == 4);
  CHECK(j.at("precision") == "bf16");
  CHECK(j.at("attention") == "any");
  CHECK(j.at("engine") == "fsdp");
  CHECK(j.at("compile") == true);
  CHECK(j.at("memory_headroom_pct") == Approx(5.0));
  CHECK(j.at("passes_off") == nlohmann::json::array({"rank"}));
  CHECK(j.at("grad_reduce_dtype") == "fp32");

  const StoredSearchOptions back = search_options_from_json(j, "db");
  CHECK(back.request.cluster == "h100x64");
  CHECK(back.request.nodes == 4);
  CHECK(back.request.seq == 8192);
  CHECK(back.request.profile == "my.json");
  CHECK(back.options.space.tp == 8);
  CHECK(back.options.space.dp_shard == 4);
  CHECK(back.options.space.fp8 == Fp8Recipe::tensorwise);
  CHECK(back.options.space.grad_reduce_dtype == Precision::fp32);
  CHECK(back.options.objective == Objective::time);
  CHECK_FALSE(back.options.rank_enabled);
  CHECK(back.options.memory.gpu_headroom == Approx(0.05));
}

TEST_CASE("stored search options: the recomputation and sequence-parallel pins read back, absent is none", "[tuner][db]") {
  SearchRequest q;
  q.cluster = "dgx2x16";
  q.model = "100b";
  SearchOptions o;
  o.space.recompute = Recompute::full;
  const nlohmann::json j = search_options_to_json(q, o);
  CHECK(j.at("recompute") == "full");
  CHECK(search_options_from_json(j, "db").options.space.recompute == Recompute::full);
  o.space.recompute.reset();
  CHECK(search_options_to_json(q, o).at("recompute") == "any");
  CHECK_FALSE(search_options_from_json(search_options_to_json(q, o), "db").options.space.recompute.has_value());
  CHECK_FALSE(search_options_from_json(nlohmann::json::parse(R"({"zero": 1})"), "db").options.space.recompute);
  // --no-sequence-parallel and --no-tp-comm-overlap likewise; absent: both allowed.
  o.space.sequence_parallel = false;
  o.space.tp_comm_overlap = false;
  const SearchOptions back = search_options_from_json(search_options_to_json(q, o), "db").options;
  CHECK_FALSE(back.space.sequence_parallel);
  CHECK_FALSE(back.space.tp_comm_overlap);
  const SearchOptions old_row = search_options_from_json(nlohmann::json::parse(R"({"zero": 1})"), "db").options;
  CHECK(old_row.space.sequence_parallel);
  CHECK(old_row.space.tp_comm_overlap);
  try {
    (void)search_options_from_json(nlohmann::json::parse(R"({"recompute": "most"})"), "results database, search 4");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Contains("search 4") && Contains("recompute") && Contains("selective"));
  }
}
