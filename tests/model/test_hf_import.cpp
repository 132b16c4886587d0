#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ztune/model/hf_import.hpp"
#include "ztune/model/input_error.hpp"

TEST_CASE("GPT-2 XL config imports to 1.56B parameters", "[hf]") {
  // Hugging Face gpt2-xl config.json fields (published model card: 1.5B parameters).
  auto doc = nlohmann::json::parse(R"({"model_type": "gpt2", "n_layer": 48, "n_embd": 1600, "n_head": 25,
      "vocab_size": 50257, "n_positions": 1024, "n_inner": null, "activation_function": "gelu_new"})");
  auto t = ztune::transformer_from_hf_config(doc, "gpt2-xl/config.json", 0);
  CHECK(t.layers == 48);
  CHECK(t.ffn_hidden == 6400);
  CHECK(t.total_params() == Approx(1557611200.0));  // HF's GPT2LMHeadModel.num_parameters()
}
