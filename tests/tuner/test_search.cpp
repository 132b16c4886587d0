#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tuner_fixtures.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/tuner/explain.hpp"
#include "ztune/tuner/search.hpp"
#include "ztune/tuner/search_space.hpp"
#include "ztune/vocab/executor_support.hpp"
#include "ztune/vocab/input_error.hpp"

using namespace ztune;

namespace {

/// The hint that names `change` among `hints`, if any.
std::optional<FitHint> hint_named(const std::vector<FitHint>& hints, const std::string& change) {
  for (const auto& h : hints)
    if (h.change == change) return h;
  return std::nullopt;
}

SearchResult search_all(const Transformer& m, const Cluster& c, SearchOptions o = {}) {
  o.top = 100000;  // keep every feasible plan
  o.simulate_top = 0;
  return run_search(m, c, with_engine(default_profile_for(c), to_string(o.space.engine)), o);
}

}  // namespace

TEST_CASE("a 13B model on one V100-32GB fits only with optimizer offload", "[tuner][search]") {
  // Closed form: mixed-precision Adam keeps 16 bytes per parameter (ZeRO paper,
  // 2+2+12); 12Ψ of optimizer state alone is ~154 GB for Ψ ≈ 12.8e9, so no plan
  // that keeps it on a 32 GB GPU can fit. ZeRO-Offload (Ren et al. 2021) trains
  // this size on one V100 by moving it to the host: the search must find that.
  // DeepSpeed's engine (ztune's executor stores fp32 parameters: 4Ψ, 52 GB,
  // would need them offloaded too).
  const Transformer m = test::gpt_13b();
  const Cluster c = test::one_v100();
  REQUIRE(12 * m.total_params() > c.node.gpu.memory_bytes());
  SearchOptions o;
  o.space.engine = Engine::deepspeed;
  const auto r = search_all(m, c, o);
  REQUIRE(r.feasible > 0);
  REQUIRE(static_cast<std::int64_t>(r.plans.size()) == r.feasible);
  for (const auto& p : r.plans) CHECK(p.plan.offload_optimizer != OffloadTarget::none);
}

TEST_CASE("a 1.5B model on one V100-32GB fits without offload", "[tuner][search]") {
  // 16Ψ = 24.9 GB of model states for Ψ = 1.558e9 (gpt2-1.5b), under 32 GB.
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = test::one_v100();
  const auto r = search_all(m, c);
  REQUIRE(r.feasible > 0);
  bool without = false;
  for (const auto& p : r.plans)
    without |= p.plan.offload_optimizer == OffloadTarget::none && p.plan.offload_params == OffloadTarget::none;
  CHECK(without);
}

TEST_CASE("found plans respect tp within a node and the engine's rules", "[tuner][search]") {
  const Cluster c = load_cluster("dgx-a100-80gbx16");
  const Transformer m = load_transformer("gpt3-175b");
  SearchOptions o;
  o.space.engine = Engine::deepspeed;
  const auto r = search_all(m, c, o);
  REQUIRE(r.feasible > 0);
  for (const auto& p : r.plans) {
    CHECK(p.plan.tp <= c.node.gpus);
    CHECK_FALSE(engine_violation(p.plan, Engine::deepspeed).has_value());
    if (p.plan.pp > 1) CHECK(p.plan.schedule == Schedule::one_f_one_b);
  }
  CHECK(r.pruned[PruneReason::tp_across_nodes] > 0);
  CHECK(r.pruned[engine_reason(EngineRule::ds_pipeline_schedule)] > 0);

  // BigBird can be searched for ztune's engine, but DeepSpeed's ds_config
  // cannot make it causal, so the DeepSpeed space drops it whole while the
  // fixed layout stays (export refuses the same plans).
  o.space.sparse_attention = SparseLayout::bigbird;
  const auto bigbird = search_all(m, c, o);
  CHECK(bigbird.pruned[engine_reason(EngineRule::ds_sparse_causal)] > 0);
  for (const auto& p : bigbird.plans) CHECK(p.plan.sparse_attention == SparseLayout::none);
  o.space.sparse_attention = SparseLayout::fixed;
  CHECK(search_all(m, c, o).pruned[engine_reason(EngineRule::ds_sparse_causal)] == 0);
}

TEST_CASE("the counts add up: every plan of the space is pruned once or fits", "[tuner][search]") {
  const auto r = search_all(load_transformer("100b"), load_cluster("dgx2x16"));
  CHECK(r.pruned.total() + r.feasible == r.space);
  const auto* rules = r.pass("rules");
  const auto* prune = r.pass("prune");
  const auto* rank = r.pass("rank");
  REQUIRE((rules && prune && rank));
  CHECK(rules->in == r.evaluated);
  CHECK(prune->in == rules->out);
  CHECK(rank->in == prune->out);
  CHECK(prune->out == r.feasible);
  for (std::size_t i = 1; i < r.plans.size(); ++i) CHECK(r.plans[i - 1].objective >= r.plans[i].objective);
}

TEST_CASE("passes on and off: the prune pass only removes plans that do not fit", "[tuner][search]") {
  const Transformer m = load_transformer("100b");
  const Cluster c = load_cluster("dgx2x16");
  SearchOptions on;
  on.top = 5;
  SearchOptions off = on;
  off.prune_enabled = false;
  off.top = 100000;
  const auto a = run_search(m, c, default_profile_for(c), on);
  const auto b = run_search(m, c, default_profile_for(c), off);
  // Without the prune every valid plan is ranked, fitting or not ...
  CHECK(b.pass("rank")->in == a.pass("prune")->in);
  CHECK(b.feasible == a.feasible);
  CHECK_FALSE(b.pass("prune")->enabled);
  // ... and the fitting ones, in order, are the pruned search's ranking.
  std::vector<std::uint64_t> fitting;
  for (const auto& p : b.plans)
    if (p.prediction.memory.fits()) fitting.push_back(p.id);
  REQUIRE(fitting.size() >= a.plans.size());
  for (std::size_t i = 0; i < a.plans.size(); ++i) CHECK(fitting[i] == a.plans[i].id);
  bool some_unfit = false;
  for (const auto& p : b.plans) some_unfit |= !p.prediction.memory.fits();
  CHECK(some_unfit);
}

TEST_CASE("passes on and off: without the rank pass plans come in enumeration order, untimed", "[tuner][search]") {
  const Transformer m = load_transformer("100b");
  const Cluster c = load_cluster("dgx2x16");
  SearchOptions o;
  o.rank_enabled = false;
  o.top = 20;
  const auto r = run_search(m, c, default_profile_for(c), o);
  const auto ranked = run_search(m, c, default_profile_for(c), {});
  CHECK(r.feasible == ranked.feasible);
  REQUIRE(r.plans.size() == 20);
  for (std::size_t i = 0; i < r.plans.size(); ++i) {
    CHECK_FALSE(r.plans[i].timed);
    CHECK(r.plans[i].prediction.memory.fits());
    if (i > 0) CHECK(r.plans[i - 1].id < r.plans[i].id);
  }
  CHECK(r.pass("rank")->seconds == 0);
}

TEST_CASE("the simulate pass re-times the top K and re-ranks them on simulated time", "[tuner][search]") {
  const Transformer m = load_transformer("100b");
  const Cluster c = load_cluster("dgx2x16");
  SearchOptions o;
  o.simulate_top = 3;
  const auto r = run_search(m, c, default_profile_for(c), o);
  const auto* sim = r.pass("simulate");
  REQUIRE(sim != nullptr);
  CHECK(sim->in == 3);
  CHECK(sim->out == 3);
  REQUIRE(r.plans.size() == 10);
  for (std::size_t i = 0; i < r.plans.size(); ++i) {
    const auto& p = r.plans[i];
    CHECK(p.simulated.has_value() == (i < 3));
    if (!p.simulated) continue;
    CHECK(p.simulated->iteration_s > 0);
    // The objective of a simulated plan is its simulated throughput.
    CHECK(p.objective == Approx(p.simulated->tokens_per_s));
    if (i > 0) CHECK(r.plans[i - 1].objective >= p.objective);
  }
  o.simulate_enabled = false;
  const auto off = run_search(m, c, default_profile_for(c), o);
  CHECK_FALSE(off.pass("simulate")->enabled);
  for (const auto& p : off.plans) CHECK_FALSE(p.simulated.has_value());
}

TEST_CASE("the result does not depend on the number of threads", "[tuner][search]") {
  const Transformer m = load_transformer("gpt3-175b");
  Cluster c = load_cluster("dgx-a100-80gb");
  c.nodes = 32;
  SearchOptions one;
  one.threads = 1;
  one.top = 50;
  SearchOptions four = one;
  four.threads = 4;
  const auto a = run_search(m, c, default_profile_for(c), one);
  const auto b = run_search(m, c, default_profile_for(c), four);
  CHECK(a.threads == 1);
  CHECK(b.threads == 4);
  CHECK(a.feasible == b.feasible);
  CHECK(a.pruned.n == b.pruned.n);
  REQUIRE(a.plans.size() == b.plans.size());
  for (std::size_t i = 0; i < a.plans.size(); ++i) CHECK(a.plans[i].id == b.plans[i].id);
}

TEST_CASE("a stop request ends the search early and says so", "[tuner][search]") {
  const Transformer m = load_transformer("100b");
  const Cluster c = load_cluster("dgx2x16");
  std::atomic<bool> stop{true};
  SearchOptions o;
  o.stop = &stop;
  const auto r = run_search(m, c, default_profile_for(c), o);
  CHECK(r.interrupted);
  // Stopped before the first device count was laid out: nothing counted, ranked or kept.
  CHECK(r.space == 0);
  CHECK(r.evaluated == 0);
  CHECK(r.plans.empty());
  CHECK(SearchSpace(m, c, o.space).size() > 0);
}

TEST_CASE("objectives: time and cost rank by days and GPU-hours", "[tuner][search]") {
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx2");
  SearchOptions o;
  o.space.min_gpus = 4;
  o.space.max_gpus = 16;
  o.objective = Objective::cost;
  o.tokens = 1e9;
  const auto cost = run_search(m, c, default_profile_for(c), o);
  REQUIRE(!cost.plans.empty());
  for (std::size_t i = 1; i < cost.plans.size(); ++i) CHECK(cost.plans[i - 1].objective <= cost.plans[i].objective);
  // Cost in GPU-hours = tokens / (tokens/s) / 3600 × GPUs.
  const auto& best = cost.plans.front();
  CHECK(best.objective == Approx(1e9 / best.prediction.time.tokens_per_s / 3600 * best.plan.gpus()));
  o.objective = Objective::time;
  const auto time = run_search(m, c, default_profile_for(c), o);
  CHECK(time.plans.front().objective == Approx(1e9 / time.plans.front().prediction.time.tokens_per_s / 86400));
}

TEST_CASE("when nothing fits the hints name more GPUs with numbers", "[tuner][search]") {
  // 1T parameters need ~16 TB of model states (ZeRO paper, 16 bytes each): more
  // than the workstation's GPU, host memory and 5.76 TB of NVMe together.
  // DeepSpeed's engine, the ZeRO paper's (16-bit parameters on the GPU).
  const Transformer m = load_transformer("1t");
  const Cluster c = test::one_v100();
  SearchOptions o;
  o.space.engine = Engine::deepspeed;
  const auto hw = with_engine(default_profile_for(c), "deepspeed");
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.feasible == 0);
  REQUIRE(!r.closest.empty());
  CHECK(r.closest.front().memory_pressure() > 1);
  const auto hints = explain_infeasible(m, c, hw, o, r);
  bool more_gpus = false;
  for (const auto& h : hints)
    if (h.change == "more GPUs") {
      more_gpus = true;
      CHECK(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::Contains("plans fit") && Catch::Matchers::Contains(" GiB of "));
    }
  CHECK(more_gpus);
}

TEST_CASE("the more-GPUs hint probes device counts that have a layout", "[tuner][search][explain]") {
  // The 1T on 4-GPU V100 workstations (ztune's engine): the probe had used
  // every device of 1.5^k-node clusters, none of which splits into dp × tp ×
  // pp with dp dividing the batch of 3,072, and said nothing fits on 1,000,000
  // nodes. The oracle: a search of 1,024 nodes (4,096 devices) finds a plan.
  const Transformer m = load_transformer("1t");
  Cluster c = load_cluster("v100-workstation");
  const auto hw = default_profile_for(c);
  SearchOptions o;
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.feasible == 0);
  Cluster big = c;
  big.nodes = 1024;
  REQUIRE(run_search(m, big, hw, o).feasible > 0);
  const auto h = hint_named(explain_infeasible(m, c, hw, o, r), "more GPUs");
  REQUIRE(h);
  INFO(h->detail);
  CHECK(h->fits);
  CHECK_THAT(h->detail, Catch::Matchers::StartsWith("with --nodes 10"));  // 1,0xx nodes, not 1,000,000
}

TEST_CASE("a prime global batch with a pin: the hints end at once at the largest count with a layout",
          "[tuner][search][explain]") {
  // The pinned counts' probe had stepped dp through every integer up to the
  // batch (2^36 of them here). The oracle: dp divides the batch, so dp is 1
  // or the batch itself, and tp 2 × pp ≤ 96 layers caps the devices at 192.
  const Transformer m = load_transformer("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-40gb");
  const auto hw = default_profile_for(c);
  SearchOptions o;
  o.space.global_batch = 68719476767;  // prime
  o.space.tp = 2;
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.feasible == 0);
  // The old loop over 2^36 integers ran past CTest's timeout here.
  const auto h = hint_named(explain_infeasible(m, c, hw, o, r), "more GPUs");
  REQUIRE(h);
  CHECK_FALSE(h->fits);
  CHECK_THAT(h->detail, Catch::Matchers::StartsWith("nothing fits even on 192 devices on 24 nodes, the largest count "
                                                    "with a layout"));
}

TEST_CASE("from 8k tokens the context-parallel hint tries twice the searched degree", "[tuner][search][explain]") {
  // Llama 3.1 405B at 1,048,576 tokens on Selene: nothing fits with cp up to
  // 8 (the default from 8k tokens), and no hint named --max-cp where cp 16
  // fits on the same 3,072 GPUs. The oracle: the search with max_cp 16.
  // The megatron engine's (ztune's executor runs cp on its CPU backend only).
  const Transformer m = load_transformer("llama-405b", 1048576);
  const Cluster c = load_cluster("selene-3072");
  const auto hw = with_engine(default_profile_for(c), "megatron");
  SearchOptions o;
  o.space.engine = Engine::megatron;
  o.simulate_enabled = false;
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.feasible == 0);
  SearchOptions wider = o;
  wider.space.max_cp = 16;
  const auto oracle = run_search(m, c, hw, wider);
  REQUIRE(oracle.feasible > 0);
  const auto h = hint_named(explain_infeasible(m, c, hw, o, r), "--max-cp 16");
  REQUIRE(h);
  CHECK(h->fits);
  CHECK_THAT(h->detail, Catch::Matchers::StartsWith(grouped(static_cast<double>(oracle.feasible)) + " plan"));
}

TEST_CASE("with --gpus the more-GPUs hint names the smallest doubling inside the cluster that fits",
          "[tuner][search]") {
  // Llama 2 70B on 4 of dgx-h100x4's 32 GPUs fits nothing; the hint had named
  // the whole cluster (32 devices) where 8 fit. Oracle: a search on 8 GPUs
  // fits, one on 4 does not.
  const Transformer m = load_transformer("llama-70b");
  const Cluster c = load_cluster("dgx-h100x4");
  const auto hw = default_profile_for(c);
  SearchOptions o;
  o.space.gpus = 4;
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.feasible == 0);
  SearchOptions eight = o;
  eight.space.gpus = 8;
  REQUIRE(run_search(m, c, hw, eight).feasible > 0);
  bool more = false;
  for (const auto& h : explain_infeasible(m, c, hw, o, r))
    if (h.change == "more GPUs") {
      more = true;
      CHECK(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::StartsWith("with --gpus 8 (of the cluster's 32)"));
    }
  CHECK(more);
}

TEST_CASE("pinned tp and pp: the GPU-count hints find the counts their layouts need", "[tuner][search]") {
  // Llama 2 70B (80 layers, global batch 1024) with tp 8 × pp 5 = 40 on 32
  // DGX H100 (256 GPUs): 40 never divides 256 · 2^k, so doubling the nodes
  // finds nothing. A layout needs 40 · dp GPUs with dp dividing 1024: the
  // largest below 256 is 160 (dp 4), the smallest above is 320 (dp 8, 40
  // nodes, which the node counts tried one at a time reach); the searches at
  // those counts fit.
  const Transformer m = load_transformer("llama-70b");
  const Cluster c = load_cluster("dgx-h100x32");
  SearchOptions o;
  o.space.engine = Engine::megatron;
  o.space.tp = 8;
  o.space.pp = 5;
  const auto hw = default_profile_for(c);
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.evaluated == 0);
  bool fewer = false, more = false;
  for (const auto& h : explain_infeasible(m, c, hw, o, r)) {
    if (h.change == "fewer GPUs") {
      fewer = true;
      CHECK(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::StartsWith("with --gpus 160 (of the cluster's 256)"));
    }
    if (h.change == "more GPUs") {
      more = true;
      CHECK(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::StartsWith("with --nodes 40 (320 devices)"));
    }
  }
  CHECK(fewer);
  CHECK(more);
  Cluster bigger = c;
  bigger.nodes = 40;
  o.space.gpus = 320;
  CHECK(run_search(m, bigger, hw, o).feasible > 0);
}

TEST_CASE("when every device's layouts fit nothing, the hints try fewer GPUs too", "[tuner][search]") {
  // A 30B GPT (97 layers, 40 heads of 128) with a 7-sequence batch on one
  // DGX-2 (16 V100-32GB): dp divides 7 and tp divides 40 within the node, so
  // 16 GPUs are only tp8 × pp2 (or tp1/tp2/tp4 over 16/8/4 stages), and none
  // fits; 8 GPUs as tp8 take ZeRO-Offload, which a pipeline rules out. The
  // hint had advised twice the cluster.
  Transformer m = load_transformer("gpt3-175b");
  m.layers = 97;
  m.hidden = 5120;
  m.heads = m.kv_heads = 40;
  m.ffn_hidden = 4 * m.hidden;
  const Cluster c = load_cluster("dgx2");
  SearchOptions o;
  o.space.global_batch = 7;
  o.space.max_cp = 1;
  const auto hw = default_profile_for(c);
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.evaluated > 0);
  REQUIRE(r.feasible == 0);
  const auto h = hint_named(explain_infeasible(m, c, hw, o, r), "fewer GPUs");
  REQUIRE(h);
  CHECK(h->fits);
  CHECK_THAT(h->detail, Catch::Matchers::StartsWith("with --gpus 8 (of the cluster's 16)"));
  // The oracle: a search of 8 GPUs fits.
  o.space.gpus = 8;
  CHECK(run_search(m, c, hw, o).feasible > 0);
}

TEST_CASE("when the devices are too many to split, the hints name fewer GPUs that have a plan", "[tuner][search]") {
  // 100B (64 heads, 125 layers, global batch 1024) on 50,000 DGX-2 nodes:
  // 800,000 = 2^8 · 5^5 devices. dp divides 1024 (at most 2^8 of them), tp
  // divides 64 within a node (at most 16), pp at most 125 layers: no layout
  // uses all 800,000, so the search evaluates nothing. The largest count with
  // a layout is 1024 · 8 · 97 = 794,624 (1024 · 16 · 48 = 786,432 is smaller).
  const Transformer m = load_transformer("100b");
  Cluster c = load_cluster("dgx2x16");
  c.nodes = 50000;
  SearchOptions o;
  const auto hw = default_profile_for(c);
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.evaluated == 0);
  const auto hint = fewer_gpus_hint(m, c, hw, o, c.total_devices());
  REQUIRE(hint.has_value());
  CHECK(hint->fits);
  CHECK_THAT(hint->detail, Catch::Matchers::StartsWith("with --gpus 794624 (of the cluster's 800000)") &&
                               Catch::Matchers::Contains("plans fit"));
  bool named = false;
  for (const auto& h : explain_infeasible(m, c, hw, o, r)) named |= h.change == "fewer GPUs" && h.fits;
  CHECK(named);
  // The hint's count does search: plans fit there.
  o.space.gpus = 794624;
  CHECK(run_search(m, c, hw, o).feasible > 0);
}

TEST_CASE("when long sequences do not fit with the standard kernel, the hints name flash attention",
          "[tuner][search][flash]") {
  // Llama 7B at 131,072 tokens on one DGX A100: whatever the recomputation,
  // the standard kernel's backward holds the s×s probabilities of 32/8 heads
  // and their gradient, 2 × 4 × 131072² × 2 bytes = 275 GB, on top of the
  // rest; FlashAttention keeps the scores on chip. (At 65,536 tokens the two
  // take 68.7 GB, and since ztune's executor keeps both in 16 bits one plan,
  // fully recomputed with its optimizer on the host, fits in 77.7 GiB.)
  Transformer m = load_transformer("llama-7b");
  m.seq_len = 131072;
  const Cluster c = load_cluster("dgx-a100-80gb");
  SearchOptions o;
  o.space.global_batch = 8;
  o.space.attention = AttentionKernel::standard;
  const auto hw = default_profile_for(c);
  // Context parallelism (searched from 8k tokens) divides those scores by cp;
  // the space without it is the one this case is about.
  o.space.max_cp = 1;
  o.space.max_ulysses = 1;  // DeepSpeed-Ulysses divides them likewise (searched from 8k tokens)
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.feasible == 0);
  bool flash = false;
  for (const auto& h : explain_infeasible(m, c, hw, o, r))
    if (h.change.find("FlashAttention") != std::string::npos) {
      flash = true;
      CHECK(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::Contains("flash") && Catch::Matchers::Contains(": fits"));
      // In GiB, as every memory table prints it (issue 23: hints said GB).
      CHECK_THAT(h.detail, Catch::Matchers::Contains(" GiB of ") && !Catch::Matchers::Contains(" GB"));
    }
  CHECK(flash);
  // With heads of 160 channels (hidden 5120 / 32) ztune's CUDA flash kernel has
  // no instance, so its engine is not offered flash; Megatron-LM's is.
  Transformer wide = m;
  wide.hidden = 5120;
  wide.ffn_hidden = 13824;
  const auto has_flash_hint = [&](const SearchOptions& so) {
    const auto rr = run_search(wide, c, hw, so);
    REQUIRE(rr.feasible == 0);
    for (const auto& h : explain_infeasible(wide, c, hw, so, rr))
      if (h.change.find("FlashAttention") != std::string::npos) return true;
    return false;
  };
  CHECK_FALSE(has_flash_hint(o));
  SearchOptions mg = o;
  mg.space.engine = Engine::megatron;
  CHECK(has_flash_hint(mg));
  // And flash plans fit: pinned for ztune's engine, by default in Megatron-LM's.
  o.space.attention = AttentionKernel::flash;
  CHECK(run_search(m, c, hw, o).feasible > 0);
  o.space.attention.reset();
  o.space.engine = Engine::megatron;
  CHECK(run_search(m, c, hw, o).feasible > 0);
}

TEST_CASE("1-bit Adam plans rank by their run-averaged step, warm-up included", "[tuner][search]") {
  // gpt2-1.5b: 157.2864e9 tokens / (512 × 1024) = 300,000 steps; the default
  // warm-up is 15% of them, 45,000 steps of plain Adam. A run's mean step is
  // then 0.15 × (plain Adam step) + 0.85 × (compressed step), and throughput
  // is 512 × 1024 tokens over it.
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx2x16-40gbe");
  const HardwareProfile hw = default_profile_for(c);
  SearchOptions o;
  o.space.gpus = 32;
  o.space.engine = Engine::deepspeed;
  o.space.include_onebit_adam = true;
  o.space.precision = Precision::fp16;
  o.space.max_micro_batch = 4;
  o.top = 100000;
  o.simulate_top = 0;
  const auto r = run_search(m, c, hw, o);
  int checked = 0;
  for (const auto& cand : r.plans) {
    if (!cand.plan.onebit_adam || cand.plan.dp < 2 || checked >= 5) continue;
    ++checked;
    CHECK(cand.plan.onebit_freeze_step == 45000);
    Plan adam = cand.plan;
    adam.onebit_adam = false;
    const double warm = predict_time(m, adam, c, hw).iteration_s;
    const double comp = cand.prediction.time.iteration_s;
    CHECK(cand.objective == Approx(512.0 * 1024.0 / (0.15 * warm + 0.85 * comp)).epsilon(1e-9));
  }
  CHECK(checked > 0);
}

// --memory-headroom: with a fraction h of each GPU kept free, the feasible
// plans are exactly those of the unconstrained search whose predicted total is
// within capacity × (1 − h) — checked against the unconstrained result, not
// against the option's own code path.
TEST_CASE("memory headroom keeps exactly the plans below the reduced capacity", "[tuner][search]") {
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = test::one_v100();
  const auto all = search_all(m, c);
  REQUIRE(all.feasible > 10);
  for (double h : {0.05, 0.2}) {
    SearchOptions o;
    o.memory.gpu_headroom = h;
    const auto kept = search_all(m, c, o);
    std::int64_t expected = 0;
    const HardwareProfile hw = with_engine(default_profile_for(c), to_string(o.space.engine));
    for (const auto& p : all.plans) {
      // A plan the search gave Megatron's block method (the fewest layers
      // recomputed that fit the capacity) was enumerated recomputing every layer.
      Plan enumerated = p.plan;
      enumerated.recompute_num_layers = 0;
      const double bytes = p.plan.recompute_num_layers == 0
                               ? p.prediction.memory.gpu_total_bytes
                               : predict_memory(m, enumerated, c, hw).gpu_total_bytes;
      expected += bytes <= c.node.gpu.memory_bytes() * (1 - h);
    }
    INFO("headroom " << h);
    CHECK(kept.feasible == expected);
    CHECK(kept.feasible < all.feasible);
    for (const auto& p : kept.plans) {
      CHECK(p.prediction.memory.gpu_usable_bytes == Approx(c.node.gpu.memory_bytes() * (1 - h)));
      CHECK(p.prediction.memory.gpu_total_bytes <= p.prediction.memory.gpu_usable_bytes);
    }
  }
}

// One plan that does not fit (`ztune predict`): ZeRO-Offload's headline (Ren
// et al. 2021) is that a 13B model trains on one V100-32GB, with activation
// checkpointing, once the optimizer states move to the host; the hints for
// the plan without offload must say so, with the changed plan's throughput,
// and every change that fits must move the optimizer states (12Ψ of them is
// ~154 GB).
TEST_CASE("hints for one plan: a 13B model on one V100 fits only once the optimizer states are offloaded",
          "[tuner][explain]") {
  // ZeRO-Offload's claim, so DeepSpeed's engine (as the search test above).
  const Transformer m = test::gpt_13b();
  const Cluster c = test::one_v100();
  const auto hw = with_engine(default_profile_for(c), "deepspeed");
  SearchOptions o;
  o.space.engine = Engine::deepspeed;
  Plan p;
  p.micro_batch = 1;
  p.grad_accum = 8;
  p.global_batch = 8;
  p.recompute = Recompute::full;
  p.precision = Precision::fp16;
  REQUIRE_FALSE(check_plan(p, m, c).has_value());
  REQUIRE_FALSE(predict_memory(m, p, c, hw).fits());
  const auto hints = plan_fit_hints(m, c, hw, o, p);
  bool offload = false;
  for (const auto& h : hints) {
    INFO(h.change << ": " << h.detail);
    if (h.change.find("optimizer offload to CPU") == 0) {
      offload = true;
      CHECK(h.fits);
      Plan q = p;
      q.zero_stage = 2;  // ZeRO-Offload's stage: its gradients stream to the host
      q.offload_optimizer = OffloadTarget::cpu;
      CHECK(h.tokens_per_s == Approx(predict_time(m, q, c, hw).tokens_per_s));
    }
    if (h.fits) CHECK_THAT(h.detail, Catch::Matchers::Contains("opt→cpu"));
    else CHECK(h.tokens_per_s == 0);
    // A single-GPU plan: no ZeRO stage or parallelism change applies.
    CHECK(h.change.find("ZeRO stage") == std::string::npos);
    CHECK(h.change.find("tp ") != 0);
  }
  CHECK(offload);
}

// A plan with stated uneven stages (issue 19): the "twice the pipeline" hint
// re-balances the doubled stage count instead of keeping a partition that no
// longer has one entry per stage (which check_plan would refuse: no hint).
TEST_CASE("hints for a plan with stated stages: twice the pipeline is balanced", "[tuner][explain][stages]") {
  const Transformer m = load_transformer("gpt3-175b");  // 96 layers
  Cluster c = load_cluster("dgx-a100-80gb");
  c.nodes = 4;  // 32 GPUs
  const auto hw = default_profile_for(c);
  Plan p;
  p.tp = 8;
  p.pp = 2;
  p.dp = 2;
  p.micro_batch = 1;
  p.grad_accum = 8;
  p.global_batch = 16;
  p.stage_layers = {50, 46};
  REQUIRE_FALSE(check_plan(p, m, c).has_value());
  bool pp4 = false;
  for (const auto& h : plan_fit_hints(m, c, hw, SearchOptions{}, p)) {
    INFO(h.change << ": " << h.detail);
    if (h.change == "pp 4") {
      pp4 = true;
      CHECK_THAT(h.detail, Catch::Matchers::Contains("dp1×tp8×pp4") && !Catch::Matchers::Contains("stages:"));
    }
  }
  CHECK(pp4);
}

// Context parallelism (issue 19) as a fit hint: the same GPUs with half the
// data parallelism and twice the cp keep half of each sequence's activations.
TEST_CASE("a long-sequence plan that does not fit is offered cp 2 on the same GPUs", "[tuner][explain][cp]") {
  // FSDP with torchtitan's context parallelism (16-bit activations; ztune's
  // executor stores fp32 ones, which cp 2 does not bring under 80 GB).
  Transformer m = load_transformer("llama-7b");
  m.seq_len = 16384;
  const Cluster c = load_cluster("dgx-a100-80gb");
  const auto hw = with_engine(default_profile_for(c), "fsdp");
  Plan p;
  p.dp = 8;
  p.zero_stage = 3;
  p.micro_batch = 1;
  p.grad_accum = 1;
  p.global_batch = 8;
  p.attention = AttentionKernel::flash;
  REQUIRE_FALSE(check_plan(p, m, c).has_value());
  REQUIRE_FALSE(predict_memory(m, p, c, hw).fits());
  SearchOptions o;
  o.space.engine = Engine::fsdp;
  bool cp = false;
  for (const auto& h : plan_fit_hints(m, c, hw, o, p))
    if (h.change.starts_with("cp 2")) {
      cp = true;
      CHECK(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::Contains("dp4×tp1×cp2×pp1") && Catch::Matchers::Contains(": fits"));
    }
  CHECK(cp);
}

// DeepSpeed-Ulysses (issue 19 item 3) as a fit hint: the same GPUs with half
// the data parallelism and twice the Ulysses ranks keep s/2 of each sequence's
// activations (and a/2 heads of the scores).
TEST_CASE("a long-sequence plan that does not fit is offered ulysses 2 on the same GPUs", "[tuner][explain][ulysses]") {
  // DeepSpeed's engine, whose Ulysses it is (16-bit activations).
  Transformer m = load_transformer("llama-7b");
  m.seq_len = 16384;
  const Cluster c = load_cluster("dgx-a100-80gb");
  const auto hw = with_engine(default_profile_for(c), "deepspeed");
  Plan p;
  p.dp = 8;
  p.zero_stage = 3;
  p.micro_batch = 1;
  p.grad_accum = 1;
  p.global_batch = 8;
  p.attention = AttentionKernel::flash;
  REQUIRE_FALSE(predict_memory(m, p, c, hw).fits());
  SearchOptions o;
  o.space.engine = Engine::deepspeed;
  bool ulysses = false;
  for (const auto& h : plan_fit_hints(m, c, hw, o, p))
    if (h.change.starts_with("ulysses 2")) {
      ulysses = true;
      CHECK(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::Contains("dp4×tp1×u2×pp1") && Catch::Matchers::Contains(": fits"));
    }
  CHECK(ulysses);
  // Megatron-LM cannot run it: the hint says so and does not count as a fit.
  o.space.engine = Engine::megatron;
  for (const auto& h : plan_fit_hints(m, c, hw, o, p))
    if (h.change.starts_with("ulysses 2")) {
      CHECK_FALSE(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::Contains("--engine megatron cannot run it"));
    }
}

TEST_CASE("fit hints: one per distinct plan, each named by what it changes", "[tuner][search][explain]") {
  // A plan that already recomputes fully with micro-batch 1 (ZeRO-1 with
  // optimizer offload on 4 V100s, 100B): "ZeRO-3 and full recomputation" is
  // ZeRO stage 3 alone, and the smallest-activations variant of ZeRO-3 CPU
  // offload changes nothing more (issue 23 saw both named twice).
  const Transformer m = load_transformer("100b");
  const Cluster c = load_cluster("v100-workstation");
  const auto hw = default_profile_for(c);
  SearchOptions o;
  Plan base;
  base.dp = 4;
  base.zero_stage = 1;
  base.offload_optimizer = OffloadTarget::cpu;
  base.micro_batch = 1;
  base.grad_accum = 256;
  base.global_batch = 1024;
  base.recompute = Recompute::full;
  base.precision = Precision::fp16;
  REQUIRE_FALSE(check_plan(base, m, c).has_value());
  const auto hints = plan_fit_hints(m, c, hw, o, base);
  REQUIRE_FALSE(hints.empty());
  std::set<std::string> plans;
  for (const auto& h : hints) {
    INFO(h.change << ": " << h.detail);
    const std::string plan = h.detail.substr(0, h.detail.find(" needs "));
    CHECK(plans.insert(plan).second);  // no two hints try the same plan
    CHECK(h.change.find("full recomputation") == std::string::npos);  // it already recomputes fully
    CHECK(h.change.find("micro-batch 1") == std::string::npos);       // and runs micro-batch 1
    CHECK(h.change.find("all of") == std::string::npos);
  }
  // A plan with room to shrink still gets the combination, naming both changes.
  base.micro_batch = 4;
  base.grad_accum = 64;
  base.recompute = Recompute::none;
  bool combined = false;
  for (const auto& h : plan_fit_hints(m, c, hw, o, base))
    combined |= h.change == "ZeRO-3 CPU offload with micro-batch 1, full recomputation";
  CHECK(combined);
}

TEST_CASE("a shard group no data-parallel degree carries: more GPUs cannot help, and the hint says why",
          "[tuner][search][explain]") {
  // --dp-shard 5 on a 2,048-sequence batch: dp divides 2,048 = 2^11, so no
  // data-parallel group is a multiple of 5 on any device count (cp and
  // Ulysses stay 1 under 8k tokens). The more-GPUs hint named only the batch.
  const Transformer m = load_transformer("llama-7b");
  const Cluster c = load_cluster("dgx-h100x4");
  const auto hw = with_engine(default_profile_for(c), "fsdp");
  SearchOptions o;
  o.space.engine = Engine::fsdp;
  o.space.dp_shard = 5;
  o.simulate_enabled = false;
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.evaluated == 0);
  const auto more = hint_named(explain_infeasible(m, c, hw, o, r), "more GPUs");
  REQUIRE(more);
  CHECK_FALSE(more->fits);
  CHECK_THAT(more->detail, Catch::Matchers::Contains("no larger device count has a layout") &&
                               Catch::Matchers::Contains("that --dp-shard 5 splits into two or more"));
}

TEST_CASE("the sequence-split fit hints name the smallest doubling that fits", "[tuner][search][explain]") {
  // Llama 7B, ZeRO-3 with flash attention on dgx-h100x4's 32 H100. The
  // hint had only doubled (audit F9), and stopped Ulysses where cp's rule
  // stops (audit51cli). The oracle: the plans' own memory, each made by hand.
  //  - 32k tokens under megatron: cp 2 is still too big, cp 4 fits;
  //  - 200,016 = 16 × 12,501 tokens under deepspeed: Ulysses 8 is still too
  //    big, 16 fits (it divides the sequence; cp 8's 2·cp chunks would not).
  struct Case {
    int seq;
    Engine engine;
    int Plan::*degree;
    int fits_at;
    std::string hint;
  };
  const Cluster c = load_cluster("dgx-h100x4");
  for (const Case& k :
       {Case{32768, Engine::megatron, &Plan::cp, 4,
             "cp 4 (context parallelism: s/4 of each sequence's activations per GPU)"},
        Case{200016, Engine::deepspeed, &Plan::ulysses, 16,
             "ulysses 16 (DeepSpeed-Ulysses: s/16 of each sequence's activations per GPU, all-to-all over heads)"}}) {
    INFO(k.hint);
    const Transformer m = load_transformer("llama-7b", k.seq);
    const auto hw = with_engine(default_profile_for(c), to_string(k.engine));
    SearchOptions o;
    o.space.engine = k.engine;
    Plan base;
    base.dp = 32;
    base.zero_stage = 3;
    base.micro_batch = 1;
    base.grad_accum = 64;
    base.global_batch = 2048;
    base.attention = AttentionKernel::flash;
    REQUIRE_FALSE(check_plan(base, m, c).has_value());
    auto split = [&](int n) {
      Plan p = base;
      p.dp = 32 / n;
      p.grad_accum = 64 * n;
      p.*k.degree = n;
      return p;
    };
    REQUIRE_FALSE(check_plan(split(k.fits_at), m, c).has_value());
    REQUIRE_FALSE(predict_memory(m, split(k.fits_at / 2), c, hw, o.memory).fits());
    REQUIRE(predict_memory(m, split(k.fits_at), c, hw, o.memory).fits());
    const auto h = hint_named(plan_fit_hints(m, c, hw, o, base), k.hint);
    REQUIRE(h);
    CHECK(h->fits);
    CHECK_THAT(h->detail, Catch::Matchers::StartsWith(split(k.fits_at).summary() + " needs "));
  }
}

TEST_CASE("no --max-cp hint where the engine runs no context parallelism on these devices",
          "[tuner][search][explain]") {
  // Llama 3.1 405B on 8 H100 fits nothing under ztune's engine or megatron's.
  // ztune's executor runs cp on its CPU backend only: its space has no cp to
  // widen, and "[no] --max-cp 16: 0 plans fit" had read as a tried remedy
  // (DeepSpeed, with no cp either, fits here with NVMe offload). Megatron runs
  // cp: the hint stays.
  const Transformer m = load_transformer("llama-405b");
  const Cluster c = load_cluster("dgx-h100");
  for (const Engine e : {Engine::ztune, Engine::megatron}) {
    INFO(to_string(e));
    const auto hw = with_engine(default_profile_for(c), to_string(e));
    SearchOptions o;
    o.space.engine = e;
    o.simulate_enabled = false;
    const auto r = run_search(m, c, hw, o);
    REQUIRE(r.feasible == 0);
    const bool runs_cp = engine_runs_context_parallel(e, c);
    CHECK(runs_cp == (e == Engine::megatron));
    const auto hints = explain_infeasible(m, c, hw, o, r);
    CHECK(hint_named(hints, "--max-cp 16").has_value() == runs_cp);
    CHECK_FALSE(hint_named(hints, "--allow-tp-across-nodes"));  // one node: no tp across nodes to allow
  }
}

TEST_CASE("a pin no layout carries is not explained by widenings that fit nothing", "[tuner][search][explain]") {
  // pp 3 does not divide dgx-h100x4's 32 devices: no plan is searched. The
  // cause is the pin (the fewer-GPUs hint names 24); "[no] --max-cp 8" and
  // "[no] --allow-tp-across-nodes" had been listed beside it (audit F9).
  const Transformer m = load_transformer("llama-7b");
  const Cluster c = load_cluster("dgx-h100x4");
  const auto hw = default_profile_for(c);
  SearchOptions o;
  o.space.pp = 3;
  o.simulate_enabled = false;
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.evaluated == 0);
  const auto hints = explain_infeasible(m, c, hw, o, r);
  CHECK_FALSE(hint_named(hints, "--max-cp 8"));
  CHECK_FALSE(hint_named(hints, "--allow-tp-across-nodes"));
  const auto fewer = hint_named(hints, "fewer GPUs");
  REQUIRE(fewer);
  CHECK(fewer->fits);
  CHECK_THAT(fewer->detail, Catch::Matchers::StartsWith("with --gpus 24 "));
}

TEST_CASE("the rank pass's remembered layer costs change no plan's time", "[tuner][search][memo]") {
  // The oracle: each kept plan priced afresh (predict_time without the
  // worker's LayerCostMemo). Spaces that vary every dimension the search has:
  // ZeRO stages, offload, 1-bit Adam and ZeRO++ (100B on V100); context
  // parallelism and Transformer Engine's TP overlap (megatron on H100);
  // Ulysses and CPU checkpointing (deepspeed); torchtitan's selective
  // policies (fsdp); block-sparse attention.
  struct Space {
    const char* cluster;
    const char* model;
    Engine engine;
    int max_cp = 0;
    int max_ulysses = 0;
    SparseLayout sparse = SparseLayout::none;
    bool opt_ins = false;
  };
  const std::vector<Space> spaces = {
      {"dgx2x16", "100b", Engine::ztune, 0, 0, SparseLayout::none, true},
      {"dgx-h100x32", "llama-70b", Engine::megatron, 4},
      {"dgx-h100x32", "llama-70b", Engine::deepspeed, 0, 8},
      {"dgx-a100-80gbx16", "llama-70b", Engine::fsdp},
      {"dgx2", "gpt2-1.5b", Engine::deepspeed, 0, 0, SparseLayout::fixed},
  };
  for (const auto& s : spaces) {
    INFO(s.cluster << " " << s.model << " " << to_string(s.engine));
    const Cluster c = load_cluster(s.cluster);
    const Transformer m = load_transformer(s.model);
    const HardwareProfile hw = default_profile_for(c);
    SearchOptions o;
    o.space.engine = s.engine;
    o.space.max_cp = s.max_cp;
    o.space.max_ulysses = s.max_ulysses;
    o.space.sparse_attention = s.sparse;
    o.space.include_onebit_adam = s.opt_ins;
    o.space.include_zeropp = s.opt_ins;
    o.top = 100000;
    o.simulate_top = 0;
    o.threads = 1;
    const auto r = run_search(m, c, hw, o);
    REQUIRE(r.plans.size() > 20);
    bool varied = false;  // the dimension the space is here for reached the kept plans
    for (const auto& cand : r.plans) {
      const Plan& p = cand.plan;
      varied |= s.max_cp > 0 ? p.cp > 1
                : s.max_ulysses > 0 ? p.ulysses > 1
                : s.sparse != SparseLayout::none ? p.sparse_attention != SparseLayout::none
                : s.opt_ins ? p.onebit_adam || p.zeropp
                : s.engine == Engine::fsdp ? p.recompute == Recompute::selective
                : true;
      const TimePrediction fresh = predict_time(m, cand.plan, c, hw);
      INFO(cand.plan.summary());
      REQUIRE(cand.prediction.time.iteration_s == fresh.iteration_s);
      for (std::size_t i = 0; i < fresh.parts.size(); ++i) REQUIRE(cand.prediction.time.parts[i] == fresh.parts[i]);
    }
    CHECK(varied);
  }
}

// Megatron's block method in the search: a plan that recomputes every layer
// and fits becomes the fewest layers per chunk that still fit, where the same
// plan without recomputation does not fit (that plan, in the space too, is
// faster). Oracle: every N of the chunk by brute force (predict_memory).
TEST_CASE("the search recomputes the fewest layers per chunk that fit (Megatron's block method)",
          "[tuner][search][recompute][block]") {
  const Cluster c = load_cluster("dgx-h100x32");
  const Transformer m = load_transformer("llama-405b");
  const HardwareProfile hw = with_engine(default_profile_for(c), "megatron");
  SearchOptions o;
  o.space.engine = Engine::megatron;
  o.top = 100000;
  o.simulate_top = 0;
  o.threads = 1;
  const auto r = run_search(m, c, hw, o);
  int blocks = 0;
  for (const auto& cand : r.plans) {
    const Plan& p = cand.plan;
    if (p.recompute != Recompute::full) continue;
    Plan none = p;
    none.recompute = Recompute::none;
    none.recompute_num_layers = 0;
    none.partition_activations = false;
    INFO(p.summary());
    if (p.recompute_num_layers == 0) {
      // Kept whole only where nothing less fits: no recomputation, or any N
      // below the largest chunk's layers.
      const int chunk = max_stage_layers(p, m.layers) / p.model_chunks();
      Plan q = p;
      q.recompute_num_layers = chunk - 1;
      CHECK((predict_memory(m, none, c, hw, o.memory).fits() || chunk < 2 ||
             !predict_memory(m, q, c, hw, o.memory).fits()));
      continue;
    }
    ++blocks;
    CHECK_FALSE(predict_memory(m, none, c, hw, o.memory).fits());
    CHECK(cand.prediction.memory.fits());
    Plan fewer = p;
    fewer.recompute_num_layers = p.recompute_num_layers - 1;
    if (fewer.recompute_num_layers > 0) CHECK_FALSE(predict_memory(m, fewer, c, hw, o.memory).fits());
    // And it is faster than recomputing every layer.
    Plan every = p;
    every.recompute_num_layers = 0;
    CHECK(predict_time(m, p, c, hw).iteration_s < predict_time(m, every, c, hw).iteration_s);
    CHECK_FALSE(engine_violation(p, Engine::megatron).has_value());
  }
  CHECK(blocks > 10);
  CHECK(r.block_recompute == blocks);  // every fitting plan is kept (top 100,000): the count is theirs
  // --recompute full pins every layer: the same search states no block, and
  // its plans are the ones above that recompute every layer, or their blocks'
  // whole-layer originals.
  o.space.recompute = Recompute::full;
  const auto pinned = run_search(m, c, hw, o);
  CHECK(pinned.block_recompute == 0);
  CHECK(pinned.plans.size() > 10);
  for (const auto& cand : pinned.plans) {
    CHECK(cand.plan.recompute == Recompute::full);
    CHECK(cand.plan.recompute_num_layers == 0);
  }
  o.space.recompute.reset();
  // DeepSpeed runs every layer: its search never states a block.
  o.space.engine = Engine::deepspeed;
  for (const auto& cand : run_search(m, c, with_engine(default_profile_for(c), "deepspeed"), o).plans)
    CHECK(cand.plan.recompute_num_layers == 0);
}

TEST_CASE("fit hints: Megatron's block method, the fewest layers per chunk that fit, beside full recomputation",
          "[tuner][explain][recompute][block]") {
  // Llama 2 70B on 128 H100, tp4 × pp4 × dp8, micro-batch 3, cuDNN attention:
  // 4 micro-batches in flight of 20 whole layers do not fit in 80 GB; every
  // layer recomputed fits with room to spare, seven layers per stage
  // recomputed just fit and run faster.
  Cluster c = load_cluster("dgx-h100x32");
  c.nodes = 16;
  const Transformer m = load_transformer("llama-70b");
  const HardwareProfile hw = with_engine(default_profile_for(c), "megatron");
  SearchOptions o;
  o.space.engine = Engine::megatron;
  o.memory.accounting = StateAccounting::megatron;  // Megatron's fp32 gradient buffer, as the CLI counts it
  Plan p;
  p.dp = 8;
  p.tp = 4;
  p.pp = 4;
  p.sequence_parallel = true;
  p.zero_stage = 1;
  p.micro_batch = 3;
  p.grad_accum = 32;
  p.global_batch = 768;
  p.attention = AttentionKernel::cudnn;
  REQUIRE_FALSE(check_plan(p, m, c).has_value());
  REQUIRE_FALSE(predict_memory(m, p, c, hw, o.memory).fits());
  std::optional<FitHint> full, block;
  for (const auto& h : plan_fit_hints(m, c, hw, o, p)) {
    if (h.change == "full recomputation") full = h;
    if (h.change.find("Megatron's block method") != std::string::npos) block = h;
  }
  REQUIRE(full);
  REQUIRE(block);
  CHECK(full->fits);
  CHECK(block->fits);
  CHECK(block->tokens_per_s > full->tokens_per_s);
  // The oracle: the first N that fits, by brute force.
  Plan q = p;
  q.recompute = Recompute::full;
  int first = 0;
  for (int n = 1; n < 20 && first == 0; ++n) {
    q.recompute_num_layers = n;
    if (predict_memory(m, q, c, hw, o.memory).fits()) first = n;
  }
  REQUIRE(first > 0);
  CHECK_THAT(block->change, Catch::Matchers::Contains("--recompute-num-layers " + std::to_string(first)));
  // DeepSpeed's engine recomputes every layer: no such hint there.
  o.space.engine = Engine::deepspeed;
  for (const auto& h : plan_fit_hints(m, c, with_engine(default_profile_for(c), "deepspeed"), o, p))
    CHECK(h.change.find("block method") == std::string::npos);
}

// A --ulysses 3 pin needs a device count that is a multiple of 3: doubling 4
// DGX H100 nodes never reaches one, and the hint had said nothing fits on
// 131,072 devices. The node counts tried one at a time reach 6 (48 devices),
// and below the cluster 24 (dp 8 × u 3). The oracle: divisibility.
TEST_CASE("GPU-count hints under a Ulysses 3 pin reach multiples of 3 devices", "[tuner][search][explain]") {
  const Transformer m = load_transformer("gpt3-175b", 3072);
  const Cluster c = load_cluster("dgx-h100x4");
  SearchOptions o;
  o.space.engine = Engine::deepspeed;
  o.space.ulysses = 3;
  const auto hw = with_engine(default_profile_for(c), "deepspeed");
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.feasible == 0);
  bool fewer = false, more = false, unpin = false;
  for (const auto& h : explain_infeasible(m, c, hw, o, r)) {
    INFO(h.change << ": " << h.detail);
    if (h.change == "fewer GPUs") {
      fewer = true;
      CHECK(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::StartsWith("with --gpus 24 (of the cluster's 32)"));
    }
    if (h.change == "more GPUs") {
      more = true;
      CHECK(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::StartsWith("with --nodes 6 (48 devices)"));
    }
    if (h.change == "without --ulysses") unpin = true;  // the pin is named
  }
  CHECK(fewer);
  CHECK(more);
  CHECK(unpin);
}

// With --gpus the counts below the one asked for are tried too: 12 GPUs have
// no layout of llama-70b's 64 heads and batch 1024, 8 do and fit.
TEST_CASE("GPU-count hints under --gpus 12 offer the fewer GPUs that fit", "[tuner][search][explain]") {
  const Transformer m = load_transformer("llama-70b");
  Cluster c = load_cluster("dgx-h100x4");
  c.nodes = 2;
  SearchOptions o;
  o.space.gpus = 12;
  const auto hw = default_profile_for(c);
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.feasible == 0);
  const auto h = hint_named(explain_infeasible(m, c, hw, o, r), "fewer GPUs");
  REQUIRE(h);
  CHECK(h->fits);
  CHECK_THAT(h->detail, Catch::Matchers::StartsWith("with --gpus 8 (of the cluster's 16)"));
}

// The other engines are tried, each priced as it runs: GPT-3 175B on one
// DGX A100 fits nowhere under Megatron-LM (no optimizer offload there, and
// the host holds no ZeRO-Offload of 175B), and fits under DeepSpeed with its
// states on NVMe (ZeRO-Infinity). Only ztune's own engine had been tried.
TEST_CASE("fit hints try every other engine and name the one where plans fit", "[tuner][explain]") {
  const Transformer m = load_transformer("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-80gb");
  SearchOptions o;
  o.space.engine = Engine::megatron;
  o.memory.accounting = state_accounting_of(Engine::megatron);
  const auto hw = with_engine(default_profile_for(c), "megatron");
  const auto r = run_search(m, c, hw, o);
  REQUIRE(r.feasible == 0);
  bool named = false;
  for (const auto& h : explain_infeasible(m, c, hw, o, r))
    if (h.change == "--engine deepspeed in place of --engine megatron") {
      named = true;
      CHECK(h.fits);
      CHECK_THAT(h.detail, Catch::Matchers::Contains("opt→nvme"));
    }
  CHECK(named);
}

TEST_CASE("ztune's engine on GPUs leaves out the modes its CUDA backend refuses", "[tuner][search][engine]") {
  // The runner's own check (executor_support.cpp unsupported_reason on the
  // CUDA backend) is the oracle: no plan the default engine ranks on GPUs may
  // be one `ztune run` refuses for context parallelism, Ulysses or hybrid
  // sharding (the default search had ranked a shard16 plan third).
  Transformer m = load_transformer("llama-7b");
  m.seq_len = 8192;  // cp and Ulysses enter the space from 8192 tokens
  const Cluster c = load_cluster("dgx-h100x4");
  SearchOptions o;
  o.space.global_batch = 64;
  const auto r = search_all(m, c, o);
  REQUIRE(r.feasible > 0);
  for (const auto& cand : r.plans) {
    const Plan& p = cand.plan;
    CHECK(p.cp == 1);
    CHECK(p.ulysses == 1);
    CHECK(p.dp_shard == 0);
    const auto why = unsupported_reason(p, m, p.gpus(), ExecBackend::cuda, c.node.gpus);
    if (why) {
      CHECK_FALSE(why->starts_with("$.plan.cp"));
      CHECK_FALSE(why->starts_with("$.plan.ulysses"));
      CHECK_FALSE(why->starts_with("$.plan.dp_shard"));
    }
  }
  // The same modes on the engines that run them stay in the space.
  o.space.engine = Engine::megatron;
  const auto mg = search_all(m, c, o);
  CHECK(std::any_of(mg.plans.begin(), mg.plans.end(), [](const Candidate& k) { return k.plan.cp > 1; }));
}

TEST_CASE("the engine rules with the cluster agree with the runner's check", "[tuner][engine]") {
  const Transformer m = load_transformer("llama-7b");
  const Cluster gpu = load_cluster("dgx-h100x4");
  const Cluster cpu = load_cluster("local-cpu");
  for (int cp : {1, 2})
    for (int u : {1, 2})
      for (int shard : {0, 2}) {
        if (cp > 1 && u > 1) continue;  // do not combine (check_plan_shape)
        Plan p;
        p.dp = 4;
        p.cp = cp;
        p.ulysses = u;
        p.zero_stage = 3;
        p.dp_shard = shard;
        p.global_batch = 4;
        p.grad_accum = 1;
        REQUIRE_FALSE(check_plan_shape(p, m));
        const auto why = unsupported_reason(p, m, p.gpus(), ExecBackend::cuda, gpu.node.gpus);
        const bool runner_refuses = why && (why->starts_with("$.plan.cp") || why->starts_with("$.plan.ulysses") ||
                                            why->starts_with("$.plan.dp_shard"));
        INFO("cp " << cp << " ulysses " << u << " dp_shard " << shard);
        CHECK(engine_violation(p, Engine::ztune, gpu).has_value() == runner_refuses);
        CHECK_FALSE(engine_violation(p, Engine::ztune, cpu).has_value());  // the CPU backend runs each
      }
}

TEST_CASE("a pinned mode the engine cannot run is refused before the search", "[tuner][search][engine]") {
  Transformer m = load_transformer("llama-7b");
  m.seq_len = 8192;
  const Cluster c = load_cluster("dgx-h100x4");
  auto refusal = [&](Engine e, auto pin) -> std::string {
    SpaceOptions o;
    o.engine = e;
    o.global_batch = 64;
    pin(o);
    try {
      SearchSpace s(m, c, o);
    } catch (const InputError& err) {
      return err.what();
    }
    return "";
  };
  auto cp2 = [](SpaceOptions& o) { o.cp = 2; };
  auto shard8 = [](SpaceOptions& o) { o.dp_shard = 8; };
  CHECK_THAT(refusal(Engine::ztune, cp2), Catch::Contains("--cp 2: ztune's executor runs context parallelism"));
  CHECK_THAT(refusal(Engine::deepspeed, cp2), Catch::Contains("DeepSpeed has no context parallelism"));
  CHECK(refusal(Engine::megatron, cp2).empty());
  CHECK(refusal(Engine::fsdp, cp2).empty());
  // Hybrid sharding with an engine that has none had read "no layout of the
  // devices ... divides into two or more groups" after the whole search.
  CHECK_THAT(refusal(Engine::megatron, shard8), Catch::Contains("--dp-shard 8: Megatron-LM's distributed optimizer"));
  CHECK_THAT(refusal(Engine::ztune, shard8), Catch::Contains("CPU backend only"));
  CHECK(refusal(Engine::fsdp, shard8).empty());
}

TEST_CASE("torchtitan's context parallelism is searched in flash attention on H100", "[tuner][search][engine]") {
  // SDPA's cuDNN kernel is the fsdp engine's fused one on H100, and
  // torchtitan's cp runs in flash only: a cp pin had found no plan at all.
  Transformer m = load_transformer("llama-7b");
  m.seq_len = 8192;
  const Cluster c = load_cluster("dgx-h100x4");
  SearchOptions o;
  o.space.engine = Engine::fsdp;
  o.space.global_batch = 64;
  o.space.cp = 2;
  const auto r = search_all(m, c, o);
  REQUIRE(r.feasible > 0);
  for (const auto& k : r.plans) {
    CHECK(k.plan.cp == 2);
    CHECK(k.plan.attention == AttentionKernel::flash);
  }
}

TEST_CASE("a stop while the best plans are simulated leaves the ranking whole", "[tuner][search]") {
  // The oracle: the same search, not stopped. Stopped in its simulate pass,
  // it is interrupted but counted every plan (the planner had said "found
  // before the search was cancelled" of a complete ranking).
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx2");
  const auto hw = default_profile_for(c);
  SearchOptions o;
  o.simulate_top = 3;
  const auto whole = run_search(m, c, hw, o);
  REQUIRE_FALSE(whole.interrupted);
  CHECK(whole.ranked_whole_space());
  std::atomic<bool> stop{false};
  o.stop = &stop;
  const auto r = run_search(m, c, hw, o, [&stop](const SearchProgress& p) {
    if (p.phase == SearchPhase::simulate) stop = true;
  });
  REQUIRE(r.interrupted);
  CHECK(r.ranked_whole_space());
  CHECK(r.feasible == whole.feasible);
  CHECK(r.evaluated == whole.evaluated);
  // Stopped before ranking: not whole.
  std::atomic<bool> early{true};
  o.stop = &early;
  const auto none = run_search(m, c, hw, o);
  REQUIRE(none.interrupted);
  CHECK_FALSE(none.ranked_whole_space());
}
