// DeepSpeed's model-state estimators (model/deepspeed_estimate.hpp) against
// the figures DeepSpeed itself printed and against their closed forms worked by
// hand here.
#include <catch2/catch.hpp>

#include "cost_model_fixtures.hpp"
#include "ztune/model/deepspeed_estimate.hpp"

using namespace ztune;

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
double gib(double bytes) { return bytes / kGiB; }
}  // namespace

TEST_CASE("ZeRO-3 estimator: DeepSpeed's printed table for t5-small on one GPU", "[memory][deepspeed]") {
  // estimate_zero3_model_states_mem_needs_all_live(t5-small, 1 GPU, 1 node) as
  // printed (blog.csdn.net/u012327567/article/details/132278598): "60M total
  // params, 16M largest layer params"; t5-small has 60,506,624 parameters and
  // its shared embedding 32,128 × 512 = 16,449,536. The table prints GB = 2^30
  // bytes to two decimals: per CPU | per GPU.
  const double total = 60506624, largest = 32128.0 * 512;
  struct Row {
    bool opt_cpu, params_cpu, zero_init;
    double cpu_gib, gpu_gib;
  };
  for (const Row& r : {Row{true, true, true, 1.52, 0.06}, Row{true, true, false, 1.52, 0.06},
                       Row{true, false, true, 1.35, 0.17}, Row{true, false, false, 1.35, 0.17},
                       Row{false, false, true, 0.09, 1.08}, Row{false, false, false, 0.34, 1.08}}) {
    const auto e = deepspeed_zero3_estimate(total, largest, 1, 1, r.opt_cpu, r.params_cpu, r.zero_init);
    CAPTURE(r.opt_cpu, r.params_cpu, r.zero_init);
    CHECK(gib(e.host_bytes_per_node) == Approx(r.cpu_gib).margin(0.005));
    CHECK(gib(e.gpu_bytes) == Approx(r.gpu_gib).margin(0.005));
  }
}

TEST_CASE("ZeRO-3 estimator: closed forms on 2 nodes of 8 GPUs", "[memory][deepspeed]") {
  const double psi = 1e9, largest = 1e8;  // 16 GPUs, 2 nodes
  auto e = deepspeed_zero3_estimate(psi, largest, 8, 2, false, false, true);
  CHECK(e.gpu_bytes == 1525000000LL);  // 4·largest + 18Ψ/16
  CHECK(e.host_bytes_per_node == 4800000000LL);         // largest · 4 · 8 · 1.5
  e = deepspeed_zero3_estimate(psi, largest, 8, 2, false, false, false);
  CHECK(e.host_bytes_per_node == 48000000000LL);        // Ψ · 4 · 8 · 1.5
  e = deepspeed_zero3_estimate(psi, largest, 8, 2, true, false, true);
  CHECK(e.gpu_bytes == 525000000LL);  // 4·largest + 2Ψ/16
  CHECK(e.host_bytes_per_node == 12000000000LL);        // Ψ · 16 / 2 nodes · 1.5
  e = deepspeed_zero3_estimate(psi, largest, 8, 2, true, true, true);
  CHECK(e.gpu_bytes == 400000000);                    // the largest layer alone
  CHECK(e.host_bytes_per_node == 13500000000LL);        // Ψ · 18 / 2 · 1.5
  e = deepspeed_zero3_estimate(psi, largest, 8, 2, true, true, false);
  CHECK(e.host_bytes_per_node == 48000000000LL);        // Ψ · max(4·8, 18/2) · 1.5
}

TEST_CASE("ZeRO-2 estimator: closed forms, truncated as Python's int()", "[memory][deepspeed]") {
  const double psi = 1e9;
  auto e = deepspeed_zero2_estimate(psi, 8, 2, false);
  CHECK(e.gpu_bytes == 3125000000LL);  // 2Ψ + 18Ψ/16
  CHECK(e.host_bytes_per_node == 48000000000LL);    // Ψ · 4 · 8 · 1.5
  e = deepspeed_zero2_estimate(psi, 8, 2, true);
  CHECK(e.gpu_bytes == 2000000000LL);               // 2Ψ
  CHECK(e.host_bytes_per_node == 96000000000LL);    // Ψ · max(4·16, 16) · 1.5
  e = deepspeed_zero2_estimate(psi, 1, 1, true);
  CHECK(e.host_bytes_per_node == 24000000000LL);    // Ψ · max(4, 16) · 1.5
  // 2·1 + int(18·1/7 = 2.57): each term truncated, as the estimator does.
  CHECK(deepspeed_zero2_estimate(1, 7, 1, false).gpu_bytes == 2 + 2);
  // A billion GPUs: Ψ · 4 · 1.024e9 · 1.5 passes 2^63; Python's int holds it, and so does the estimate.
  e = deepspeed_zero2_estimate(6.74e9, 1024, 1000000, true);
  CHECK(e.host_bytes_per_node == Approx(6.74e9 * 4 * 1.024e9 * 1.5));
}

TEST_CASE("DeepSpeed's largest layer on Megatron-style modules", "[memory][deepspeed]") {
  // GPT-2 shape: the 50,257 × 1,600 token embedding beats FC1 (1,600 × 6,400 + 6,400).
  Transformer m = test::gpt(48, 1600, 25, 1024, 50257);
  auto l = deepspeed_largest_module(m);
  CHECK(l.name == "token embedding");
  CHECK(l.params == 50257.0 * 1600);
  // A small vocabulary: FC1 with its bias, h·f + f.
  m.vocab = 1000;
  l = deepspeed_largest_module(m);
  CHECK(l.name == "FC1");
  CHECK(l.params == 1600.0 * m.ffn_hidden + m.ffn_hidden);
}

// A Hugging Face Llama model's modules: q_proj, k_proj, v_proj, gate_proj and
// up_proj are modules of their own, so Llama 2 70B's largest is its 32,000 ×
// 8,192 embedding (262.1 M), not the fused gate and up projection Megatron-LM
// holds (2 × 8,192 × 28,672 = 469.8 M).
TEST_CASE("DeepSpeed's largest layer on a Hugging Face Llama's separate projections", "[memory][deepspeed]") {
  Transformer m = load_transformer("llama-70b");
  CHECK(deepspeed_largest_module(m).params == Approx(2.0 * 8192 * 28672));
  const auto hf = deepspeed_largest_module(m, true);
  CHECK(hf.name == "token embedding");
  CHECK(hf.params == Approx(32000.0 * 8192));
  m.vocab = 1000;  // then gate_proj, 8,192 × 28,672
  CHECK(deepspeed_largest_module(m, true).params == Approx(8192.0 * 28672));
}
