#include "ztune/model/hf_import.hpp"

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "ztune/model/json_reader.hpp"

namespace ztune {

bool looks_like_hf_config(const nlohmann::json& doc) {
  return doc.is_object() && (doc.contains("model_type") || doc.contains("architectures")) &&
         !doc.contains("schema");
}

namespace {

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
    if (!v->is_number_integer() || v->get<long long>() <= 0)
      throw InputError(file + ": $." + key + ": expected an integer > 0, got " + describe_json(*v));
    return v->get<int>();
  }
  [[nodiscard]] int integer_or(const char* key, int fallback) const {
    return find(key) ? integer(key) : fallback;
  }
  [[nodiscard]] bool boolean_or(const char* key, bool fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) throw InputError(file + ": $." + key + ": expected true or false, got " + describe_json(*v));
    return v->get<bool>();
  }
};

std::string model_type_of(const nlohmann::json& doc) {
  if (auto it = doc.find("model_type"); it != doc.end() && it->is_string()) return it->get<std::string>();
  if (auto it = doc.find("architectures"); it != doc.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    std::string arch = (*it)[0].get<std::string>();
    if (arch.starts_with("GPT2")) return "gpt2";
    if (arch.starts_with("GPTNeoX")) return "gpt_neox";
    if (arch.starts_with("Llama")) return "llama";
    if (arch.starts_with("MPT")) return "mpt";
    return arch;
  }
  return "";
}

}  // namespace

Transformer transformer_from_hf_config(const nlohmann::json& doc, const std::string& file, int seq_len) {
  HfReader r{doc, file};
  std::string type = model_type_of(doc);
  Transformer t;
  t.name = std::filesystem::path(file).parent_path().filename().string();
  if (t.name.empty()) t.name = type;
  t.source = "imported from Hugging Face config " + file + " (model_type " + type +
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
    t.position = PositionEmbedding::learned;
    t.bias = true;
    t.vocab = r.integer("vocab_size");
    t.seq_len = r.integer_or("n_positions", r.integer_or("n_ctx", 1024));
    t.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
  } else if (type == "gpt_neox") {
    t.layers = r.integer("num_hidden_layers");
    t.hidden = r.integer("hidden_size");
    t.heads = r.integer("num_attention_heads");
    t.kv_heads = t.heads;
    t.ffn_hidden = r.integer_or("intermediate_size", 4 * t.hidden);
    t.activation = Activation::gelu;
    t.norm = NormKind::layernorm;
    t.position = PositionEmbedding::rotary;
    t.bias = true;
    t.vocab = r.integer("vocab_size");
    t.seq_len = r.integer_or("max_position_embeddings", 2048);
    t.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  } else if (type == "llama" || type == "mistral") {
    t.layers = r.integer("num_hidden_layers");
    t.hidden = r.integer("hidden_size");
    t.heads = r.integer("num_attention_heads");
    t.kv_heads = r.integer_or("num_key_value_heads", t.heads);
    t.ffn_hidden = r.integer("intermediate_size");
    t.activation = Activation::swiglu;
    t.norm = NormKind::rmsnorm;
    t.position = PositionEmbedding::rotary;
    t.bias = r.boolean_or("attention_bias", false);
    t.vocab = r.integer("vocab_size");
    t.seq_len = r.integer_or("max_position_embeddings", 2048);
    t.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  } else if (type == "mpt") {
    t.layers = r.integer("n_layers");
    t.hidden = r.integer("d_model");
    t.heads = r.integer("n_heads");
    t.kv_heads = t.heads;
    t.ffn_hidden = r.integer_or("expansion_ratio", 4) * t.hidden;
    t.activation = Activation::gelu;
    t.norm = NormKind::layernorm;
    t.position = PositionEmbedding::rotary;  // ALiBi: no position parameters either
    t.bias = !r.boolean_or("no_bias", true);
    t.vocab = r.integer("vocab_size");
    t.seq_len = r.integer_or("max_seq_len", 2048);
    t.tied_embeddings = true;
  } else {
    throw InputError(file + ": $.model_type: expected a Hugging Face family ztune imports "
                     "(gpt2, gpt_neox, llama, mistral, mpt), got \"" + type + "\"");
  }
  if (seq_len > 0) t.seq_len = seq_len;
  validate_transformer(t, file);
  return t;
}

}  // namespace ztune
