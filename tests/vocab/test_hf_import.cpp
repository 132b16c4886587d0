#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/vocab/hf_import.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/transformer.hpp"

TEST_CASE("GPT-2 XL config imports to 1.56B parameters", "[hf]") {
  // Hugging Face gpt2-xl config.json fields (published model card: 1.5B parameters).
  auto doc = nlohmann::json::parse(R"({"model_type": "gpt2", "n_layer": 48, "n_embd": 1600, "n_head": 25,
      "vocab_size": 50257, "n_positions": 1024, "n_inner": null, "activation_function": "gelu_new"})");
  auto t = ztune::transformer_from_hf_config(doc, "gpt2-xl/config.json", 0);
  CHECK(t.layers == 48);
  CHECK(t.ffn_hidden == 6400);
  CHECK(t.total_params() == Approx(1557611200.0));  // HF's GPT2LMHeadModel.num_parameters()
  // The name is the checkpoint's folder for a config.json, else the file's
  // stem: "./gpt2.json" had been named "." and "runs/gpt2.json" "runs".
  for (const auto& [file, name] : std::vector<std::pair<std::string, std::string>>{
           {"gpt2-xl/config.json", "gpt2-xl"}, {"/models/meta/Llama-2-7b-hf/config.json", "Llama-2-7b-hf"},
           {"./gpt2.json", "gpt2"}, {"runs/gpt2-xl.json", "gpt2-xl"}, {"../x/../gpt2.json", "gpt2"},
           // The Hugging Face cache: the repository's name, not the snapshot's hash.
           {"/root/.cache/huggingface/hub/models--openai-community--gpt2-xl/snapshots/5f1e2d3c/config.json",
            "gpt2-xl"}}) {
    INFO(file);
    CHECK(ztune::transformer_from_hf_config(doc, file, 0).name == name);
  }
}

// ---------------------------------------------------------------------------
// Published config.json files (tests/vocab/fixtures/hf/, see its README.md),
// loaded through load_transformer as `--model path/to/config.json` is. The
// oracle for each is the parameter count published for the checkpoint.

namespace {

std::string hf_fixture(const std::string& name) {
  return std::string(ZTUNE_SOURCE_DIR) + "/tests/vocab/fixtures/hf/" + name + "/config.json";
}

}  // namespace

TEST_CASE("gpt2-xl config.json file: shape and Hugging Face's parameter count", "[hf]") {
  auto t = ztune::load_transformer(hf_fixture("gpt2-xl"));
  CHECK(t.name == "gpt2-xl");
  CHECK(t.layers == 48);
  CHECK(t.hidden == 1600);
  CHECK(t.heads == 25);
  CHECK(t.kv_heads == 25);
  CHECK(t.seq_len == 1024);
  CHECK(t.tied_embeddings);
  CHECK(t.position == ztune::PositionEmbedding::learned);
  // GPT2LMHeadModel.from_pretrained("gpt2-xl").num_parameters() (tied head counted once).
  CHECK(t.total_params() == 1557611200.0);
}

TEST_CASE("GPT-NeoX-20B config.json: 20.55B against the model card", "[hf]") {
  auto t = ztune::load_transformer(hf_fixture("gpt-neox-20b"));
  CHECK(t.layers == 44);
  CHECK(t.hidden == 6144);
  CHECK(t.heads == 64);
  CHECK(t.ffn_hidden == 24576);
  CHECK(t.vocab == 50432);
  CHECK_FALSE(t.tied_embeddings);                            // separate embed_in / embed_out
  CHECK(t.position == ztune::PositionEmbedding::rotary);     // no position table
  // rotary_pct 0.25 of 96-channel heads (rotary_ndims = int(96 · 0.25)); parallel attention and MLP.
  CHECK(t.rotary_fraction == 0.25);
  CHECK(t.rotary_dims() == 24);
  CHECK(t.parallel_residual);
  // Model card: "Num. parameters 20,556,201,984". ztune counts 20,554,567,680
  // (12·L·h² + 13·L·h + 2·V·h + 2h); the card's figure is 1,634,304 (0.008%)
  // higher for a reason the card does not give, hence the 1e-4 tolerance.
  CHECK(t.total_params() == Approx(20556201984.0).epsilon(1e-4));
}

TEST_CASE("Llama-2-7B config.json: 6.7B as the LLaMA paper prints it", "[hf]") {
  auto t = ztune::load_transformer(hf_fixture("llama-2-7b"));
  CHECK(t.activation == ztune::Activation::swiglu);
  CHECK(t.norm == ztune::NormKind::rmsnorm);
  CHECK_FALSE(t.bias);
  CHECK(t.kv_heads == 32);
  CHECK(t.seq_len == 4096);
  // LLaMA (Touvron et al. 2023a) Table 2: 6.7B for this shape; the figure
  // Hugging Face prints for the checkpoint is 6,738,415,616.
  CHECK(t.total_params() == 6738415616.0);
  CHECK(t.total_params() / 1e9 == Approx(6.7).margin(0.05));
}

TEST_CASE("Llama-3-70B config.json: grouped-query attention with 8 kv heads", "[hf]") {
  auto t = ztune::load_transformer(hf_fixture("llama-3-70b"));
  CHECK(t.heads == 64);
  CHECK(t.kv_heads == 8);
  CHECK(t.head_dim() == 128);
  CHECK(t.vocab == 128256);
  // Closed form of one GQA block: Q and O are h×h, K and V are h×(kv·d);
  // SwiGLU has three h×f matrices; two RMSNorm scales.
  const double h = 8192, kv = 8 * 128, f = 28672;
  CHECK(t.params_per_layer() == 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h);
  // Model card: 70B (the Hub lists 70.6B).
  CHECK(t.total_params() / 1e9 == Approx(70.0).epsilon(0.01));
}

TEST_CASE("Qwen2-7B config.json: biases on Q, K and V only, to the Hub's parameter count", "[hf]") {
  auto t = ztune::load_transformer(hf_fixture("qwen2-7b"));
  CHECK_FALSE(t.bias);
  CHECK(t.qkv_bias);
  CHECK(t.kv_heads == 4);
  CHECK(t.norm_eps == 1e-6);
  CHECK(t.rope_theta == 1e6);
  CHECK_FALSE(t.tied_embeddings);
  // Qwen2Attention: q_proj, k_proj, v_proj carry biases (h + 2·kv·d), o_proj and the MLP do not.
  const double h = 3584, kv = 4 * 128, f = 18944;
  CHECK(t.params_per_layer() == 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h + (h + 2 * kv));
  // The Hub's count for Qwen/Qwen2-7B (model card: 7.6B; non-embedding 6.53B).
  CHECK(t.total_params() == 7615616512.0);
}

TEST_CASE("Mistral-7B: its sliding window is the model's attention window, to the Hub's parameter count", "[hf]") {
  const std::string path = hf_fixture("mistral-7b-v0.1");
  // max_position_embeddings 32768, sliding_window 4096.
  auto t = ztune::load_transformer(path);
  CHECK(t.seq_len == 32768);
  CHECK(t.attention_window == 4096);
  CHECK(t.windowed());
  CHECK_FALSE(t.bias);
  CHECK_FALSE(t.qkv_bias);
  CHECK(t.total_params() == 7241732096.0);  // the Hub's count (a window has no parameters)
  // Within the window the model is full causal attention.
  CHECK_FALSE(ztune::load_transformer(path, 4096).windowed());
  // Qwen2 windows only the layers from max_window_layers on: one window for
  // every layer or none is what ztune models; a split is refused by name.
  auto doc = nlohmann::json::parse(std::ifstream(hf_fixture("qwen2-7b")));
  doc["use_sliding_window"] = true;
  doc["sliding_window"] = 4096;
  doc["max_window_layers"] = 0;
  CHECK(ztune::transformer_from_hf_config(doc, "q.json", 0).attention_window == 4096);
  doc["max_window_layers"] = 28;  // = the layer count: no layer windowed
  CHECK_FALSE(ztune::transformer_from_hf_config(doc, "q.json", 0).windowed());
  doc["max_window_layers"] = 14;
  REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(doc, "q.json", 0),
                      Catch::Matchers::StartsWith("q.json: $.max_window_layers: expected 0 (every layer windowed) or at least 28"));
}

TEST_CASE("absent keys take the config classes' defaults (MistralConfig, Qwen2Config), not ztune's", "[hf]") {
  // Audit 4: a trimmed Mistral config had imported with 32 kv heads (8.05B,
  // not the Hub's 7.24B) and no window; a Qwen2 one windowed every layer.
  auto mistral = nlohmann::json::parse(std::ifstream(hf_fixture("mistral-7b-v0.1")));
  mistral.erase("num_key_value_heads");
  mistral.erase("sliding_window");
  const auto t = ztune::transformer_from_hf_config(mistral, "m.json", 0);
  CHECK(t.kv_heads == 8);                   // MistralConfig(num_key_value_heads=8)
  CHECK(t.total_params() == 7241732096.0);  // the Hub's count
  CHECK(t.attention_window == 4096);        // MistralConfig(sliding_window=4096)
  mistral["sliding_window"] = nullptr;      // written null: no window
  CHECK_FALSE(ztune::transformer_from_hf_config(mistral, "m.json", 0).windowed());
  auto qwen = nlohmann::json::parse(std::ifstream(hf_fixture("qwen2-7b")));
  qwen["use_sliding_window"] = true;
  qwen.erase("max_window_layers");          // Qwen2Config(max_window_layers=28): none of 28 layers windowed
  qwen["sliding_window"] = 4096;
  CHECK_FALSE(ztune::transformer_from_hf_config(qwen, "q.json", 0).windowed());
  qwen["max_window_layers"] = 0;
  qwen.erase("sliding_window");             // Qwen2Config(sliding_window=4096)
  CHECK(ztune::transformer_from_hf_config(qwen, "q.json", 0).attention_window == 4096);
}

TEST_CASE("configs ztune would miscount are refused by key: MoE by class name, cross-attention, NeoX without "
          "attention biases", "[hf]") {
  using Catch::Matchers::StartsWith;
  // No model_type: the class name decides, exactly (a prefix took Qwen2MoeForCausalLM,
  // 14.3B with 60 experts, for a dense 1.86B Qwen2).
  auto moe = nlohmann::json::parse(std::ifstream(hf_fixture("qwen2-7b")));
  moe.erase("model_type");
  moe["architectures"] = {"Qwen2MoeForCausalLM"};
  REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(moe, "moe.json", 0),
                      StartsWith("moe.json: $.architectures[0]: \"Qwen2MoeForCausalLM\" is a mixture-of-experts "
                                 "family; ztune models dense decoder-only transformers"));
  moe["architectures"] = {"Qwen2ForCausalLM"};
  CHECK(ztune::transformer_from_hf_config(moe, "q.json", 0).total_params() ==
        ztune::load_transformer(hf_fixture("qwen2-7b")).total_params());
  auto gpt2 = nlohmann::json::parse(std::ifstream(hf_fixture("gpt2-xl")));
  gpt2["add_cross_attention"] = true;
  REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(gpt2, "g.json", 0),
                      StartsWith("g.json: $.add_cross_attention: expected false"));
  auto neox = nlohmann::json::parse(std::ifstream(hf_fixture("gpt-neox-20b")));
  neox["attention_bias"] = false;
  REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(neox, "n.json", 0),
                      StartsWith("n.json: $.attention_bias: expected true"));
}

TEST_CASE("mixture-of-experts configs are refused as such: by family - and by an expert count in a dense family",
          "[hf]") {
  using Catch::Matchers::StartsWith;
  // Mixtral-8x7B's config (model_type mixtral): 46.7B parameters, 12.9B active per token.
  auto mixtral = nlohmann::json::parse(std::ifstream(hf_fixture("mistral-7b-v0.1")));
  mixtral["model_type"] = "mixtral";
  mixtral["num_local_experts"] = 8;
  mixtral["num_experts_per_tok"] = 2;
  REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(mixtral, "mixtral.json", 0),
                      StartsWith("mixtral.json: $.model_type: \"mixtral\" is a mixture-of-experts family"));
  // The experts in a Llama config had been ignored: planned as a dense 8B.
  for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"}) {
    auto llama = nlohmann::json::parse(std::ifstream(hf_fixture("llama-2-7b")));
    llama[key] = 8;
    INFO(key);
    REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(llama, "l.json", 0),
                        StartsWith(std::string("l.json: $.") + key + ": expected no experts (absent, null or 1)"));
    llama[key] = 1;  // one expert is a dense MLP
    CHECK(ztune::transformer_from_hf_config(llama, "l.json", 0).total_params() == 6738415616.0);
  }
  // llm-foundry's MPT keeps its experts in ffn_config; DeepSeek-V3 named by its class alone.
  auto mpt = nlohmann::json::parse(std::ifstream(hf_fixture("mpt-7b")));
  mpt["ffn_config"] = {{"ffn_type", "mb_moe"}, {"moe_num_experts", 16}};
  REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(mpt, "m.json", 0),
                      StartsWith("m.json: $.ffn_config.moe_num_experts: expected no experts"));
  auto deepseek = nlohmann::json::parse(std::ifstream(hf_fixture("llama-2-7b")));
  deepseek.erase("model_type");
  deepseek["architectures"] = {"DeepseekV3ForCausalLM"};
  REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(deepseek, "d.json", 0),
                      StartsWith("d.json: $.architectures[0]: \"DeepseekV3ForCausalLM\" is a mixture-of-experts"));
}

TEST_CASE("Phi-3-mini config.json: Llama's shape - to the Hub's parameter count - with its sliding window", "[hf]") {
  const auto t = ztune::load_transformer(hf_fixture("phi-3-mini-4k-instruct"));
  CHECK(t.name == "phi-3-mini-4k-instruct");
  CHECK(t.layers == 32);
  CHECK(t.hidden == 3072);
  CHECK(t.kv_heads == 32);
  CHECK(t.ffn_hidden == 8192);
  CHECK(t.activation == ztune::Activation::swiglu);
  CHECK(t.norm == ztune::NormKind::rmsnorm);
  CHECK_FALSE(t.tied_embeddings);
  CHECK_FALSE(t.bias);
  CHECK(t.attention_window == 2047);
  // Phi3ForCausalLM.num_parameters(): 2 · 32,064 · 3,072 (embedding, untied head)
  // + 32 · (4 · 3,072² + 3 · 3,072 · 8,192 + 2 · 3,072) + 3,072 = 3,821,079,552.
  CHECK(t.total_params() == 3821079552.0);
}

TEST_CASE("MPT-7B config.json: ALiBi (no position table) and no biases", "[hf]") {
  auto t = ztune::load_transformer(hf_fixture("mpt-7b"));
  CHECK(t.layers == 32);
  CHECK(t.ffn_hidden == 4 * 4096);
  CHECK_FALSE(t.bias);
  CHECK(t.tied_embeddings);
  CHECK(t.position == ztune::PositionEmbedding::alibi);  // attn_config.alibi: true
  // Closed form: 12·L·h² weights, a bias-free LayerNorm scale pair per block,
  // the tied embedding and the final norm's scale.
  const double L = 32, h = 4096, V = 50432;
  CHECK(t.total_params() == 12 * L * h * h + 2 * h * L + V * h + h);
  // Model card: 6.7B; ztune counts 6.649B (0.8% under the card's rounded figure).
  CHECK(t.total_params() / 1e9 == Approx(6.7).epsilon(0.01));
}

TEST_CASE("MPT without ALiBi keeps its learned position table", "[hf]") {
  auto doc = ztune::read_json_file(hf_fixture("mpt-7b"));
  auto alibi = ztune::transformer_from_hf_config(doc, "mpt-7b/config.json", 0);
  doc["attn_config"]["alibi"] = false;
  auto learned = ztune::transformer_from_hf_config(doc, "mpt-7b/config.json", 0);
  CHECK(learned.position == ztune::PositionEmbedding::learned);
  CHECK(learned.total_params() - alibi.total_params() == 2048.0 * 4096.0);  // max_seq_len × d_model
  doc["attn_config"]["attn_type"] = "grouped_query_attention";
  doc["attn_config"]["kv_n_heads"] = 8;
  CHECK(ztune::transformer_from_hf_config(doc, "mpt-7b/config.json", 0).kv_heads == 8);
  doc["attn_config"]["attn_type"] = "multiquery_attention";
  CHECK(ztune::transformer_from_hf_config(doc, "mpt-7b/config.json", 0).kv_heads == 1);
}

TEST_CASE("a sequence length given with --seq overrides the config's maximum positions", "[hf]") {
  // What `--model path/to/config.json --seq 4096` does: InputFlags passes the
  // value to load_transformer.
  auto llama = ztune::load_transformer(hf_fixture("llama-3-70b"), 4096);
  CHECK(llama.seq_len == 4096);
  CHECK(llama.total_params() == ztune::load_transformer(hf_fixture("llama-3-70b")).total_params());  // rotary
  // Llama 3 rotates with base 500,000 (its config's rope_theta; Llama 2 kept RoFormer's 10,000).
  CHECK(llama.rope_theta == 500000.0);
  CHECK(ztune::load_transformer(hf_fixture("llama-2-7b")).rope_theta == 10000.0);
  // GPT-2's learned position table is the config's n_positions rows whatever
  // length trains (HF's wpe is 1024 × 1600): shorter sequences keep every
  // row, longer ones have no position to embed (wpe(position_ids) out of range).
  auto gpt2 = ztune::load_transformer(hf_fixture("gpt2-xl"), 512);
  CHECK(gpt2.seq_len == 512);
  CHECK(gpt2.learned_position_rows() == 1024);
  CHECK(gpt2.total_params() == 1557611200.0);  // GPT2LMHeadModel.num_parameters(), at any length
  REQUIRE_THROWS_WITH(ztune::load_transformer(hf_fixture("gpt2-xl"), 4096),
                      Catch::Matchers::StartsWith("--seq 4096: ") &&
                          Catch::Matchers::Contains("learned position table has 1024 rows (n_positions)"));
  // The table's rows travel with the model in a plan file, and a longer --seq is refused there too.
  const auto again = ztune::transformer_from_json(ztune::transformer_to_json(gpt2), "m.json");
  CHECK(again.position_rows == 1024);
  CHECK(again.total_params() == 1557611200.0);
}

TEST_CASE("the norms' epsilon comes from each family's config.json key", "[hf]") {
  // The published configs (fixtures) all say 1e-05: GPT-2's layer_norm_epsilon,
  // GPT-NeoX's layer_norm_eps, Llama 2's rms_norm_eps.
  CHECK(ztune::load_transformer(hf_fixture("gpt2-xl")).norm_eps == 1e-5);
  CHECK(ztune::load_transformer(hf_fixture("gpt-neox-20b")).norm_eps == 1e-5);
  CHECK(ztune::load_transformer(hf_fixture("llama-2-7b")).norm_eps == 1e-5);
  CHECK(ztune::load_transformer(hf_fixture("llama-3-70b")).norm_eps == 1e-5);
  // The key is read, not assumed: Llama 1's checkpoints carry rms_norm_eps 1e-06
  // (Meta's params.json norm_eps), and so do Qwen2 and Gemma.
  auto llama = ztune::read_json_file(hf_fixture("llama-2-7b"));
  llama["rms_norm_eps"] = 1e-6;
  CHECK(ztune::transformer_from_hf_config(llama, "llama/config.json", 0).norm_eps == 1e-6);
  // Without the key, LlamaConfig's (and MistralConfig's) default: 1e-6.
  llama.erase("rms_norm_eps");
  CHECK(ztune::transformer_from_hf_config(llama, "llama/config.json", 0).norm_eps == 1e-6);
  llama["rms_norm_eps"] = nullptr;  // null reads as absent, as for every optional key
  CHECK(ztune::transformer_from_hf_config(llama, "llama/config.json", 0).norm_eps == 1e-6);
  auto gpt2 = ztune::read_json_file(hf_fixture("gpt2-xl"));
  gpt2["layer_norm_epsilon"] = 1e-6;
  CHECK(ztune::transformer_from_hf_config(gpt2, "g/config.json", 0).norm_eps == 1e-6);
  gpt2.erase("layer_norm_epsilon");  // GPT2Config's default
  CHECK(ztune::transformer_from_hf_config(gpt2, "g/config.json", 0).norm_eps == 1e-5);
  auto neox = ztune::read_json_file(hf_fixture("gpt-neox-20b"));
  neox["layer_norm_eps"] = 1e-6;
  CHECK(ztune::transformer_from_hf_config(neox, "n/config.json", 0).norm_eps == 1e-6);
  neox.erase("layer_norm_eps");  // GPTNeoXConfig's default
  CHECK(ztune::transformer_from_hf_config(neox, "n/config.json", 0).norm_eps == 1e-5);
  // MPT's config has no such key: llm-foundry's LayerNorm keeps torch's 1e-5.
  CHECK(ztune::load_transformer(hf_fixture("mpt-7b")).norm_eps == 1e-5);
}

TEST_CASE("dropout comes from each family's config.json keys, at its config class's defaults", "[hf][dropout]") {
  // The published configs: GPT-2 XL's resid, embd and attn pdrop 0.1; Llama 3's
  // attention_dropout 0.0, MPT-7B's three 0, Qwen2's 0.0; Llama 2's and
  // GPT-NeoX-20B's configs name none (LlamaConfig and GPTNeoXConfig default 0).
  CHECK(ztune::load_transformer(hf_fixture("gpt2-xl")).dropout == 0.1);
  CHECK(ztune::load_transformer(hf_fixture("llama-3-70b")).dropout == 0.0);
  CHECK(ztune::load_transformer(hf_fixture("llama-2-7b")).dropout == 0.0);
  CHECK(ztune::load_transformer(hf_fixture("mpt-7b")).dropout == 0.0);
  CHECK(ztune::load_transformer(hf_fixture("qwen2-7b")).dropout == 0.0);
  CHECK(ztune::load_transformer(hf_fixture("gpt-neox-20b")).dropout == 0.0);
  // The largest of a family's keys decides; each key is read.
  auto gpt2 = ztune::read_json_file(hf_fixture("gpt2-xl"));
  for (const char* k : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) gpt2[k] = 0;
  CHECK(ztune::transformer_from_hf_config(gpt2, "g/config.json", 0).dropout == 0.0);
  gpt2["attn_pdrop"] = 0.2;
  CHECK(ztune::transformer_from_hf_config(gpt2, "g/config.json", 0).dropout == 0.2);
  gpt2.erase("attn_pdrop");  // GPT2Config's default 0.1
  CHECK(ztune::transformer_from_hf_config(gpt2, "g/config.json", 0).dropout == 0.1);
  auto neox = ztune::read_json_file(hf_fixture("gpt-neox-20b"));
  neox["hidden_dropout"] = 0.1;
  CHECK(ztune::transformer_from_hf_config(neox, "n/config.json", 0).dropout == 0.1);
  auto mpt = ztune::read_json_file(hf_fixture("mpt-7b"));
  mpt["attn_config"]["attn_pdrop"] = 0.1;
  CHECK(ztune::transformer_from_hf_config(mpt, "m/config.json", 0).dropout == 0.1);
  mpt["attn_config"]["attn_pdrop"] = "0.1";
  REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(mpt, "m/config.json", 0),
                      "m/config.json: $.attn_config.attn_pdrop: expected a probability >= 0 and < 1, got \"0.1\"");
}

TEST_CASE("an unknown model_type is rejected naming the file, path and families", "[hf]") {
  const std::string path = hf_fixture("bert-base-uncased");
  REQUIRE_THROWS_WITH(ztune::load_transformer(path),
                      path + ": $.model_type: expected a Hugging Face family ztune imports "
                             "(gpt2, gpt_neox, llama, mistral, qwen2, phi3, mpt), got \"bert\"");
  auto doc = nlohmann::json::parse(R"({"architectures": ["T5ForConditionalGeneration"], "d_model": 512})");
  REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(doc, "t5/config.json", 0),
                      Catch::Matchers::Contains("t5/config.json: $.architectures[0]: expected a Hugging Face family") &&
                          Catch::Matchers::Contains("got \"T5ForConditionalGeneration\""));
  doc = nlohmann::json::parse(R"({"model_type": 7})");
  REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(doc, "c.json", 0),
                      "c.json: $.model_type: expected a string naming the model family, got 7");
}

TEST_CASE("bad Hugging Face fields name the config.json key", "[hf][bad-input]") {
  using Catch::Matchers::Contains;
  // One field of a published config changed (or removed, for a null value), and
  // the message ztune must give for it, naming the file and the key.
  struct Case {
    const char* fixture;
    const char* key;
    nlohmann::json value;
    const char* message;
  };
  const Case cases[] = {
      {"gpt-neox-20b", "hidden_size", nullptr, "$.hidden_size: missing required field (Hugging Face config)"},
      {"gpt-neox-20b", "num_hidden_layers", "44", "$.num_hidden_layers: expected an integer from 1 to 100000, got \"44\""},
      {"gpt-neox-20b", "num_hidden_layers", 0, "$.num_hidden_layers: expected an integer from 1 to 100000, got 0"},
      // The model file's bounds hold for a config too (a billion layers planned 202 quadrillion parameters).
      {"gpt-neox-20b", "num_hidden_layers", 1000000000,
       "$.num_hidden_layers: expected an integer from 1 to 100000, got 1000000000"},
      {"gpt-neox-20b", "vocab_size", 2147483648LL, "$.vocab_size: expected an integer from 1 to 16777216"},
      {"gpt-neox-20b", "rotary_pct", 2, "$.rotary_pct: expected a share of the head's channels in (0, 1], got 2"},
      {"gpt-neox-20b", "num_attention_heads", 40,  // 6144 / 40 is not whole
       "$.num_attention_heads: expected a divisor of hidden_size (6144), got 40"},
      {"llama-3-70b", "num_key_value_heads", 6,
       "$.num_key_value_heads: expected a divisor of num_attention_heads (64), got 6"},
      {"llama-3-70b", "attention_bias", true, "$.attention_bias: expected attention_bias and mlp_bias to agree"},
      {"llama-3-70b", "head_dim", 256, "$.head_dim: expected hidden_size / num_attention_heads = 128"},
      {"gpt2-xl", "tie_word_embeddings", "yes", "$.tie_word_embeddings: expected true or false, got \"yes\""},
      {"gpt2-xl", "layer_norm_epsilon", 0, "$.layer_norm_epsilon: expected a number > 0 and < 1, got 0"},
      {"llama-2-7b", "rms_norm_eps", "1e-6", "$.rms_norm_eps: expected a number > 0 and < 1, got \"1e-6\""},
      {"llama-2-7b", "rms_norm_eps", 1, "$.rms_norm_eps: expected a number > 0 and < 1, got 1"},
      {"llama-3-70b", "attention_dropout", 1, "$.attention_dropout: expected a probability >= 0 and < 1, got 1"},
      {"gpt2-xl", "resid_pdrop", -0.1, "$.resid_pdrop: expected a probability >= 0 and < 1, got -0.1"},
  };
  for (const Case& c : cases) {
    INFO(c.fixture << " " << c.key);
    auto doc = ztune::read_json_file(hf_fixture(c.fixture));
    if (c.value.is_null()) doc.erase(c.key);
    else doc[c.key] = c.value;
    REQUIRE_THROWS_WITH(ztune::transformer_from_hf_config(doc, "m/config.json", 0),
                        Contains(std::string("m/config.json: ") + c.message));
  }
}

TEST_CASE("an imported config's maximum positions are marked as such, --seq clears the mark", "[hf]") {
  // Mistral-7B v0.1's config.json: max_position_embeddings 32768.
  auto t = ztune::load_transformer(hf_fixture("mistral-7b-v0.1"));
  CHECK(t.seq_len == 32768);
  CHECK(t.seq_len_is_position_limit);
  t = ztune::load_transformer(hf_fixture("mistral-7b-v0.1"), 4096);
  CHECK(t.seq_len == 4096);
  CHECK_FALSE(t.seq_len_is_position_limit);
  CHECK_FALSE(ztune::load_transformer("llama-7b").seq_len_is_position_limit);  // ztune's own files choose theirs
}
