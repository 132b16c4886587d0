// Which plans ztune's executor can run (vocab/executor_support.hpp): the model
// shapes GptStage implements and the divisibility its tensor-parallel split
// needs, each refusal naming the field. Cases worked out by hand from the shapes.
#include <catch2/catch.hpp>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/executor_support.hpp"

using namespace ztune;

namespace {
Plan plan_for(int tp) {
  Plan p;
  p.tp = tp;
  p.micro_batch = 2;
  p.grad_accum = 1;
  p.global_batch = 2;
  p.precision = Precision::fp32;  // the CPU backend's
  return p;
}
}  // namespace

TEST_CASE("the executor runs Llama-shaped models, GQA split whole K/V heads per rank", "[executor_support]") {
  Transformer m = load_transformer("tiny-llama");  // 4 query heads, 2 K/V heads
  CHECK_FALSE(unsupported_reason(plan_for(1), m, 1).has_value());
  CHECK_FALSE(unsupported_reason(plan_for(2), m, 2).has_value());  // one K/V head per rank
  // tp 4 divides the 4 query heads but would split a K/V head.
  const auto r = unsupported_reason(plan_for(4), m, 4);
  REQUIRE(r.has_value());
  CHECK(r->find("$.plan.tp") == 0);
  CHECK(r->find("kv_heads 2") != std::string::npos);
}

TEST_CASE("the executor refuses a LayerNorm model without biases and an odd rotary head", "[executor_support]") {
  Transformer m = load_transformer("tiny");
  m.bias = false;
  auto r = unsupported_reason(plan_for(1), m, 1);
  REQUIRE(r.has_value());
  CHECK(r->find("$.model.bias") == 0);
  Transformer odd = load_transformer("tiny-llama");
  odd.hidden = 60;  // 4 heads of 15 channels: RoPE pairs channel i with i + hd/2
  r = unsupported_reason(plan_for(1), odd, 1);
  REQUIRE(r.has_value());
  CHECK(r->find("$.model.rotary_fraction") == 0);
  // Learned positions and the same odd head size are fine (nothing to pair).
  Transformer learned = odd;
  learned.position = PositionEmbedding::learned;
  CHECK_FALSE(unsupported_reason(plan_for(1), learned, 1).has_value());
  // Qwen2's Q/K/V-only biases run (the decoder NumPy reference checks them).
  Transformer qwen = load_transformer("tiny-llama");
  qwen.qkv_bias = true;
  CHECK_FALSE(unsupported_reason(plan_for(2), qwen, 2).has_value());
  // A sliding window runs on the CPU kernels (the decoder NumPy reference
  // checks it), not on CUDA's; one as long as the sequence is no window.
  Transformer mistral = load_transformer("tiny-llama");
  mistral.attention_window = mistral.seq_len / 2;
  CHECK_FALSE(unsupported_reason(plan_for(1), mistral, 1).has_value());
  Plan gpu = plan_for(1);
  gpu.precision = Precision::bf16;
  r = unsupported_reason(gpu, mistral, 1, ExecBackend::cuda);
  REQUIRE(r.has_value());
  CHECK(r->find("$.model.attention_window") == 0);
  mistral.attention_window = mistral.seq_len;
  CHECK_FALSE(unsupported_reason(gpu, mistral, 1, ExecBackend::cuda).has_value());
}

TEST_CASE("the executor turns part of each head (GPT-NeoX's rotary_pct) and trains parallel blocks",
          "[executor_support]") {
  Transformer m = load_transformer("tiny-llama");  // heads of 16 channels
  m.rotary_fraction = 0.25;                         // 4 channels: two pairs
  CHECK_FALSE(unsupported_reason(plan_for(1), m, 1).has_value());
  m.rotary_fraction = 0.125;  // 2 channels: one pair
  CHECK_FALSE(unsupported_reason(plan_for(1), m, 1).has_value());
  m.rotary_fraction = 0.0625;  // 1 channel: no pair
  auto r = unsupported_reason(plan_for(1), m, 1);
  REQUIRE(r.has_value());
  CHECK(r->find("$.model.rotary_fraction") == 0);
  m.rotary_fraction = 1;
  m.parallel_residual = true;  // GPT-NeoX's use_parallel_residual (gpt_block.cpp)
  CHECK_FALSE(unsupported_reason(plan_for(1), m, 1).has_value());
}

TEST_CASE("the executor refuses ALiBi and trains a model without positions", "[executor_support]") {
  Transformer m = load_transformer("tiny");
  m.position = PositionEmbedding::alibi;  // MPT-7B's attn_config.alibi
  const auto r = unsupported_reason(plan_for(1), m, 1);
  REQUIRE(r.has_value());
  CHECK(r->find("$.model.position_embedding") == 0);
  m.position = PositionEmbedding::none;  // causal attention alone: no wpe, no rotation
  CHECK_FALSE(unsupported_reason(plan_for(1), m, 1).has_value());
}


TEST_CASE("flash attention: any head size on the CPU, 64 or 128 on CUDA", "[executor_support][flash]") {
  Transformer m = load_transformer("tiny");  // head size 16
  Plan p = plan_for(1);
  p.attention = AttentionKernel::flash;
  CHECK_FALSE(unsupported_reason(p, m, 1, ExecBackend::cpu).has_value());
  p.precision = Precision::bf16;
  const auto r = unsupported_reason(p, m, 1, ExecBackend::cuda);
  REQUIRE(r.has_value());
  CHECK(r->find("$.plan.attention") == 0);
  CHECK(r->find("16") != std::string::npos);
  m.hidden = 256;  // head size 64
  m.ffn_hidden = 1024;
  CHECK_FALSE(unsupported_reason(p, m, 1, ExecBackend::cuda).has_value());
}

TEST_CASE("the executor trains uneven pipeline stages, interleaved when each stage cuts into the chunks",
          "[executor_support][stages]") {
  const auto m = load_transformer("tiny");  // 4 layers
  Plan p = plan_for(1);
  p.pp = 3;  // 2 + 1 + 1
  CHECK_FALSE(unsupported_reason(p, m, 3).has_value());
  p.stage_layers = {1, 2, 1};
  CHECK_FALSE(unsupported_reason(p, m, 3).has_value());
  p.stage_layers = {1, 2, 2};
  CHECK(unsupported_reason(p, m, 3).value().find("$.plan.stage_layers: the stages hold 5 layers") == 0);
  p.stage_layers.clear();
  p.pp = 5;
  CHECK(unsupported_reason(p, m, 5).value() == "$.plan.pp: 5 stages for 4 layers");
  p.pp = 3;
  p.schedule = Schedule::interleaved;
  p.virtual_stages = 2;
  p.grad_accum = 3;
  p.global_batch = 6;
  // The plan's own rule, re-rooted in the plan file.
  CHECK(unsupported_reason(p, m, 3).value().find("$.plan.virtual_stages: pp×virtual_stages = 6 does not divide the "
                                                 "model's 4 layers") == 0);
  // Uneven interleaved stages train when each stage cuts into the chunks: 2 + 2 + … (here 4 layers, pp 2, v 2).
  p.pp = 2;
  p.grad_accum = 2;
  p.global_batch = 4;
  p.stage_layers = {2, 2};
  CHECK_FALSE(unsupported_reason(p, m, 2).has_value());
  p.stage_layers = {3, 1};
  CHECK(unsupported_reason(p, m, 2).value().find("$.plan.stage_layers[0]: 3 layers do not cut") == 0);
}

TEST_CASE("DeepSpeed-Ulysses: the CPU backend with and without tp, CUDA refused naming $.plan.ulysses",
          "[executor_support][ulysses]") {
  Transformer m = load_transformer("tiny");  // 4 heads, 64 tokens
  Plan p = plan_for(1);
  p.ulysses = 2;
  CHECK_FALSE(unsupported_reason(p, m, 2, ExecBackend::cpu).has_value());
  const auto np = unsupported_reason(p, m, 4, ExecBackend::cpu);
  REQUIRE(np.has_value());
  CHECK(np->find("dp×tp×ulysses×pp = 1×1×2×1 = 2 ranks") != std::string::npos);
  p.precision = Precision::bf16;
  const auto cuda = unsupported_reason(p, m, 2, ExecBackend::cuda);
  REQUIRE(cuda.has_value());
  CHECK(cuda->find("$.plan.ulysses") == 0);
  CHECK(cuda->find("CUDA") != std::string::npos);
  p.precision = Precision::fp32;
  // tp 2 × ulysses 2: each tp rank's 2 heads over its Ulysses pair (equivalence.py tp2_ulysses2).
  Plan t = plan_for(2);
  t.ulysses = 2;
  CHECK_FALSE(unsupported_reason(t, m, 4, ExecBackend::cpu).has_value());
  // tp 2 × ulysses 4: 2 heads per tp rank do not split over 4 (the plan's own rule).
  t.ulysses = 4;
  const auto tp = unsupported_reason(t, m, 8, ExecBackend::cpu);
  REQUIRE(tp.has_value());
  CHECK(tp->find("$.plan.ulysses") == 0);
  // A degree the heads cannot split is the plan's own rule.
  p.ulysses = 8;
  const auto heads = unsupported_reason(p, m, 8, ExecBackend::cpu);
  REQUIRE(heads.has_value());
  CHECK(heads->find("ulysses") != std::string::npos);
}

TEST_CASE("the executor refuses Megatron's unfused bias switch, naming $.plan.bias_fusion", "[executor_support][fusion]") {
  Transformer m = load_transformer("tiny");
  Plan p = plan_for(1);
  CHECK_FALSE(unsupported_reason(p, m, 1).has_value());
  p.bias_fusion = false;
  const auto r = unsupported_reason(p, m, 1);
  REQUIRE(r.has_value());
  CHECK(r->find("$.plan.bias_fusion") == 0);
  CHECK(r->find("set it true") != std::string::npos);
}

TEST_CASE("gradients are kept in fp32 or the plan's own 16-bit type, and another type is refused", "[executor_support][grads]") {
  Transformer m = load_transformer("tiny");
  Plan p = plan_for(2);
  p.grad_reduce_dtype = Precision::fp32;
  CHECK_FALSE(unsupported_reason(p, m, 2).has_value());
  p.precision = Precision::bf16;  // 16-bit storage, fp32 gradients (Megatron's main_grad): both backends
  CHECK_FALSE(unsupported_reason(p, m, 2, ExecBackend::cpu).has_value());
  CHECK_FALSE(unsupported_reason(p, m, 2, ExecBackend::cuda).has_value());
  p.grad_reduce_dtype = Precision::bf16;  // the plan's own type
  CHECK_FALSE(unsupported_reason(p, m, 2).has_value());
  p.grad_reduce_dtype = Precision::fp16;  // another 16-bit type
  auto r = unsupported_reason(p, m, 2);
  REQUIRE(r.has_value());
  CHECK(r->find("$.plan.communication.grad_reduce_dtype") == 0);
  CHECK(r->find("\"fp16\"") != std::string::npos);
  p.precision = Precision::fp32;  // an fp32 plan reduced in 16 bits
  r = unsupported_reason(p, m, 2);
  REQUIRE(r.has_value());
  CHECK(r->find("\"fp32\"") != std::string::npos);
}

TEST_CASE("16-bit storage trains on the CPU backend, except 1-bit Adam and NVMe parameters", "[executor_support][precision]") {
  Transformer m = load_transformer("tiny");
  Plan p = plan_for(1);
  for (Precision x : {Precision::bf16, Precision::fp16}) {
    p.precision = x;
    CHECK_FALSE(unsupported_reason(p, m, 1, ExecBackend::cpu).has_value());
  }
  Plan onebit = plan_for(2);
  onebit.onebit_adam = true;
  CHECK_FALSE(unsupported_reason(onebit, m, 2).has_value());
  onebit.precision = Precision::bf16;
  auto r = unsupported_reason(onebit, m, 2);
  REQUIRE(r.has_value());
  CHECK(r->find("$.plan.precision") == 0);
  CHECK(r->find("1-bit Adam") != std::string::npos);
}

TEST_CASE("ztune's executor keeps 16-bit optimizer states but no master remainders, naming the field",
          "[executor_support][optimizer]") {
  const Transformer m = load_transformer("tiny");
  Plan p;
  p.precision = Precision::bf16;
  CHECK_FALSE(unsupported_reason(p, m, 1).has_value());
  p.master_dtype = Precision::bf16;
  p.moments_dtype = Precision::bf16;
  CHECK_FALSE(unsupported_reason(p, m, 1).has_value());
  p.master_dtype = Precision::fp32;
  p.param_remainders = true;
  const auto why = unsupported_reason(p, m, 1);
  REQUIRE(why.has_value());
  CHECK_THAT(*why, Catch::Contains("$.plan.optimizer.param_remainders") && Catch::Contains("whole"));
}
