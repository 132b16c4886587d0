#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "tuner_fixtures.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/tuner/prune_reason.hpp"
#include "ztune/tuner/engine.hpp"
#include "ztune/tuner/search_space.hpp"

using namespace ztune;

namespace {

// tiny with head size 64 (hidden 256, FFN 1024), which ztune's CUDA flash kernel takes (tiny's is 16).
Transformer tiny_head64() {
  Transformer m = load_transformer("tiny");
  m.hidden = 256;
  m.ffn_hidden = 1024;
  return m;
}

}  // namespace

TEST_CASE("divisors lists every divisor in order", "[tuner][space]") {
  CHECK(divisors(1) == std::vector<int>{1});
  CHECK(divisors(12) == std::vector<int>{1, 2, 3, 4, 6, 12});
  CHECK(divisors(49) == std::vector<int>{1, 7, 49});
  CHECK(divisors(3072).size() == 22);  // 3072 = 2^10 · 3: (10+1)·(1+1) divisors
  // A 64-bit batch keeps its 64-bit divisors: 2147483659 is a prime above
  // 2^31, and 2 · it had given a negative int.
  const std::int64_t prime = 2147483659;
  CHECK(divisors(prime) == std::vector<std::int64_t>{1, prime});
  CHECK(divisors(2 * prime) == std::vector<std::int64_t>{1, 2, prime, 2 * prime});
}

TEST_CASE("the space of a tiny model on two V100s has the size counted by hand", "[tuner][space]") {
  // tiny: 4 layers, 4 heads, global batch 16; two V100s in one node (fp16 only, NVMe present).
  Transformer m = load_transformer("tiny");
  Cluster c = load_cluster("v100-workstation");
  c.node.gpus = 2;
  SpaceOptions o;
  SearchSpace s(m, c, o);
  // Layouts (dp, tp, pp) of 2 GPUs: (2,1,1), (1,1,2), (1,2,1).
  // ZeRO/offload choices without pipelining: z0; z1, z1+cpu; z2, z2+cpu; z3 × {none,cpu,nvme}² = 14.
  // With dp = 1 ZeRO partitions nothing, so z1, z2 and z3 without any offload
  // (duplicates of z0) are not generated: 11 choices; with pipelining z0 only.
  //  (2,1,1): 1 schedule × 1 sp × 3 recompute × 14 × 4 micro-batches (divisors of 8)   = 168
  //  (1,1,2): [gpipe 5 + 1f1b 5 + interleaved v=2: 4 micro-batches with accum even] × 3 × 1 (z0) = 42
  //  (1,2,1): 2 sp × 3 recompute × 11 × 5 micro-batches (divisors of 16)               = 330
  CHECK(s.layouts().size() == 3);
  CHECK(s.size() == 168 + 42 + 330);
  // Every generated plan is distinct and valid by check_plan.
  std::set<std::string> seen;
  std::int64_t n = 0;
  for (const auto& l : s.layouts()) {
    REQUIRE(l.rejected == LayoutRule::none);
    s.for_each_plan(l, [&](const Plan& p) {
      ++n;
      CHECK_FALSE(check_plan(p, m, c).has_value());
      if (p.dp == 1 && p.zero_stage > 0)
        CHECK((p.offload_optimizer != OffloadTarget::none || p.offload_params != OffloadTarget::none));
      seen.insert(plan_to_json(p).dump());
    });
  }
  CHECK(n == s.size());
  CHECK(seen.size() == static_cast<std::size_t>(n));
}

TEST_CASE("by default tp never exceeds the GPUs of a node", "[tuner][space]") {
  Cluster c = load_cluster("dgx-a100-80gbx16");  // 16 nodes × 8 A100
  Transformer m = load_transformer("gpt3-175b");  // 96 heads: tp 16, 32 would divide them
  SearchSpace s(m, c, {});
  int rejected = 0;
  for (const auto& l : s.layouts()) {
    if (l.tp > c.node.gpus) {
      CHECK(l.rejected == LayoutRule::tp_across_nodes);
      ++rejected;
    }
    if (l.rejected == LayoutRule::none) CHECK(l.tp <= c.node.gpus);
  }
  CHECK(rejected > 0);
  SpaceOptions allow;
  allow.allow_tp_across_nodes = true;
  SearchSpace wide(m, c, allow);
  bool tp16 = false;
  for (const auto& l : wide.layouts()) tp16 |= l.tp == 16 && l.rejected == LayoutRule::none;
  CHECK(tp16);
}

TEST_CASE("layout rules follow check_plan: tp divides heads, pp at most the layers", "[tuner][space]") {
  Cluster c = load_cluster("dgx2x16");
  Transformer m = load_transformer("100b");  // 125 layers, 64 heads
  SearchSpace s(m, c, {});
  bool uneven = false;
  for (const auto& l : s.layouts()) {
    if (l.rejected != LayoutRule::none) continue;
    CHECK(m.heads % l.tp == 0);
    CHECK(l.pp <= m.layers);
    CHECK(l.dp * l.tp * l.pp == 256);
    uneven |= m.layers % l.pp != 0;
  }
  // 125 = 5³: every pp > 1 that divides 256 makes uneven stages (issue 19),
  // which the search now generates, balanced (DeepSpeed's uniform partition).
  CHECK(uneven);
  for (const auto& l : s.layouts())
    if (l.pp > m.layers) CHECK(l.rejected == LayoutRule::pp_layers);
}

TEST_CASE("uneven layouts: balanced stages, interleaving only where pp × v divides the layers", "[tuner][space][stages]") {
  Cluster c = load_cluster("dgx2");  // 16 V100
  Transformer m = load_transformer("tiny");  // 4 layers
  m.layers = 6;
  SpaceOptions o;
  o.gpus = 4;
  o.pp = 4;  // 6 layers on 4 stages: 2 + 2 + 1 + 1
  SearchSpace s(m, c, o);
  std::int64_t n = 0;
  for (const auto& l : s.layouts()) {
    if (l.rejected != LayoutRule::none) continue;
    s.for_each_plan(l, [&](const Plan& plan) {
      ++n;
      CHECK(plan.pp == 4);
      CHECK(plan.stage_layers.empty());
      CHECK(plan.schedule != Schedule::interleaved);
      CHECK_FALSE(check_plan(plan, m, c).has_value());
    });
  }
  CHECK(n > 0);
  // 8 layers on 4 stages: interleaving with v = 2 is in the space.
  m.layers = 8;
  SearchSpace even(m, c, o);
  bool interleaved = false;
  for (const auto& l : even.layouts())
    for (const auto& sc : even.schedules(l)) interleaved |= sc.schedule == Schedule::interleaved;
  CHECK(interleaved);
}

// Issue 23: `--engine megatron` once ranked DeepSpeed's uniform split
// (8×13 + 7×3 for 125 layers on 16 stages), which `export --format megatron`
// then refused. Its plans carry the partition Megatron-LM can state.
TEST_CASE("megatron's uneven layouts carry a partition Megatron-LM can state", "[tuner][space][stages]") {
  const Cluster c = load_cluster("dgx2x16");
  const Transformer m = load_transformer("100b");  // 125 layers
  SpaceOptions o;
  o.engine = Engine::megatron;
  o.pp = 16;
  o.tp = 8;
  o.gpus = 256;
  SearchSpace s(m, c, o);
  std::int64_t n = 0;
  for (const auto& l : s.layouts()) {
    if (l.rejected != LayoutRule::none) continue;
    s.for_each_plan(l, [&](const Plan& plan) {
      if (++n > 50) return;
      std::vector<int> expected(16, 8);
      expected.front() = 7;
      expected.back() = 6;
      CHECK(plan.stage_layers == expected);
      CHECK_FALSE(check_plan(plan, m, c).has_value());
    });
  }
  CHECK(n > 0);
  // The other engines keep the uniform split (no stated partition).
  o.engine = Engine::deepspeed;
  SearchSpace ds(m, c, o);
  for (const auto& l : ds.layouts())
    if (l.rejected == LayoutRule::none) ds.for_each_plan(l, [&](const Plan& plan) { CHECK(plan.stage_layers.empty()); });
}

// Megatron-Core interleaves where pp does not divide the layers by counting
// the embedding and the loss as layers: Llama 3.1 405B's 126 + 2 = 128 over
// pp 16 is 8 a stage, so vp 2, 4 and 8 cut them into chunks of 4, 2 and 1,
// the first and last chunk one short (transformer_layer.py
// get_transformer_layer_offset). The search offers them to megatron only.
TEST_CASE("megatron's search interleaves uneven layouts with the embedding and the loss counted as layers",
          "[tuner][space][stages][chunks]") {
  const Cluster c = load_cluster("dgx-h100x32");
  const Transformer m = load_transformer("llama-405b");
  SpaceOptions o;
  o.engine = Engine::megatron;
  o.pp = 16;
  o.tp = 8;
  o.gpus = 256;
  SearchSpace s(m, c, o);
  std::set<int> chunked;
  std::int64_t n = 0, counted = 0;
  for (const auto& l : s.layouts()) {
    if (l.rejected != LayoutRule::none) continue;
    counted += l.plans;
    for (const auto& sc : s.schedules(l))
      if (!sc.chunk_layers.empty()) {
        chunked.insert(sc.virtual_stages);
        const int k = 8 / sc.virtual_stages;
        CHECK(sc.chunk_layers.size() == static_cast<std::size_t>(16 * sc.virtual_stages));
        CHECK((sc.chunk_layers.front() == k - 1 && sc.chunk_layers.back() == k - 1 && sc.chunk_layers[1] == k));
      }
    s.for_each_plan(l, [&](const Plan& plan) {
      ++n;
      if (!plan.chunk_layers.empty()) {
        CHECK(plan.schedule == Schedule::interleaved);
        CHECK(plan.stage_layers == stage_layers_accounting(126, 16, true, true));  // 7 + 8 × 14 + 7
      } else if (plan.schedule != Schedule::interleaved) {
        CHECK(plan.stage_layers == megatron_stage_layers(126, 16));
      }
      if (n % 97 == 0) CHECK_FALSE(check_plan(plan, m, c).has_value());
    });
  }
  CHECK(chunked == std::set<int>{2, 4, 8});
  CHECK(n == counted);
  // DeepSpeed has no virtual pipeline: none of its schedules is chunked.
  o.engine = Engine::deepspeed;
  SearchSpace ds(m, c, o);
  for (const auto& l : ds.layouts())
    if (l.rejected == LayoutRule::none)
      for (const auto& sc : ds.schedules(l)) CHECK(sc.chunk_layers.empty());
}

// Issue 23: the engines started by torchrun or the deepspeed launcher (whole
// nodes and a smaller last one, tp ranks adjacent and inside a node) are
// offered only device counts those can start; ztune's executor (mpirun) any.
TEST_CASE("engines started by torchrun are offered only launchable device counts", "[tuner][space]") {
  const Cluster c = load_cluster("dgx2x16");  // 16 nodes of 16
  SpaceOptions o;
  o.min_gpus = 200;
  o.max_gpus = 256;
  auto accepted = [&](const Transformer& m, Engine e) {
    o.engine = e;
    SearchSpace s(m, c, o);
    std::set<std::pair<int, int>> out;  // (devices, tp)
    for (const auto& l : s.layouts())
      if (l.rejected == LayoutRule::none) out.insert({l.gpus, l.tp});
    return out;
  };
  // By hand: g ranks fill nodes of 16 in order (the last takes the rest), or
  // k ranks on every node; each node's count a multiple of tp; at most 16 nodes.
  auto launchable = [](int g, int tp) {
    bool ok = (g + 15) / 16 <= 16 && 16 % tp == 0 && (g % 16) % tp == 0;
    for (int k = 1; k <= 16; ++k) ok |= g % k == 0 && k % tp == 0 && g / k <= 16;
    return ok;
  };
  const Transformer m100 = load_transformer("100b");
  const auto megatron = accepted(m100, Engine::megatron);
  REQUIRE_FALSE(megatron.empty());
  for (const auto& [g, tp] : megatron) {
    INFO(g << " devices at tp " << tp);
    CHECK(launchable(g, tp));
  }
  CHECK(megatron.count({250, 2}) == 1);  // 15 nodes of 16 and one of 10
  CHECK(megatron.count({256, 8}) == 1);
  // tp 3 across nodes of 16 (GPT-3's 96 heads): 240 devices start as 16 nodes
  // of 15; 246 = 2·3·41 only as 41 nodes of 6 or 82 of 3: none for megatron.
  o.allow_tp_across_nodes = true;
  o.min_gpus = 240;
  o.max_gpus = 250;
  const Transformer gpt3 = load_transformer("gpt3-175b");
  const auto tp3 = accepted(gpt3, Engine::megatron);
  CHECK(tp3.count({240, 3}) == 1);
  CHECK(tp3.count({246, 3}) == 0);
  CHECK(accepted(gpt3, Engine::ztune).count({246, 3}) == 1);
  // The refusal is counted and explained as the launch's, not as a plan rule.
  o.engine = Engine::megatron;
  const SearchSpace s(gpt3, c, o);
  bool seen = false;
  for (const auto& l : s.layouts())
    if (l.gpus == 246 && l.tp == 3) {
      seen = true;
      CHECK(l.rejected == LayoutRule::unlaunchable);
      CHECK_THAT(l.reason, Catch::Matchers::Contains("246 devices at tp 3 cannot start on at most 16 nodes of 16"));
    }
  CHECK(seen);
  CHECK(prune_reason_name(PruneReason::unlaunchable) ==
        "the launcher cannot start these ranks with each tp group inside a node");
}

TEST_CASE("engine and device-count constraints are checked", "[tuner][space]") {
  Cluster c = load_cluster("dgx2");
  Transformer m = load_transformer("tiny");
  SpaceOptions o;
  o.gpus = 17;
  CHECK_THROWS_AS(SearchSpace(m, c, o), InputError);
  o.gpus = 0;
  o.min_gpus = 2;
  o.max_gpus = 4;
  SearchSpace range(m, c, o);
  CHECK(range.gpu_counts() == std::vector<int>{2, 3, 4});
  o = {};
  o.precision = Precision::bf16;  // V100 has no bf16
  CHECK_THROWS_WITH(SearchSpace(m, c, o), Catch::Matchers::Contains("--precision"));
}

TEST_CASE("opt-in options: 1-bit Adam gets the default warm-up and a sparse layout doubles the space",
          "[tuner][space]") {
  // Same space as the hand count above (540 plans).
  Transformer m = load_transformer("tiny");
  Cluster c = load_cluster("v100-workstation");
  c.node.gpus = 2;
  SpaceOptions o;
  o.include_onebit_adam = true;
  o.sparse_attention = SparseLayout::bigbird;
  o.sparse_block = 16;
  SearchSpace s(m, c, o);
  // tiny: 1e6 tokens / (16 × 64) = 976.6 → 977 steps; 15% → 146.55 → 147 warm-up steps.
  CHECK(s.onebit_freeze_step() == 147);
  // 1-bit Adam adds one state (ZeRO 0 + 1-bit) where there is data-parallel
  // traffic to compress, the (2,1,1) layout: 3 recompute × 4 mb = 12.
  // The sparse layout then doubles everything: (540 + 12) × 2.
  CHECK(s.size() == (540 + 12) * 2);
  std::int64_t onebit = 0, sparse = 0, n = 0;
  for (const auto& l : s.layouts())
    s.for_each_plan(l, [&](const Plan& p) {
      ++n;
      CHECK_FALSE(check_plan(p, m, c).has_value());
      if (p.onebit_adam) {
        ++onebit;
        CHECK(p.onebit_freeze_step == 147);
      } else {
        CHECK(p.onebit_freeze_step == 0);
      }
      if (p.sparse_attention == SparseLayout::bigbird) {
        ++sparse;
        CHECK(p.sparse_block == 16);
      }
    });
  CHECK(n == s.size());
  CHECK(onebit == 12 * 2);
  CHECK(sparse == 540 + 12);
  const auto added = plans_added_by_options(m, c, o);
  REQUIRE(added.size() == 2);
  CHECK(added[0].option == "--onebit-adam");
  CHECK(added[0].added == 12 * 2);
  CHECK(added[1].option == "--sparse-attention bigbird");
  CHECK(added[1].added == 540 + 12);

  o.onebit_freeze_step = 10;
  CHECK(SearchSpace(m, c, o).onebit_freeze_step() == 10);
  o.sparse_block = 48;  // does not divide 64
  CHECK_THROWS_WITH(SearchSpace(m, c, o), Catch::Matchers::Contains("--sparse-block"));
  // Default: dense only, and on V100s (no FlashAttention-2) the standard kernel only.
  const auto dense = SearchSpace(m, c, SpaceOptions{}).attention_choices();
  REQUIRE(dense.size() == 1);
  CHECK(dense[0].layout == SparseLayout::none);
  CHECK(dense[0].kernel == AttentionKernel::standard);
}

TEST_CASE("the fused kernel searched is the one the profile prices faster, where the engine runs it",
          "[tuner][space][cudnn]") {
  HardwareProfile hw;
  hw.attention_gemm_factor = 0.5;
  hw.cudnn_attention_factor = 0.5;
  CHECK(preferred_fused_kernel(Engine::megatron, hw) == AttentionKernel::flash);  // a tie: FlashAttention-2
  hw.cudnn_attention_factor = 0.8;
  CHECK(preferred_fused_kernel(Engine::megatron, hw) == AttentionKernel::cudnn);
  CHECK(preferred_fused_kernel(Engine::fsdp, hw) == AttentionKernel::cudnn);
  CHECK(preferred_fused_kernel(Engine::deepspeed, hw) == AttentionKernel::flash);  // Megatron-DeepSpeed: FA2 only

  const Transformer m = tiny_head64();
  Cluster c = load_cluster("dgx-h100");
  c.node.gpus = 2;
  auto kernels = [&](SpaceOptions o) {
    std::set<std::string> seen;
    const SearchSpace space(m, c, o);
    for (const auto& a : space.attention_choices()) seen.insert(to_string(a.kernel));
    return seen;
  };
  SpaceOptions o;
  o.engine = Engine::megatron;
  o.fused_kernel = AttentionKernel::cudnn;
  CHECK(kernels(o) == std::set<std::string>{"standard", "cudnn"});
  o.engine = Engine::deepspeed;
  CHECK(kernels(o) == std::set<std::string>{"standard", "flash"});
  o.attention = AttentionKernel::cudnn;
  CHECK_THROWS_WITH(SearchSpace(m, c, o), Catch::Contains("--attention") && Catch::Contains("Megatron-DeepSpeed"));
  // A V100 runs neither fused kernel.
  o.engine = Engine::megatron;
  Cluster v = load_cluster("dgx2");
  CHECK_THROWS_WITH(SearchSpace(m, v, o), Catch::Contains("--attention: cudnn needs an Ampere or newer GPU"));
}

TEST_CASE("on Ampere GPUs the space adds flash attention, without selective recomputation", "[tuner][space]") {
  // The hand-counted space above on two A100s: bf16 instead of fp16 (one
  // precision either way). With flash pinned, each layout's 3 recompute modes
  // become 2: flash with selective recomputation would recompute nothing that
  // flash stores (it keeps no s×s tensors) and is not generated.
  const Transformer m = tiny_head64();
  Cluster c = load_cluster("dgx-a100-80gb");
  c.node.gpus = 2;
  // Engine ztune: with 16-bit storage its CUDA fused attention is cuDNN's on
  // the stored values, priced as every engine's, so it is searched by default:
  // 5 (recompute, attention) pairs per activation split where the standard
  // kernel alone has 3 (ztune has no Pa, so tp 2 scales alike). In fp32 its
  // fused kernel is its own SIMT fp32 one: searched only when pinned.
  SpaceOptions standard_only;
  standard_only.attention = AttentionKernel::standard;
  CHECK(SearchSpace(m, c, standard_only).size() == 168 + 42 + 330);
  CHECK(SearchSpace(m, c, SpaceOptions{}).size() == (168 + 42 + 330) / 3 * 5);
  SpaceOptions fp32;
  fp32.precision = Precision::fp32;
  const SearchSpace fp32_space(m, c, fp32);
  REQUIRE(fp32_space.attention_choices().size() == 1);
  CHECK(fp32_space.attention_choices()[0].kernel == AttentionKernel::standard);
  SpaceOptions flash_only;
  flash_only.attention = AttentionKernel::flash;
  CHECK(SearchSpace(m, c, flash_only).size() == (168 + 42 + 330) / 3 * 2);
  // Megatron-LM runs FlashAttention-2: its space holds both kernels, 5
  // (recompute, attention) pairs where the standard kernel alone has 3. With
  // tp 2 the activations split three ways (none, SP, and Pa with full
  // recomputation only): 2 × 5 + 2 = 12 (split, recompute, attention) triples
  // where the standard kernel alone has 2 × 3 + 1 = 7; of the 12, 2 × 2 + 1 = 5 flash.
  SpaceOptions mg;
  mg.engine = Engine::megatron;
  SearchSpace s(m, c, mg);
  mg.attention = AttentionKernel::standard;
  const SearchSpace standard(m, c, mg);
  REQUIRE(s.layouts().size() == standard.layouts().size());
  std::int64_t expected_flash = 0;
  for (std::size_t i = 0; i < s.layouts().size(); ++i) {
    const auto& both = s.layouts()[i];
    const auto& one = standard.layouts()[i];
    if (both.tp == 1) {
      CHECK(both.plans == one.plans / 3 * 5);
      expected_flash += both.plans / 5 * 2;
    } else {
      CHECK(both.plans == one.plans / 7 * 12);
      expected_flash += both.plans / 12 * 5;
    }
  }
  std::int64_t flash = 0, n = 0;
  std::set<std::string> seen;
  for (const auto& l : s.layouts())
    s.for_each_plan(l, [&](const Plan& p) {
      ++n;
      CHECK_FALSE(check_plan(p, m, c).has_value());
      if (p.attention == AttentionKernel::flash) {
        ++flash;
        CHECK(p.recompute != Recompute::selective);
      }
      seen.insert(plan_to_json(p).dump());
    });
  CHECK(n == s.size());
  CHECK(flash == expected_flash);
  CHECK(seen.size() == static_cast<std::size_t>(n));

  SpaceOptions pinned;
  // Flash pinned where there is none: a V100 is older than Ampere.
  Cluster v100 = load_cluster("v100-workstation");
  v100.node.gpus = 2;
  pinned.attention = AttentionKernel::flash;
  CHECK_THROWS_WITH(SearchSpace(m, v100, pinned), Catch::Matchers::Contains("--attention"));
  // ztune's own CUDA flash kernel takes head sizes 64 and 128 only; Megatron-LM's has no such limit.
  Transformer odd = m;
  odd.heads = 8;  // hidden 256 / 8 = head size 32
  odd.kv_heads = 8;
  CHECK_THROWS_WITH(SearchSpace(odd, c, pinned), Catch::Matchers::Contains("head sizes 64 and 128"));
  pinned.engine = Engine::megatron;
  CHECK_NOTHROW(SearchSpace(odd, c, pinned));
  // ztune's CPU executor prices its own flash kernel: searched by default, any head size.
  const auto cpu = SearchSpace(load_transformer("tiny"), load_cluster("local-cpu"), SpaceOptions{}).attention_choices();
  REQUIRE(cpu.size() == 2);
  CHECK(cpu[1].kernel == AttentionKernel::flash);
}

TEST_CASE("a space over max_plans is refused naming --max-plans, a stop flag ends the enumeration", "[tuner][space]") {
  // The hand-counted space of the test above: tiny on two A100s holds 168 + 42 + 330 = 540 plans
  // with the standard attention kernel.
  const Transformer m = tiny_head64();
  Cluster c = load_cluster("dgx-a100-80gb");
  c.node.gpus = 2;
  SpaceOptions o;
  o.attention = AttentionKernel::standard;
  o.max_plans = 540;
  CHECK(SearchSpace(m, c, o).size() == 540);
  o.max_plans = 539;
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(SearchSpace(m, c, o), Contains("--max-plans") && Contains("more than 539 plans") &&
                                              Contains("540 counted up to 2 devices"));
  o.max_plans = 0;
  CHECK_THROWS_WITH(SearchSpace(m, c, o), Contains("--max-plans"));
  // Stopped before the first device count: nothing laid out, and it says so.
  const std::atomic<bool> stop{true};
  EnumerationHooks hooks;
  hooks.stop = &stop;
  const SearchSpace stopped(m, c, SpaceOptions{}, hooks);
  CHECK(stopped.interrupted());
  CHECK(stopped.size() == 0);
  CHECK(stopped.layouts().empty());
  CHECK_FALSE(SearchSpace(m, c, SpaceOptions{}).interrupted());
}

namespace {

// Every plan of every accepted layout of the tiny model on two GPUs of
// `cluster`, under engine e; returns the number of plans visited (at most the
// space's size).
template <class F>
std::int64_t for_each_tiny_plan(Engine e, F&& f, const char* cluster = "v100-workstation") {
  const Transformer m = load_transformer("tiny");
  Cluster c = load_cluster(cluster);
  c.node.gpus = 2;
  SpaceOptions o;
  o.engine = e;
  SearchSpace s(m, c, o);
  std::int64_t n = 0;
  for (const auto& l : s.layouts()) {
    if (l.rejected != LayoutRule::none) continue;
    s.for_each_plan(l, [&](const Plan& p) {
      ++n;
      f(p, m, c);
    });
  }
  CHECK(n <= s.size());
  return n;
}

constexpr Engine kEngines[] = {Engine::ztune, Engine::deepspeed, Engine::megatron, Engine::fsdp};

}  // namespace

TEST_CASE("partitioned activations are searched where the engine runs them, with full recomputation only",
          "[tuner][space][pa]") {
  // The hand-counted space above: its (1,2,1) layout has 11 ZeRO/offload
  // choices × 5 micro-batches; DeepSpeed and Megatron-LM add Pa there with full
  // recomputation: 55 plans (Megatron-LM's space keeps ZeRO 0 and 1 unless
  // --zero pins 2 or 3: z0 and z1 + cpu, 10). ztune's executor and FSDP have no
  // Pa: none.
  for (Engine e : kEngines) {
    std::int64_t pa = 0;
    for_each_tiny_plan(e, [&](const Plan& p, const Transformer& m, const Cluster& c) {
      if (!p.partition_activations) return;
      ++pa;
      CHECK(p.recompute == Recompute::full);
      CHECK(p.tp == 2);
      CHECK_FALSE(p.sequence_parallel);
      CHECK_FALSE(check_plan(p, m, c).has_value());
    });
    INFO(to_string(e));
    const bool runs_pa = e == Engine::deepspeed || e == Engine::megatron;
    // DeepSpeed's run with their checkpoints on the GPU and, CPU checkpointing, on the host.
    const int states = e == Engine::megatron ? 2 : 11;
    CHECK(pa == (runs_pa ? states * 5 * (e == Engine::deepspeed ? 2 : 1) : 0));
  }
}

TEST_CASE("CPU checkpointing is searched for DeepSpeed's full-recomputation plans on GPUs only",
          "[tuner][space][offload]") {
  // Every full-recomputation plan of DeepSpeed's space comes twice: its
  // checkpoints on the device and on the host; no other recomputation mode,
  // no other engine.
  for (Engine e : kEngines) {
    std::int64_t full = 0, on_host = 0;
    const std::int64_t n = for_each_tiny_plan(e, [&](const Plan& p, const Transformer& m, const Cluster& c) {
      if (p.recompute == Recompute::full) ++full;
      if (!p.cpu_checkpointing) return;
      ++on_host;
      CHECK(p.recompute == Recompute::full);
      CHECK_FALSE(check_plan(p, m, c).has_value());
      // The space leaves the engine's other rules to the search's filter:
      // whatever it refuses, it refuses with the checkpoints on the GPU too.
      Plan on_gpu = p;
      on_gpu.cpu_checkpointing = false;
      CHECK(engine_violation(p, e) == engine_violation(on_gpu, e));
    });
    INFO(to_string(e) << ": " << n << " plans");
    CHECK(full > 0);
    CHECK(on_host == (e == Engine::deepspeed ? full / 2 : 0));
  }
  // A CPU cluster's ranks hold their checkpoints in host memory already.
  const std::int64_t on_cpu = for_each_tiny_plan(
      Engine::deepspeed, [](const Plan& p, const Transformer&, const Cluster&) { CHECK_FALSE(p.cpu_checkpointing); },
      "local-cpu");
  CHECK(on_cpu > 0);
}

TEST_CASE("megatron's sequence-parallel plans overlap their TP communication where Transformer Engine runs",
          "[tuner][space][tp_overlap]") {
  // On A100s megatron's SP plans carry the overlap, no other engine's; on V100s
  // (no Transformer Engine) nobody's. The space is the same size either way.
  for (const char* cluster : {"dgx-a100-80gb", "v100-workstation"})
  for (Engine e : kEngines) {
    std::int64_t sp = 0, overlapped = 0;
    for_each_tiny_plan(e, [&](const Plan& p, const Transformer& m, const Cluster& c) {
      sp += p.sequence_parallel ? 1 : 0;
      if (!p.tp_comm_overlap) return;
      ++overlapped;
      CHECK(p.sequence_parallel);
      CHECK_FALSE(check_plan(p, m, c).has_value());
      // The engine's rules reject the plan exactly as they would without the overlap.
      Plan plain = p;
      plain.tp_comm_overlap = false;
      CHECK(engine_violation(p, e) == engine_violation(plain, e));
    }, cluster);
    INFO(cluster << " " << to_string(e));
    CHECK(sp > 0);
    CHECK(overlapped == (e == Engine::megatron && std::string(cluster) == "dgx-a100-80gb" ? sp : 0));
  }
}

// Context parallelism (issue 19) as a layout dimension: dp × tp × cp × pp = devices.
TEST_CASE("context parallelism: searched from 8k tokens or with --max-cp, --cp pins it", "[tuner][space][cp]") {
  Transformer m = load_transformer("tiny");  // 64 tokens, 4 layers, global batch 16
  Cluster c = load_cluster("v100-workstation");
  c.node.gpus = 4;
  // ztune's executor runs cp on its CPU backend (on GPUs the ztune engine has
  // none: test_search.cpp); these ranks are that backend's.
  c.device_kind = DeviceKind::cpu;
  auto cps = [](const SearchSpace& s) {
    std::set<int> out;
    for (const auto& l : s.layouts()) out.insert(l.cp);
    return out;
  };
  // Below kContextParallelMinSeq the default space is the one before cp existed.
  CHECK(cps(SearchSpace(m, c, SpaceOptions{})) == std::set<int>{1});
  SpaceOptions o;
  o.max_cp = 4;
  const SearchSpace s(m, c, o);
  CHECK(cps(s) == std::set<int>{1, 2, 4});
  // Every plan valid, distinct, on dp·tp·cp·pp devices; cp plans without offload, 1-bit Adam, ZeRO++.
  std::set<std::string> seen;
  std::int64_t n = 0, with_cp = 0;
  for (const auto& l : s.layouts()) {
    CHECK(l.dp * l.tp * l.cp * l.pp == l.gpus);
    if (l.rejected != LayoutRule::none) continue;
    s.for_each_plan(l, [&](const Plan& p) {
      ++n;
      with_cp += p.cp > 1;
      CHECK(p.cp == l.cp);
      CHECK_FALSE(check_plan(p, m, c).has_value());
      if (p.cp > 1) CHECK(p.offload_optimizer == OffloadTarget::none);
      CHECK(static_cast<std::int64_t>(p.micro_batch) * p.grad_accum * p.dp == p.global_batch);
      seen.insert(plan_to_json(p).dump());
    });
    CHECK(l.plans > 0);
  }
  CHECK(with_cp > 0);
  CHECK(seen.size() == static_cast<std::size_t>(n));
  // A pin: only cp 2; one that cannot cut the sequence into 2·cp chunks is refused naming --cp.
  o.cp = 2;
  CHECK(cps(SearchSpace(m, c, o)) == std::set<int>{2});
  o.cp = 3;
  CHECK_THROWS_WITH(SearchSpace(m, c, o), Catch::Matchers::Contains("--cp: 3") &&
                                               Catch::Matchers::Contains("do not divide the sequence length 64"));
  // From 8k tokens the default space has cp up to a node's worth.
  Transformer longer = m;
  longer.seq_len = 8192;
  c.node.gpus = 8;
  CHECK(cps(SearchSpace(longer, c, SpaceOptions{})) == std::set<int>{1, 2, 4, 8});
  SpaceOptions off;
  off.max_cp = 1;
  CHECK(cps(SearchSpace(longer, c, off)) == std::set<int>{1});
}

TEST_CASE("a pinned ZeRO stage the pinned pipeline cannot run is refused up front, naming why",
          "[tuner][space]") {
  // It had searched nothing and said "no plan fits", offering more GPUs.
  const Transformer m = load_transformer("tiny");
  Cluster c = load_cluster("v100-workstation");
  c.node.gpus = 4;
  SpaceOptions o;
  o.pp = 2;
  o.zero_stage = 2;
  CHECK_THROWS_WITH(SearchSpace(m, c, o),
                    Catch::Matchers::StartsWith("--zero: stage 2 partitions gradients per micro-batch"));
  o.zero_stage = 3;
  CHECK_NOTHROW(SearchSpace(m, c, o));  // ztune's executor holds ZeRO-3 through the step under a pipeline
  o.engine = Engine::deepspeed;
  CHECK_THROWS_WITH(SearchSpace(m, c, o),
                    Catch::Matchers::StartsWith("--zero 3 with --pp 2: DeepSpeed's pipeline engine supports ZeRO stage "
                                                "0 or 1 only"));
  o.zero_stage = 1;
  CHECK_NOTHROW(SearchSpace(m, c, o));
}

// DeepSpeed-Ulysses (issue 19 item 3) as a layout dimension: dp × tp × ulysses × pp = devices.
TEST_CASE("ulysses: searched from 8k tokens or with --max-ulysses, --ulysses pins it, not for megatron/fsdp",
          "[tuner][space][ulysses]") {
  Transformer m = load_transformer("tiny");  // 64 tokens, 4 heads, 4 layers, global batch 16
  Cluster c = load_cluster("v100-workstation");
  c.node.gpus = 4;
  c.device_kind = DeviceKind::cpu;  // ztune's executor runs Ulysses on its CPU backend
  auto us = [](const SearchSpace& s) {
    std::set<int> out;
    for (const auto& l : s.layouts()) out.insert(l.ulysses);
    return out;
  };
  CHECK(us(SearchSpace(m, c, SpaceOptions{})) == std::set<int>{1});
  SpaceOptions o;
  o.max_ulysses = 4;
  const SearchSpace s(m, c, o);
  CHECK(us(s) == std::set<int>{1, 2, 4});
  std::set<std::string> seen;
  std::int64_t n = 0, with_u = 0;
  for (const auto& l : s.layouts()) {
    CHECK(l.dp * l.tp * l.cp * l.ulysses * l.pp == l.gpus);
    CHECK((l.cp == 1 || l.ulysses == 1));
    // tp × ulysses divides the 4 heads.
    CHECK(4 % (l.tp * l.ulysses) == 0);
    if (l.rejected != LayoutRule::none) continue;
    s.for_each_plan(l, [&](const Plan& p) {
      ++n;
      with_u += p.ulysses > 1;
      CHECK(p.ulysses == l.ulysses);
      CHECK_FALSE(check_plan(p, m, c).has_value());
      if (p.ulysses > 1) {
        CHECK_FALSE(p.sequence_parallel);
        CHECK_FALSE(p.onebit_adam);
        CHECK_FALSE(p.zeropp);
      }
      seen.insert(plan_to_json(p).dump());
    });
  }
  CHECK(with_u > 0);
  CHECK(seen.size() == static_cast<std::size_t>(n));
  o.ulysses = 2;
  CHECK(us(SearchSpace(m, c, o)) == std::set<int>{2});
  {
    // With context parallelism in the space too (--max-cp) the pin had been
    // dropped for every cp layout: Ulysses 1, no word. Every layout keeps it.
    SpaceOptions both = o;
    both.max_cp = 4;
    const SearchSpace pinned(m, c, both);
    CHECK(us(pinned) == std::set<int>{2});
    for (const auto& l : pinned.layouts()) CHECK(l.cp == 1);
  }
  o.ulysses = 3;
  CHECK_THROWS_WITH(SearchSpace(m, c, o), Catch::Matchers::Contains("--ulysses: 3") &&
                                               Catch::Matchers::Contains("sequence length 64"));
  o.ulysses = 2;
  o.engine = Engine::megatron;
  CHECK_THROWS_WITH(SearchSpace(m, c, o), Catch::Matchers::Contains("--ulysses") &&
                                               Catch::Matchers::Contains("megatron"));
  // Megatron-LM and FSDP search no Ulysses, whatever the bound.
  SpaceOptions mg;
  mg.engine = Engine::fsdp;
  mg.max_ulysses = 4;
  CHECK(us(SearchSpace(m, c, mg)) == std::set<int>{1});
  // From 8k tokens the default space has Ulysses up to a node's worth; --max-ulysses 1 turns it off.
  Transformer longer = m;
  longer.seq_len = 8192;
  c.node.gpus = 8;
  CHECK(us(SearchSpace(longer, c, SpaceOptions{})) == std::set<int>{1, 2, 4});  // 4 heads bound it
  SpaceOptions off;
  off.max_ulysses = 1;
  CHECK(us(SearchSpace(longer, c, off)) == std::set<int>{1});
}

TEST_CASE("hybrid sharding: ZeRO-3 shard groups of a node's ranks where dp spans nodes, --dp-shard pins it",
          "[tuner][space][hsdp]") {
  Transformer m = load_transformer("tiny");  // global batch 16
  Cluster c = load_cluster("v100-workstation");
  c.node.gpus = 4;
  c.nodes = 4;  // 16 ranks
  c.device_kind = DeviceKind::cpu;  // ztune's executor runs hybrid sharding on its CPU backend
  SpaceOptions o;
  o.min_gpus = o.max_gpus = 16;
  const SearchSpace s(m, c, o);
  std::set<std::string> seen;
  std::int64_t n = 0;
  std::set<std::pair<int, int>> shards;  // (dp × cp, dp_shard) seen
  for (const auto& l : s.layouts()) {
    if (l.rejected != LayoutRule::none) continue;
    s.for_each_plan(l, [&](const Plan& p) {
      ++n;
      CHECK_FALSE(check_plan(p, m, c).has_value());
      seen.insert(plan_to_json(p).dump());
      if (p.dp_shard > 0) {
        CHECK(p.zero_stage == 3);
        CHECK(p.offload_optimizer == OffloadTarget::none);
        shards.insert({p.dp_cp(), p.dp_shard});
      }
    });
  }
  CHECK(seen.size() == static_cast<std::size_t>(n));
  // dp 16 (tp 1): one node's 4 ranks and two nodes' 8; dp 8 on tp 2: a node's 2 and 4;
  // dp 4 with tp 4 fills one rank per node: groups of 2 (two nodes' worth).
  CHECK(shards.count({16, 4}) == 1);
  CHECK(shards.count({16, 8}) == 1);
  CHECK(shards.count({8, 2}) == 1);
  CHECK(shards.count({8, 4}) == 1);
  for (const auto& [group, shard] : shards) CHECK(shard < group);
  // The pin keeps only that group size.
  o.dp_shard = 8;
  const SearchSpace pinned(m, c, o);
  std::int64_t k = 0;
  for (const auto& l : pinned.layouts()) {
    if (l.rejected != LayoutRule::none) continue;
    pinned.for_each_plan(l, [&](const Plan& p) {
      ++k;
      CHECK(p.dp_shard == 8);
    });
  }
  CHECK(k > 0);
  o.dp_shard = 1;
  CHECK_THROWS_WITH(SearchSpace(m, c, o), Catch::Matchers::Contains("--dp-shard: expected a shard group of 2"));
  o.dp_shard = 4;
  o.zero_stage = 2;
  CHECK_THROWS_WITH(SearchSpace(m, c, o), Catch::Matchers::Contains("--dp-shard") &&
                                              Catch::Matchers::Contains("needs --zero 3"));
  // On one node there is nothing to replicate across: no hybrid plans by default.
  Cluster one = c;
  one.nodes = 1;
  SpaceOptions d;
  const SearchSpace single(m, one, d);
  for (const auto& l : single.layouts()) CHECK(single.shard_group_sizes(l).empty());
}

TEST_CASE("the fsdp engine's selective recomputation is torchtitan's op-level SAC, with any kernel",
          "[tuner][space][recompute]") {
  // torchtitan's selective checkpointing saves every other matmul: it drops
  // GEMM outputs, so (unlike Korthikanti's attention core) it goes with flash.
  // Oracle: the megatron space of the same layouts, where flash has 2 recompute
  // modes; fsdp's flash has all 3, and no layout holds fewer plans.
  const Transformer m = tiny_head64();
  Cluster c = load_cluster("dgx-a100-80gb");
  c.node.gpus = 2;
  SpaceOptions o;
  o.engine = Engine::fsdp;
  o.attention = AttentionKernel::flash;
  const SearchSpace fsdp(m, c, o);
  std::int64_t selective = 0, n = 0;
  for (const auto& l : fsdp.layouts())
    fsdp.for_each_plan(l, [&](const Plan& p) {
      ++n;
      CHECK_FALSE(check_plan(p, m, c).has_value());
      if (p.recompute == Recompute::selective) {
        ++selective;
        CHECK(p.recompute_policy == SelectivePolicy::alternate_mm);
      } else {
        CHECK(p.recompute_policy == SelectivePolicy::attention);
      }
    });
  CHECK(n == fsdp.size());
  CHECK(selective > 0);
  CHECK(selective * 3 == n);  // one of the three modes, the others unchanged
  o.engine = Engine::megatron;
  const SearchSpace mg(m, c, o);
  for (const auto& l : mg.layouts())
    mg.for_each_plan(l, [&](const Plan& p) { CHECK(p.recompute != Recompute::selective); });
}

// ZeRO-3 under a pipeline (Plan::zero3_held_through_step) is FSDP2's under
// torch.distributed.pipelining, and ztune's executor runs it; DeepSpeed's
// pipeline engine and Megatron-LM refuse it (engine_violation), so their
// spaces never hold it. Oracle: the engines' own rules, asked per plan.
TEST_CASE("ZeRO-3 under a pipeline is searched where the engine runs it", "[tuner][space][pipeline]") {
  const Transformer m = load_transformer("tiny");
  const Cluster c = load_cluster("dgx-h100");
  for (Engine e : {Engine::ztune, Engine::fsdp, Engine::deepspeed, Engine::megatron}) {
    SpaceOptions o;
    o.engine = e;
    const SearchSpace s(m, c, o);
    std::int64_t held = 0;
    for (const auto& l : s.layouts()) {
      if (l.rejected != LayoutRule::none) continue;
      s.for_each_plan(l, [&](const Plan& p) {
        if (!p.zero3_held_through_step()) return;
        ++held;
        CHECK_FALSE(check_plan(p, m, c).has_value());
        CHECK_FALSE(engine_violation(p, e).has_value());
      });
    }
    INFO(to_string(e));
    CHECK((held > 0) == (e == Engine::ztune || e == Engine::fsdp));
  }
}

// Megatron-LM's ZeRO-2/3 is Megatron-FSDP: priced and exported without a
// pipeline, searched only when --zero pins it (a megatron search otherwise
// keeps to the distributed optimizer its published runs use).
TEST_CASE("megatron searches Megatron-FSDP only when --zero pins it, never under a pipeline", "[tuner][space]") {
  const Transformer m = load_transformer("tiny");
  const Cluster c = load_cluster("dgx-h100");
  for (const std::optional<int> pin : {std::optional<int>{}, std::optional<int>{3}}) {
    SpaceOptions o;
    o.engine = Engine::megatron;
    o.zero_stage = pin;
    const SearchSpace s(m, c, o);
    std::int64_t sharded = 0;
    for (const auto& l : s.layouts()) {
      if (l.rejected != LayoutRule::none) continue;
      s.for_each_plan(l, [&](const Plan& p) {
        if (p.zero_stage < 2) return;
        ++sharded;
        if (!engine_violation(p, Engine::megatron)) CHECK(p.pp == 1);
      });
    }
    INFO("--zero " << (pin ? std::to_string(*pin) : "unpinned"));
    CHECK((sharded > 0) == pin.has_value());
  }
}

// FP8 GEMMs need operand dimensions in multiples of 16, a rule of tp alone:
// the layouts whose per-rank weights break it are pruned as layouts, under a
// reason of their own (they had been counted as "plan rejected by check_plan",
// the generator-mismatch bucket). Turing-NLG 17B: hidden 4256 = 16·266, so tp
// 2 keeps 2128 = 16·133 and tp 4 leaves 1064 = 16·66.5.
TEST_CASE("FP8: layouts whose tp leaves weight dims off multiples of 16 are pruned by their own reason",
          "[tuner][space][fp8]") {
  const Transformer m = load_transformer("turing-nlg-17b");
  const Cluster c = load_cluster("dgx-h100x4");
  SpaceOptions o;
  o.engine = Engine::megatron;
  o.fp8 = Fp8Recipe::delayed;
  const SearchSpace s(m, c, o);
  int tp2 = 0, tp4 = 0;
  for (const auto& l : s.layouts()) {
    if (l.tp == 2 && l.rejected == LayoutRule::none) ++tp2;
    if (l.tp == 4) {
      CHECK(l.rejected == LayoutRule::fp8_shape);
      ++tp4;
    }
  }
  CHECK(tp2 > 0);
  CHECK(tp4 > 0);
  CHECK(prune_reason_name(PruneReason::fp8_shape) == "FP8 needs each tp rank's weight dimensions in multiples of 16");
}

// FlashAttention-2 and cuDNN's fused attention take head sizes that are
// multiples of 8 up to 256 (flash_attn: "FlashAttention forward only supports
// head dimension at most 256"); beyond them PyTorch's SDPA runs its math
// kernel, which stores the s×s scores. The engines' searches had priced a
// fused kernel for head sizes 205 and 512.
TEST_CASE("the engines' fused attention takes head sizes that are multiples of 8 up to 256", "[tuner][space][flash]") {
  const Cluster c = load_cluster("dgx-h100");
  Transformer m = load_transformer("llama-7b");  // 32 heads of 128
  CHECK(engine_runs_flash(Engine::fsdp, m, c));
  for (const auto& [hidden, heads, takes] : {std::tuple{4096, 8, false},    // 512
                                             std::tuple{6560, 32, false},   // 205
                                             std::tuple{4352, 32, true},    // 136
                                             std::tuple{8192, 32, true}}) { // 256
    m.hidden = hidden;
    m.heads = m.kv_heads = heads;
    INFO("head size " << m.head_dim());
    CHECK(fused_kernels_take_head(m) == takes);
    for (Engine e : {Engine::fsdp, Engine::megatron, Engine::deepspeed}) {
      CHECK(engine_runs_flash(e, m, c) == takes);
      SpaceOptions o;
      o.engine = e;
      SearchSpace space(m, c, o);
      for (const auto& choice : space.attention_choices())
        if (!takes) CHECK(choice.kernel == AttentionKernel::standard);
    }
  }
}

TEST_CASE("a pinned recomputation: the space is exactly the unpinned space's plans of that mode",
          "[tuner][space][recompute]") {
  // Oracle: the unpinned space, split by its plans' recompute mode. The three
  // pinned spaces partition it, plan for plan, size for size, on every engine.
  const Transformer m = load_transformer("tiny");
  Cluster c = load_cluster("v100-workstation");
  c.node.gpus = 2;
  for (Engine e : kEngines) {
    SpaceOptions o;
    o.engine = e;
    const SearchSpace all(m, c, o);
    std::map<Recompute, std::vector<std::string>> by_mode;
    for (const auto& l : all.layouts())
      if (l.rejected == LayoutRule::none)
        all.for_each_plan(l, [&](const Plan& p) { by_mode[p.recompute].push_back(p.summary()); });
    std::int64_t pinned_sizes = 0;
    for (Recompute rc : kRecomputeModes) {
      o.recompute = rc;
      const SearchSpace pinned(m, c, o);
      pinned_sizes += pinned.size();
      std::vector<std::string> seen;
      for (const auto& l : pinned.layouts())
        if (l.rejected == LayoutRule::none)
          pinned.for_each_plan(l, [&](const Plan& p) { seen.push_back(p.summary()); });
      INFO(to_string(e) << " --recompute " << to_string(rc));
      CHECK(seen == by_mode[rc]);
    }
    CHECK(pinned_sizes == all.size());
  }
}

TEST_CASE("search without sequence parallelism or TP overlap: the unpinned space less those plans, or without overlap",
          "[tuner][space][tp_overlap]") {
  // Oracle: the unpinned space. Without sequence parallelism it is exactly
  // the unpinned space's plans that have none, in order; without the overlap
  // it is the unpinned space with every plan's overlap off (megatron on A100s,
  // where the overlap rides on the sequence-parallel plans).
  const Transformer m = load_transformer("tiny");
  Cluster c = load_cluster("dgx-a100-80gb");
  c.node.gpus = 2;
  auto plans_of = [&](const SpaceOptions& o) {
    const SearchSpace s(m, c, o);
    std::vector<Plan> out;
    for (const auto& l : s.layouts())
      if (l.rejected == LayoutRule::none) s.for_each_plan(l, [&](const Plan& p) { out.push_back(p); });
    CHECK(static_cast<std::int64_t>(out.size()) <= s.size());
    return std::make_pair(out, s.size());
  };
  for (Engine e : kEngines) {
    INFO(to_string(e));
    SpaceOptions o;
    o.engine = e;
    const auto [all, all_size] = plans_of(o);
    std::vector<std::string> without_sp;
    std::int64_t sp = 0;
    for (const Plan& p : all) {
      if (p.sequence_parallel) ++sp;
      else without_sp.push_back(p.summary());
    }
    CHECK(sp > 0);
    SpaceOptions no_sp = o;
    no_sp.sequence_parallel = false;
    const auto [pinned, pinned_size] = plans_of(no_sp);
    std::vector<std::string> seen;
    for (const Plan& p : pinned) seen.push_back(p.summary());
    CHECK(seen == without_sp);
    CHECK(pinned_size == all_size - sp);
    SpaceOptions no_overlap = o;
    no_overlap.tp_comm_overlap = false;
    const auto [plain, plain_size] = plans_of(no_overlap);
    REQUIRE(plain.size() == all.size());
    CHECK(plain_size == all_size);
    std::int64_t overlapped = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      CHECK_FALSE(plain[i].tp_comm_overlap);
      overlapped += all[i].tp_comm_overlap ? 1 : 0;
      Plan expected = all[i];
      expected.tp_comm_overlap = false;
      CHECK(plain[i].summary() == expected.summary());
    }
    CHECK(overlapped == (e == Engine::megatron ? sp : 0));
  }
}

TEST_CASE("FSDP's hybrid sharding with CPU offload is in the fsdp engine's space, and only there",
          "[tuner][space][hsdp]") {
  // HYBRID_SHARD with CPUOffload (parameters and optimizer on the host): the
  // fsdp engine runs it; ztune's executor keeps hybrid-sharded states on the
  // device (engine rule zt_hybrid_offload), the other engines have no hybrid.
  const Transformer m = load_transformer("llama-70b");
  Cluster c = load_cluster("dgx-h100x4");  // 32 H100 on 4 nodes
  SpaceOptions o;
  o.engine = Engine::fsdp;
  o.dp_shard = 8;
  o.global_batch = 64;
  const SearchSpace s(m, c, o);
  std::int64_t n = 0, offloaded = 0;
  for (const auto& l : s.layouts()) {
    if (l.rejected != LayoutRule::none) continue;
    std::int64_t in_layout = 0;
    s.for_each_plan(l, [&](const Plan& p) {
      ++n;
      ++in_layout;
      CHECK(p.dp_shard == 8);
      CHECK_FALSE(check_plan(p, m, c).has_value());
      if (p.offload_optimizer != OffloadTarget::none) {
        ++offloaded;
        CHECK(p.offload_params == OffloadTarget::cpu);  // FSDP moves both
        CHECK_FALSE(engine_violation(p, Engine::fsdp, c).has_value());
        CHECK(engine_violation(p, Engine::ztune, c).has_value());
      }
    });
    CHECK(in_layout == l.plans);  // counted as enumerated
  }
  CHECK(n > 0);
  CHECK(offloaded > 0);
  // The ztune engine's space on CPUs has hybrid sharding, never with offload.
  c.device_kind = DeviceKind::cpu;
  o.engine = Engine::ztune;
  const SearchSpace z(m, c, o);
  for (const auto& l : z.layouts())
    if (l.rejected == LayoutRule::none)
      z.for_each_plan(l, [&](const Plan& p) { CHECK(p.offload_optimizer == OffloadTarget::none); });
}
