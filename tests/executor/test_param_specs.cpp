// Where a rank's layers and vocabulary rows come from, worked out by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ztune/executor/param_specs.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/vocab/catalog.hpp"

using namespace ztune;
using namespace ztune::executor;

TEST_CASE("interleaved stages hold every pp-th chunk of layers", "[executor][layout]") {
  // 8 layers, 2 stages × 2 chunks of 2 layers: virtual stages 0..3 are
  // (stage 0, chunk 0) [0,2), (1,0) [2,4), (0,1) [4,6), (1,1) [6,8)
  // (Narayanan et al. 2021, §2.2: a stage holds chunks p apart).
  Transformer m = load_transformer("tiny");
  m.layers = 8;
  const GroupShape shape{1, 1, 2, 2};
  const StageLayout s0 = stage_layout(m, shape, 0), s1 = stage_layout(m, shape, 1);
  CHECK(s0.layers() == 2);
  CHECK(s0.first_layer(0) == 0);
  CHECK(s0.first_layer(1) == 4);
  CHECK(s1.first_layer(0) == 2);
  CHECK(s1.first_layer(1) == 6);
  // Units in forward order: the embedding, then chunk 0's blocks, then chunk 1's; the head last.
  CHECK((s0.has_embedding && !s0.has_head && s0.units == 1 + 4));
  CHECK(s0.block_unit(0, 1) == 3);
  CHECK((!s1.has_embedding && s1.has_head && s1.units == 4 + 1 && s1.head_unit() == 4));
  // Stage 1's parameters name layers 2, 3, 6 and 7, and the tied copy of wte.
  int blocks = 0;
  for (const auto& p : param_specs(m, shape, {0, 0, 1})) {
    if (p.name.rfind("h.", 0) == 0 && p.name.find(".ln_1.weight") != std::string::npos) {
      const int layer = std::stoi(p.name.substr(2));
      CHECK((layer == 2 || layer == 3 || layer == 6 || layer == 7));
      ++blocks;
    }
  }
  CHECK(blocks == 4);
}

TEST_CASE("uneven stages hold their own runs of layers", "[executor][layout][stages]") {
  // 7 layers on 3 stages, balanced as DeepSpeed's partition_uniform: 3 + 2 + 2,
  // blocks [0,3), [3,5), [5,7); stated 1 + 4 + 2: [0,1), [1,5), [5,7).
  Transformer m = load_transformer("tiny");
  m.layers = 7;
  GroupShape shape{1, 1, 3, 1};
  CHECK(stage_layout(m, shape, 0).layers() == 3);
  CHECK(stage_layout(m, shape, 1).layers() == 2);
  CHECK(stage_layout(m, shape, 1).first_layer() == 3);
  CHECK(stage_layout(m, shape, 2).first_layer() == 5);
  shape.stage_layers = {1, 4, 2};
  const StageLayout s1 = stage_layout(m, shape, 1);
  CHECK(s1.layers() == 4);
  CHECK(s1.first_layer() == 1);
  CHECK((!s1.has_embedding && !s1.has_head && s1.units == 4));
  std::vector<int> layers;
  for (const auto& p : param_specs(m, shape, {0, 0, 1}))
    if (p.name.rfind("h.", 0) == 0 && p.name.find(".ln_1.weight") != std::string::npos)
      layers.push_back(std::stoi(p.name.substr(2)));
  CHECK(layers == std::vector<int>{1, 2, 3, 4});
  CHECK(stage_layout(m, shape, 2).first_layer() == 5);
  CHECK(stage_layout(m, shape, 2).units == 2 + 1);  // and the head
}

TEST_CASE("stated model chunks place Megatron-Core's short first and last chunks", "[executor][layout][stages]") {
  // Megatron-Core's --account-for-embedding/loss-in-pipeline-split with 2
  // stages × 2 chunks and 6 layers: 6 + 2 counted = 8, chunks of 2, the first
  // (beside the embedding) and the last (beside the loss) one short. Virtual
  // stages run 1 + 2 + 2 + 1 layers: [0,1) (stage 0, chunk 0), [1,3) (1, 0),
  // [3,5) (0, 1), [5,6) (1, 1) (transformer_layer.py
  // get_transformer_layer_offset: offset = vp·8/2 + pp·2, less the embedding).
  Transformer m = load_transformer("tiny");
  m.layers = 6;
  GroupShape shape{1, 1, 2, 2};
  shape.chunk_layers = chunk_layers_accounting(6, 2, 2, true, true);
  REQUIRE(shape.chunk_layers == std::vector<int>{1, 2, 2, 1});
  shape.stage_layers = stage_sums_of_chunks(shape.chunk_layers, 2);
  CHECK(shape.stage_layers == std::vector<int>{3, 3});
  const StageLayout s0 = stage_layout(m, shape, 0), s1 = stage_layout(m, shape, 1);
  CHECK((s0.layers(0) == 1 && s0.first_layer(0) == 0 && s0.layers(1) == 2 && s0.first_layer(1) == 3));
  CHECK((s1.layers(0) == 2 && s1.first_layer(0) == 1 && s1.layers(1) == 1 && s1.first_layer(1) == 5));
  // Units: stage 0 = embedding, block 0, blocks 3 and 4; stage 1 = blocks 1, 2, 5, head.
  CHECK((s0.units == 1 + 3 && s0.block_unit(0, 1) == 2));
  CHECK((s1.units == 3 + 1 && s1.block_unit(0, 1) == 2 && s1.head_unit() == 3));
  std::vector<int> layers;
  for (const auto& p : param_specs(m, shape, {0, 0, 1}))
    if (p.name.rfind("h.", 0) == 0 && p.name.find(".ln_1.weight") != std::string::npos)
      layers.push_back(std::stoi(p.name.substr(2)));
  CHECK(layers == std::vector<int>{1, 2, 5});
  // The 405B's shape in small: 2 layers + 2 on 2 × 2 chunks of 1, both ends empty.
  m.layers = 2;
  shape.chunk_layers = chunk_layers_accounting(2, 2, 2, true, true);
  REQUIRE(shape.chunk_layers == std::vector<int>{0, 1, 1, 0});
  shape.stage_layers = stage_sums_of_chunks(shape.chunk_layers, 2);
  const StageLayout e0 = stage_layout(m, shape, 0), e1 = stage_layout(m, shape, 1);
  CHECK((e0.layers(0) == 0 && e0.layers(1) == 1 && e0.first_layer(1) == 1 && e0.units == 1 + 1));
  CHECK((e1.layers(0) == 1 && e1.first_layer(0) == 0 && e1.layers(1) == 0 && e1.units == 1 + 1));
}

TEST_CASE("a vocabulary tp does not divide is split ceil(V/tp), the last rank the rest", "[executor][layout]") {
  // GPT-2's 50257 tokens over tp 4: ceil = 12565; 3 × 12565 = 37695; the last 12562.
  for (int r = 0; r < 3; ++r) {
    CHECK(vocab_range(50257, 4, r).begin == 12565 * r);
    CHECK(vocab_range(50257, 4, r).rows == 12565);
  }
  CHECK(vocab_range(50257, 4, 3).begin == 37695);
  CHECK(vocab_range(50257, 4, 3).rows == 12562);
  // Divisible: equal shares, as before.
  CHECK(vocab_range(256, 2, 1).begin == 128);
  CHECK(vocab_range(256, 2, 1).rows == 128);
}

// The tied embedding is found by its role (issue 22 item 5): the first stage's
// wte and, with a tied head on another stage, the last stage's copy carry it;
// nothing else does, and an untied head's output layer does not.
TEST_CASE("the word embedding and its tied copy carry the role the embedding group sums by", "[executor][layout]") {
  Transformer m = load_transformer("tiny");
  m.layers = 4;
  const GroupShape shape{1, 1, 2, 1};
  auto roles = [&](int stage) {
    std::vector<std::string> names;
    for (const auto& p : param_specs(m, shape, {0, 0, stage}))
      if (p.word_embedding) names.push_back(p.name + (p.tied_copy ? " (copy)" : ""));
    return names;
  };
  CHECK(roles(0) == std::vector<std::string>{"wte.weight"});
  CHECK(roles(1) == std::vector<std::string>{"wte.weight (copy)"});
  m.tied_embeddings = false;
  CHECK(roles(0) == std::vector<std::string>{"wte.weight"});
  CHECK(roles(1).empty());  // lm_head.weight is the output layer, not the embedding
}

// The cost model's count of a stage's parameter tensors (op_costs
// stage_parameter_tensors: the ops that loop over tensors, DeepSpeed's
// BF16_Optimizer fold and the CPU executor's sum_squares) against what the
// executor registers on its most loaded stage, for a GPT-2-shaped model
// (learned positions, LayerNorm, biases, tied head) and a Llama-shaped one
// (rotary, RMSNorm, no biases, untied head), on one stage, balanced and uneven
// pipelines, and interleaved ones.
TEST_CASE("the cost model counts a stage's parameter tensors as the executor registers them", "[executor][layout]") {
  for (const char* name : {"tiny", "tiny-llama"}) {
    Transformer m = load_transformer(name);
    m.layers = 8;
    for (int pp : {1, 2, 3, 4}) {
      for (int chunks : {1, 2}) {
        if (chunks > 1 && (pp < 2 || m.layers % (pp * chunks) != 0)) continue;
        Plan p;
        p.pp = pp;
        p.virtual_stages = chunks;
        const GroupShape shape{1, 1, pp, chunks};
        std::size_t most = 0;
        for (int stage = 0; stage < pp; ++stage) most = std::max(most, param_specs(m, shape, {0, 0, stage}).size());
        INFO(name << " pp " << pp << " chunks " << chunks);
        CHECK(stage_parameter_tensors(m, p) == static_cast<int>(most));
      }
    }
  }
}

