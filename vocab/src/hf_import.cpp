#include "ztune/vocab/hf_import.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/text.hpp"

namespace ztune {

bool looks_like_hf_config(const nlohmann::json& doc) {
  return doc.is_object() && (doc.contains("model_type") || doc.contains("architectures")) &&
         !doc.contains("schema");
}

namespace {

// A dropout probability from a config.json value at `path`: a number in [0, 1).
double probability(const nlohmann::json& v, const std::string& file, const std::string& path) {
  if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() < 1))
    throw InputError(file + ": " + path + ": expected a probability >= 0 and < 1, got " + describe_json(v));
  return v.get<double>();
}

// HF configs carry dozens of fields we do not need, so unknown fields are
// tolerated here (unlike ztune's own files); the fields we read are checked.
struct HfReader {
  const nlohmann::json& doc;
  const std::string& file;

  [[nodiscard]] const nlohmann::json* find(const char* key) const {
    auto it = doc.find(key);
    return (it == doc.end() || it->is_null()) ? nullptr : &*it;
  }
  [[nodiscard]] int integer(const char* key) const {
    const auto* v = find(key);
    if (v == nullptr) throw InputError(file + ": $." + key + ": missing required field (Hugging Face config)");
    // The model file's bounds for the field the key becomes (one set, transformer.hpp).
    const long long most = bound_of(key);
    if (!v->is_number_integer() || v->get<long long>() <= 0 || v->get<long long>() > most)
      throw InputError(file + ": $." + key + ": expected an integer from 1 to " + std::to_string(most) + ", got " +
                       describe_json(*v));
    return static_cast<int>(v->get<long long>());
  }
  static long long bound_of(std::string_view key) {
    for (const char* k : {"n_layer", "num_hidden_layers", "n_layers"})
      if (key == k) return kMaxLayers;
    for (const char* k : {"n_embd", "hidden_size", "d_model", "head_dim"})
      if (key == k) return kMaxHidden;
    for (const char* k : {"n_head", "num_attention_heads", "n_heads", "num_key_value_heads"})
      if (key == k) return kMaxHeads;
    for (const char* k : {"n_inner", "intermediate_size"})
      if (key == k) return kMaxFfnHidden;
    if (key == "vocab_size") return kMaxVocab;
    for (const char* k : {"n_positions", "n_ctx", "max_position_embeddings", "max_seq_len", "sliding_window"})
      if (key == k) return kMaxSeqLen;
    return 1LL << 30;  // keeps products like hidden × heads in int range
  }
  /// A share in (0, 1] (a rotary fraction), or `fallback`.
  [[nodiscard]] double share_or(const char* key, double fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || !(v->get<double>() > 0 && v->get<double>() <= 1))
      throw InputError(file + ": $." + key + ": expected a share of the head's channels in (0, 1], got " +
                       describe_json(*v));
    return v->get<double>();
  }
  [[nodiscard]] int integer_or(const char* key, int fallback) const {
    return find(key) ? integer(key) : fallback;
  }
  /// An integer ≥ 0 (a layer index or count that may be 0), or `fallback`.
  [[nodiscard]] int nonnegative_or(const char* key, int fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number_integer() || v->get<long long>() < 0 || v->get<long long>() > (1LL << 30))
      throw InputError(file + ": $." + key + ": expected an integer >= 0, got " + describe_json(*v));
    return static_cast<int>(v->get<long long>());
  }
  [[nodiscard]] double positive_or(const char* key, double fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || v->get<double>() <= 0)
      throw InputError(file + ": $." + key + ": expected a number > 0, got " + describe_json(*v));
    return v->get<double>();
  }
  /// A norm's ε: a number in (0, 1), or `fallback` when the config does not give one.
  [[nodiscard]] double epsilon_or(const char* key, double fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || !(v->get<double>() > 0 && v->get<double>() < 1))
      throw InputError(file + ": $." + key + ": expected a number > 0 and < 1, got " + describe_json(*v));
    return v->get<double>();
  }
  /// A dropout probability: a number in [0, 1), or `fallback` when absent.
  [[nodiscard]] double probability_or(const char* key, double fallback) const {
    const auto* v = find(key);
    return v == nullptr ? fallback : probability(*v, file, std::string("$.") + key);
  }
  [[nodiscard]] bool boolean_or(const char* key, bool fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) throw InputError(file + ": $." + key + ": expected true or false, got " + describe_json(*v));
    return v->get<bool>();
  }
};

/// The family and the JSON path it was read from ("$.model_type", or
/// "$.architectures[0]" for old configs that only name the class).
struct ModelType {
  std::string name;
  std::string path;
};

ModelType model_type_of(const nlohmann::json& doc, const std::string& file) {
  if (auto it = doc.find("model_type"); it != doc.end() && !it->is_null()) {
    if (!it->is_string())
      throw InputError(file + ": $.model_type: expected a string naming the model family, got " + describe_json(*it));
    return {it->get<std::string>(), "$.model_type"};
  }
  if (auto it = doc.find("architectures"); it != doc.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    std::string arch = (*it)[0].get<std::string>();
    const std::string path = "$.architectures[0]";
    // The classes by their exact names: a prefix would take Qwen2MoeForCausalLM
    // (60 experts) for dense Qwen2, or Qwen2VL and Llama4 for their text models.
    struct Class {
      const char* name;
      const char* family;
    };
    static constexpr Class kClasses[] = {
        {"GPT2LMHeadModel", "gpt2"},        {"GPT2Model", "gpt2"},          {"GPTNeoXForCausalLM", "gpt_neox"},
        {"GPTNeoXModel", "gpt_neox"},       {"LlamaForCausalLM", "llama"},  {"LlamaModel", "llama"},
        {"MistralForCausalLM", "mistral"},  {"MistralModel", "mistral"},    {"Qwen2ForCausalLM", "qwen2"},
        {"Qwen2Model", "qwen2"},            {"Phi3ForCausalLM", "phi3"},    {"Phi3Model", "phi3"},
        {"MPTForCausalLM", "mpt"},          {"MptForCausalLM", "mpt"},      {"MPTModel", "mpt"},
        {"MptModel", "mpt"}};
    for (const auto& c : kClasses)
      if (arch == c.name) return {c.family, path};
    return {arch, path};
  }
  return {"", "$.model_type"};
}

/// MPT keeps attention options in a nested "attn_config" object (llm-foundry's
/// MPTConfig). Returns the member or nullptr when absent.
const nlohmann::json* attn_config_member(const nlohmann::json& doc, const std::string& file, const char* key) {
  auto it = doc.find("attn_config");
  if (it == doc.end() || it->is_null()) return nullptr;
  if (!it->is_object()) throw InputError(file + ": $.attn_config: expected an object, got " + describe_json(*it));
  auto m = it->find(key);
  return (m == it->end() || m->is_null()) ? nullptr : &*m;
}

/// The config.json keys that hold the shape, per family (for error messages).
struct HfKeys {
  const char* hidden;
  const char* heads;
  const char* kv_heads;
};

HfKeys hf_keys_of(const std::string& type) {
  if (type == "gpt2") return {"n_embd", "n_head", "n_head"};
  if (type == "mpt") return {"d_model", "n_heads", "attn_config.kv_n_heads"};
  if (type == "gpt_neox") return {"hidden_size", "num_attention_heads", "num_attention_heads"};
  return {"hidden_size", "num_attention_heads", "num_key_value_heads"};  // llama, mistral, qwen2, phi3
}

// Mixture-of-experts: ztune models dense transformers, whose every token runs
// every weight. An MoE config's family, or an expert count above 1 in a dense
// family's config (a Llama with num_local_experts: 8 would be planned as a
// dense model about 1/6 of its size), is refused with that reason.
void refuse_mixture_of_experts(const nlohmann::json& doc, const ModelType& type, const std::string& file) {
  // The model_type or architectures[0] class, lower-cased without "_":
  // qwen2_moe, OlmoeForCausalLM, deepseek_v3, DeepseekV3ForCausalLM, ...
  std::string name;
  for (const char ch : ascii_lower(type.name))
    if (ch != '_') name += ch;
  bool moe = name.find("moe") != std::string::npos;
  for (const char* family : {"mixtral", "deepseekv", "dbrx", "arctic", "jamba", "switchtransformers"})
    moe = moe || name.starts_with(family);
  if (moe)
    throw InputError(file + ": " + type.path + ": \"" + type.name +
                     "\" is a mixture-of-experts family; ztune models dense decoder-only transformers (no experts, "
                     "no expert parallelism), so it cannot plan this model");
  auto check = [&](const nlohmann::json& object, const std::string& path) {
    for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"}) {
      auto it = object.find(key);
      if (it == object.end() || it->is_null()) continue;
      if (!it->is_number() || it->get<double>() > 1)
        throw InputError(file + ": " + path + key + ": expected no experts (absent, null or 1): ztune models dense "
                         "transformers, and a mixture-of-experts model's weights and compute per token are not a "
                         "dense one's; got " + describe_json(*it));
    }
  };
  check(doc, "$.");
  // DBRX and llm-foundry's MPT keep the MLP's options in a nested ffn_config.
  if (auto it = doc.find("ffn_config"); it != doc.end() && it->is_object()) check(*it, "$.ffn_config.");
}

}  // namespace

namespace {
constexpr std::string_view kImportedFrom = "imported from Hugging Face config ";
}  // namespace

bool imported_from_hf_config(const Transformer& t) { return t.source.starts_with(kImportedFrom); }

Transformer transformer_from_hf_config(const nlohmann::json& doc, const std::string& file, int seq_len) {
  HfReader r{doc, file};
  const ModelType model_type = model_type_of(doc, file);
  const std::string& type = model_type.name;
  refuse_mixture_of_experts(doc, model_type, file);
  Transformer t;
  // A checkpoint's folder names the model (meta-llama/Llama-2-7b-hf/config.json):
  // the folder's own name when the file is config.json, else the file's stem
  // (gpt2.json); "." or ".." (a path as typed) are resolved first, lexically:
  // a symlink (the Hugging Face cache's snapshots/HASH/config.json points into
  // blobs/) keeps the name the user's path gives. In that cache the model is
  // the models--ORG--NAME folder above snapshots/.
  {
    std::error_code ec;
    std::filesystem::path path = std::filesystem::absolute(std::filesystem::path(file), ec);
    path = (ec ? std::filesystem::path(file) : path).lexically_normal();
    t.name = path.filename() == "config.json" ? path.parent_path().filename().string() : path.stem().string();
    const std::filesystem::path snapshots = path.parent_path().parent_path();
    if (path.filename() == "config.json" && snapshots.filename() == "snapshots" &&
        snapshots.parent_path().filename().string().starts_with("models--")) {
      std::string repo = snapshots.parent_path().filename().string().substr(8);  // ORG--NAME
      if (const auto cut = repo.rfind("--"); cut != std::string::npos) repo = repo.substr(cut + 2);
      t.name = repo;
    }
  }
  if (t.name.empty() || t.name == "." || t.name == "..") t.name = type;
  t.source = std::string(kImportedFrom) + file + " (model_type " + type +
             "); global_batch 512 and train_tokens 300e9 are ztune defaults";
  t.global_batch = 512;
  t.train_tokens = 300e9;
  if (type == "gpt2") {
    t.layers = r.integer("n_layer");
    t.hidden = r.integer("n_embd");
    t.heads = r.integer("n_head");
    t.kv_heads = t.heads;
    t.ffn_hidden = r.integer_or("n_inner", 4 * t.hidden);
    t.activation = Activation::gelu;
    t.norm = NormKind::layernorm;
    t.norm_eps = r.epsilon_or("layer_norm_epsilon", kDefaultNormEps);  // GPT2Config's default 1e-5
    t.position = PositionEmbedding::learned;
    t.bias = true;
    t.vocab = r.integer("vocab_size");
    t.seq_len = r.integer_or("n_positions", r.integer_or("n_ctx", 1024));
    t.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
    // GPT2Config builds an encoder-decoder's decoder with it (a cross-attention
    // block per layer, attending to an encoder ztune does not model).
    if (r.boolean_or("add_cross_attention", false))
      throw InputError(file + ": $.add_cross_attention: expected false: a GPT-2 with cross-attention is the decoder "
                       "of an encoder-decoder model, and ztune models decoder-only language models");
    // Dropout (Transformer::dropout): the largest of the family's probabilities,
    // at its config class's defaults (GPT2Config 0.1 each; GPTNeoXConfig,
    // LlamaConfig, MistralConfig, Qwen2Config and llm-foundry's MPTConfig 0).
    t.dropout = std::max({r.probability_or("resid_pdrop", 0.1), r.probability_or("embd_pdrop", 0.1),
                          r.probability_or("attn_pdrop", 0.1)});
  } else if (type == "gpt_neox") {
    t.layers = r.integer("num_hidden_layers");
    t.hidden = r.integer("hidden_size");
    t.heads = r.integer("num_attention_heads");
    t.kv_heads = t.heads;
    // Required, as docs/formats.md lists it: GPTNeoXConfig's default, 24576,
    // is its default hidden size's 4× whatever the hidden size (4h had been assumed).
    t.ffn_hidden = r.integer("intermediate_size");
    t.activation = Activation::gelu;
    t.norm = NormKind::layernorm;
    t.norm_eps = r.epsilon_or("layer_norm_eps", kDefaultNormEps);  // GPTNeoXConfig's default 1e-5
    t.position = PositionEmbedding::rotary;
    t.rope_theta = r.positive_or("rotary_emb_base", kRoformerRopeTheta);
    // GPTNeoXConfig's defaults: RoPE on a quarter of each head, parallel attention and MLP.
    t.rotary_fraction = r.share_or("rotary_pct", 0.25);
    t.parallel_residual = r.boolean_or("use_parallel_residual", true);
    // GPTNeoXConfig.attention_bias (default true) drops the attention's biases
    // only; ztune's biases are on every linear layer or on none.
    if (!r.boolean_or("attention_bias", true))
      throw InputError(file + ": $.attention_bias: expected true (ztune models GPT-NeoX's biases on every linear "
                       "layer; without the attention's, the MLP's would remain), got false");
    t.bias = true;
    t.vocab = r.integer("vocab_size");
    t.seq_len = r.integer_or("max_position_embeddings", 2048);
    t.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
    t.dropout = std::max(r.probability_or("hidden_dropout", 0.0), r.probability_or("attention_dropout", 0.0));
  } else if (type == "llama" || type == "mistral" || type == "qwen2" || type == "phi3") {
    // Phi-3 (Phi3Config) is Llama's shape with Q/K/V and the MLP's two input
    // projections stored fused (qkv_proj, gate_up_proj): the same weights.
    t.layers = r.integer("num_hidden_layers");
    t.hidden = r.integer("hidden_size");
    t.heads = r.integer("num_attention_heads");
    // The config classes' defaults when the key is absent: LlamaConfig and
    // Qwen2Config the heads (multi-head), MistralConfig 8 (Mistral-7B's GQA).
    t.kv_heads = r.integer_or("num_key_value_heads", type == "mistral" ? 8 : t.heads);
    t.ffn_hidden = r.integer("intermediate_size");
    t.activation = Activation::swiglu;
    t.norm = NormKind::rmsnorm;
    // LlamaConfig's and MistralConfig's default is Llama 1's 1e-6 (Llama 2/3 configs say 1e-5); Phi3Config's 1e-5.
    t.norm_eps = r.epsilon_or("rms_norm_eps", type == "phi3" ? 1e-5 : 1e-6);
    t.position = PositionEmbedding::rotary;
    t.rope_theta = r.positive_or("rope_theta", kRoformerRopeTheta);
    t.rotary_fraction = r.share_or("partial_rotary_factor", 1.0);
    if (type == "qwen2") {
      // Qwen2Attention: q_proj, k_proj and v_proj with biases, o_proj and the MLP without.
      t.bias = false;
      t.qkv_bias = true;
    } else {
      // ztune's Transformer has biases on every linear layer, on Q/K/V only, or
      // on none; Llama's attention_bias covers o_proj too, and with mlp_bias
      // false that would be miscounted.
      t.bias = r.boolean_or("attention_bias", false);
      if (t.bias != r.boolean_or("mlp_bias", false))
        throw InputError(file + ": $.attention_bias: expected attention_bias and mlp_bias to agree (ztune models "
                         "biases on all linear layers or on none), got attention_bias " +
                         std::string(t.bias ? "true" : "false"));
    }
    t.vocab = r.integer("vocab_size");
    t.seq_len = r.integer_or("max_position_embeddings", 2048);
    t.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
    if (t.hidden % t.heads == 0 && r.integer_or("head_dim", t.hidden / t.heads) != t.hidden / t.heads)
      throw InputError(file + ": $.head_dim: expected hidden_size / num_attention_heads = " +
                       std::to_string(t.hidden / t.heads) + " (ztune derives the head size), got " +
                       std::to_string(r.integer("head_dim")));
    // No hidden dropout in Llama, Mistral or Qwen2; Phi3Config has resid_pdrop and embd_pdrop (0 by default).
    t.dropout = r.probability_or("attention_dropout", 0.0);
    if (type == "phi3")
      t.dropout = std::max({t.dropout, r.probability_or("resid_pdrop", 0.0), r.probability_or("embd_pdrop", 0.0)});
  } else if (type == "mpt") {
    t.layers = r.integer("n_layers");
    t.hidden = r.integer("d_model");
    t.heads = r.integer("n_heads");
    t.kv_heads = t.heads;
    if (const auto* at = attn_config_member(doc, file, "attn_type"); at != nullptr) {
      if (!at->is_string())
        throw InputError(file + ": $.attn_config.attn_type: expected a string, got " + describe_json(*at));
      const std::string attn_type = at->get<std::string>();
      if (attn_type == "multiquery_attention") {
        t.kv_heads = 1;
      } else if (attn_type == "grouped_query_attention") {
        const auto* kv = attn_config_member(doc, file, "kv_n_heads");
        if (kv == nullptr || !kv->is_number_integer() || kv->get<long long>() <= 0 ||
            kv->get<long long>() > t.heads)
          throw InputError(file + ": $.attn_config.kv_n_heads: expected an integer in [1, n_heads] for "
                           "grouped_query_attention, got " + (kv == nullptr ? std::string("nothing") : describe_json(*kv)));
        t.kv_heads = static_cast<int>(kv->get<long long>());
      } else if (attn_type != "multihead_attention") {
        throw InputError(file + ": $.attn_config.attn_type: expected multihead_attention, multiquery_attention or "
                         "grouped_query_attention, got \"" + attn_type + "\"");
      }
    }
    t.ffn_hidden = r.integer_or("expansion_ratio", 4) * t.hidden;
    t.activation = Activation::gelu;
    t.norm = NormKind::layernorm;
    // Position parameters: llm-foundry's MPTConfig turns learned_pos_emb off when
    // ALiBi (or RoPE) is on, so MPT-7B (alibi: true) has no wpe table.
    auto flag = [&](const char* key, bool fallback) {
      const auto* v = attn_config_member(doc, file, key);
      if (v == nullptr) return fallback;
      if (!v->is_boolean())
        throw InputError(file + ": $.attn_config." + key + ": expected true or false, got " + describe_json(*v));
      return v->get<bool>();
    };
    if (flag("alibi", false)) t.position = PositionEmbedding::alibi;
    else if (flag("rope", false)) t.position = PositionEmbedding::rotary;
    else if (!r.boolean_or("learned_pos_emb", true)) t.position = PositionEmbedding::none;
    else t.position = PositionEmbedding::learned;
    t.bias = !r.boolean_or("no_bias", true);
    t.vocab = r.integer("vocab_size");
    t.seq_len = r.integer_or("max_seq_len", 2048);
    t.tied_embeddings = true;
    const auto* pdrop = attn_config_member(doc, file, "attn_pdrop");
    const double attn = pdrop == nullptr ? 0.0 : probability(*pdrop, file, "$.attn_config.attn_pdrop");
    t.dropout = std::max({r.probability_or("resid_pdrop", 0.0), r.probability_or("emb_pdrop", 0.0), attn});
  } else {
    throw InputError(file + ": " + model_type.path + ": expected a Hugging Face family ztune imports "
                     "(gpt2, gpt_neox, llama, mistral, qwen2, phi3, mpt), got \"" + type + "\"");
  }
  // A learned position table is the config's (n_positions, max_seq_len rows),
  // whatever length trains: shorter sequences keep every row, longer ones
  // have no position to embed (GPT-2's wpe(position_ids) out of range).
  if (seq_len > 0 && t.position == PositionEmbedding::learned) {
    if (seq_len > t.seq_len)
      throw InputError("--seq " + std::to_string(seq_len) + ": " + file + "'s learned position table has " +
                       std::to_string(t.seq_len) + " rows (" + (type == "gpt2" ? "n_positions" : "max_seq_len") +
                       "): no position to embed beyond it");
    if (seq_len < t.seq_len) t.position_rows = t.seq_len;
  }
  if (seq_len > 0) t.seq_len = seq_len;
  t.seq_len_is_position_limit = seq_len <= 0;
  // Sliding-window attention: each token sees itself and the window − 1
  // before it. Mistral and Phi-3: every layer (sliding_window, null for none). Qwen2:
  // with use_sliding_window, the layers from max_window_layers on; ztune's
  // model has one window for all layers, so a split is refused.
  // Absent keys take the config classes' defaults: MistralConfig's and
  // Qwen2Config's sliding_window 4096, Qwen2Config's max_window_layers 28; an
  // explicit null is no window.
  if (type == "mistral") {
    t.attention_window = doc.contains("sliding_window") ? r.integer_or("sliding_window", 0) : 4096;
  } else if (type == "phi3") {
    t.attention_window = r.integer_or("sliding_window", 0);  // Phi3Config's default: none (Phi-3-mini-4k says 2047)
  } else if (type == "qwen2" && r.boolean_or("use_sliding_window", false)) {
    const int window = doc.contains("sliding_window") ? r.integer_or("sliding_window", 0) : 4096;
    const int from = r.nonnegative_or("max_window_layers", 28);
    if (from == 0) t.attention_window = window;
    else if (from < t.layers && window > 0 && window < t.seq_len)
      throw InputError(file + ": $.max_window_layers: expected 0 (every layer windowed) or at least " +
                       std::to_string(t.layers) + " (none): ztune gives all layers one attention window, got " +
                       std::to_string(from));
  }
  if (!t.windowed()) t.attention_window = 0;  // a window as long as the sequence changes nothing
  // Shape checks with the family's own key names, so the message points at the
  // line of config.json to fix; validate_transformer below would name ztune's.
  const HfKeys keys = hf_keys_of(type);
  if (t.hidden % t.heads != 0)
    throw InputError(file + ": $." + keys.heads + ": expected a divisor of " + keys.hidden + " (" +
                     std::to_string(t.hidden) + "), got " + std::to_string(t.heads));
  if (t.kv_heads > t.heads || t.heads % t.kv_heads != 0)
    throw InputError(file + ": $." + keys.kv_heads + ": expected a divisor of " + keys.heads + " (" +
                     std::to_string(t.heads) + "), got " + std::to_string(t.kv_heads));
  validate_transformer(t, file);
  return t;
}

}  // namespace ztune
