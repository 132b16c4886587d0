#include "ztune/vocab/transformer.hpp"

#include <nlohmann/json.hpp>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/hf_import.hpp"
#include "ztune/vocab/json_reader.hpp"

namespace ztune {

const char* to_string(PositionEmbedding p) {
  switch (p) {
    case PositionEmbedding::learned: return "learned";
    case PositionEmbedding::rotary: return "rotary";
    case PositionEmbedding::alibi: return "alibi";
    case PositionEmbedding::none: return "none";
  }
  return "?";
}

std::array<double, 4> Transformer::block_weight_params() const {
  const double h = hidden;
  const double kv = static_cast<double>(kv_heads) * head_dim();
  const double f = ffn_hidden;
  return {h * (h + 2 * kv), h * h, h * f * (activation == Activation::swiglu ? 2.0 : 1.0), f * h};
}

double Transformer::params_per_layer() const {
  const double h = hidden;
  const double kv = static_cast<double>(kv_heads) * head_dim();
  const double f = ffn_hidden;
  const auto w = block_weight_params();
  const double weights = w[0] + w[1] + w[2] + w[3];  // QKV, output, FC1, FC2
  double norms = (norm == NormKind::layernorm ? 2 : 1) * 2 * h;
  double biases = 0;
  if (bias) {
    biases = (h + 2 * kv) + h + (activation == Activation::swiglu ? 2 * f : f) + h;
  } else {
    if (norm == NormKind::layernorm) norms -= 2 * h;  // layernorm without bias keeps only its scale
    if (qkv_bias) biases = h + 2 * kv;                // Qwen2: q_proj, k_proj, v_proj only
  }
  return weights + norms + biases;
}

double Transformer::attended_fraction() const {
  if (!windowed()) return 1.0;
  const double s = seq_len, w = attention_window;
  return (w * s - w * (w - 1) / 2) / (s * (s + 1) / 2);
}

double Transformer::embedding_params() const {
  double e = static_cast<double>(vocab) * hidden;
  if (position == PositionEmbedding::learned) e += static_cast<double>(learned_position_rows()) * hidden;
  return e;
}

double Transformer::head_params() const {
  double final_norm = (norm == NormKind::layernorm && bias ? 2.0 : 1.0) * hidden;
  return final_norm + (tied_embeddings ? 0.0 : static_cast<double>(vocab) * hidden);
}

double Transformer::total_params() const {
  return layers * params_per_layer() + embedding_params() + head_params();
}

namespace {
const std::string kNormEpsExpected = "expected a number > 0 and < 1 (the norms' ε, e.g. 1e-5), got ";
}  // namespace

void validate_transformer(const Transformer& t, const std::string& file) {
  auto fail = [&](const std::string& key, const std::string& what) {
    return InputError(file + ": $." + key + ": " + what);
  };
  if (t.hidden % t.heads != 0)
    throw fail("heads", "expected a divisor of hidden (" + std::to_string(t.hidden) + "), got " +
                            std::to_string(t.heads));
  if (t.rotary_fraction > 1)
    throw fail("rotary_fraction", "expected a share of the head's channels in (0, 1], got " +
                                      nlohmann::json(t.rotary_fraction).dump());
  if (t.kv_heads > t.heads || t.heads % t.kv_heads != 0)
    throw fail("kv_heads", "expected a divisor of heads (" + std::to_string(t.heads) + "), got " +
                               std::to_string(t.kv_heads));
  if (!(t.norm_eps > 0 && t.norm_eps < 1))
    throw fail("norm_eps", kNormEpsExpected + describe_json(t.norm_eps));
  if (t.attention_window < 0)
    throw fail("attention_window", "expected 0 (whole causal prefix) or a window of tokens > 0, got " +
                                       std::to_string(t.attention_window));
  if (t.qkv_bias && t.bias)
    throw fail("qkv_bias", "expected false when bias is true (every linear layer already carries a bias), got true");
}

Transformer transformer_from_json(const nlohmann::json& doc, const std::string& file) {
  ObjectReader r(doc, file, "$");
  r.schema("ztune.model/1");
  Transformer t;
  t.name = r.name("name");
  t.source = r.string("source");
  t.layers = static_cast<int>(r.integer("layers", 1, kMaxLayers));
  t.hidden = static_cast<int>(r.integer("hidden", 1, kMaxHidden));
  t.heads = static_cast<int>(r.integer("heads", 1, kMaxHeads));
  t.kv_heads = static_cast<int>(r.integer("kv_heads", 1, kMaxHeads));
  t.ffn_hidden = static_cast<int>(r.integer("ffn_hidden", 1, kMaxFfnHidden));
  t.activation = r.choice("activation", {"gelu", "swiglu"}) == "gelu" ? Activation::gelu : Activation::swiglu;
  t.norm = r.choice("norm", {"layernorm", "rmsnorm"}) == "layernorm" ? NormKind::layernorm : NormKind::rmsnorm;
  // ε of every norm; absent in files written before the field (and when it is the default).
  if (r.has("norm_eps")) {
    const nlohmann::json& eps = r.raw("norm_eps");
    if (!eps.is_number() || !(eps.get<double>() > 0 && eps.get<double>() < 1))
      throw r.error("norm_eps", kNormEpsExpected + describe_json(eps));
    t.norm_eps = eps.get<double>();
  }
  constexpr PositionEmbedding kPositions[] = {PositionEmbedding::learned, PositionEmbedding::rotary,
                                              PositionEmbedding::alibi, PositionEmbedding::none};
  const std::string position = r.choice("position_embedding", {"learned", "rotary", "alibi", "none"});
  for (PositionEmbedding k : kPositions)
    if (position == to_string(k)) t.position = k;
  if (auto theta = r.optional_positive("rope_theta")) t.rope_theta = *theta;
  if (r.has("rotary_fraction")) {
    const auto& v = r.raw("rotary_fraction");
    if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1))
      throw r.error("rotary_fraction", "expected a share of the head's channels in (0, 1], got " + describe_json(v));
    t.rotary_fraction = v.get<double>();
  }
  if (auto pr = r.optional_boolean("parallel_residual")) t.parallel_residual = *pr;
  t.bias = r.boolean("bias");
  if (auto qb = r.optional_boolean("qkv_bias")) t.qkv_bias = *qb;
  // 0 is what the field means when absent (the whole causal prefix), so a file may say it too.
  if (auto w = r.optional_integer("attention_window", 0, 1 << 24)) t.attention_window = static_cast<int>(*w);
  t.vocab = static_cast<int>(r.integer("vocab", 1, kMaxVocab));
  t.seq_len = static_cast<int>(r.integer("seq_len", 1, kMaxSeqLen));
  t.tied_embeddings = r.boolean("tied_embeddings");
  if (auto rows = r.optional_integer("position_rows", 1, kMaxSeqLen)) {
    if (t.position != PositionEmbedding::learned || *rows < t.seq_len)
      throw r.error("position_rows", "expected the rows of a learned position table, at least seq_len " +
                                         std::to_string(t.seq_len) + " (position_embedding \"learned\"), got " +
                                         std::to_string(*rows) + " with position_embedding \"" +
                                         to_string(t.position) + "\"");
    t.position_rows = static_cast<int>(*rows);
  }
  if (r.has("head_token_fraction")) {
    const nlohmann::json& f = r.raw("head_token_fraction");
    if (!f.is_number() || !(f.get<double>() > 0 && f.get<double>() <= 1))
      throw r.error("head_token_fraction",
                    "expected the share of positions the head runs on, in (0, 1] (1: causal LM; 0.15: BERT's "
                    "masked LM), got " + describe_json(f));
    t.head_token_fraction = f.get<double>();
  }
  if (r.has("dropout")) {
    const nlohmann::json& d = r.raw("dropout");
    if (!d.is_number() || !(d.get<double>() >= 0 && d.get<double>() < 1))
      throw r.error("dropout",
                    "expected the dropout probability, in [0, 1) (0.1: GPT-2 and Megatron-LM; 0: Llama), got " +
                        describe_json(d));
    t.dropout = d.get<double>();
  }
  t.global_batch = r.integer("global_batch", 1, std::int64_t{1} << 32);
  t.train_tokens = r.number("train_tokens", 1, 1e18);  // finite days and cost to rank by (as --tokens)
  r.finish();
  validate_transformer(t, file);
  return t;
}

nlohmann::json transformer_to_json(const Transformer& t) {
  nlohmann::json j{{"schema", "ztune.model/1"},
                        {"name", t.name},
                        {"source", t.source},
                        {"layers", t.layers},
                        {"hidden", t.hidden},
                        {"heads", t.heads},
                        {"kv_heads", t.kv_heads},
                        {"ffn_hidden", t.ffn_hidden},
                        {"activation", t.activation == Activation::gelu ? "gelu" : "swiglu"},
                        {"norm", t.norm == NormKind::layernorm ? "layernorm" : "rmsnorm"},
                        {"position_embedding", to_string(t.position)},
                        {"bias", t.bias},
                        {"vocab", t.vocab},
                        {"seq_len", t.seq_len},
                        {"tied_embeddings", t.tied_embeddings},
                        {"global_batch", t.global_batch},
                        {"train_tokens", t.train_tokens}};
  // Optional fields only where they differ from their defaults, so the content
  // digest of a model that does not use them stays what it was.
  if (t.position == PositionEmbedding::rotary && t.rope_theta != kRoformerRopeTheta) j["rope_theta"] = t.rope_theta;
  if (t.position == PositionEmbedding::rotary && t.rotary_fraction != 1) j["rotary_fraction"] = t.rotary_fraction;
  if (t.parallel_residual) j["parallel_residual"] = true;
  if (t.qkv_bias) j["qkv_bias"] = true;
  if (t.attention_window > 0) j["attention_window"] = t.attention_window;
  if (t.position == PositionEmbedding::learned && t.position_rows > t.seq_len) j["position_rows"] = t.position_rows;
  if (t.norm_eps != kDefaultNormEps) j["norm_eps"] = t.norm_eps;
  if (t.head_token_fraction != 1) j["head_token_fraction"] = t.head_token_fraction;
  if (t.dropout != kDefaultDropout) j["dropout"] = t.dropout;
  return j;
}

Transformer load_transformer(const std::string& name_or_path, int seq_len) {
  std::string path = resolve_catalog_path("models", name_or_path);
  nlohmann::json doc = read_json_file(path);
  Transformer t;
  if (looks_like_hf_config(doc)) {
    t = transformer_from_hf_config(doc, path, seq_len);
  } else if (doc.is_object() && !doc.contains("schema") &&
             (doc.contains("hidden_size") || doc.contains("n_embd") || doc.contains("d_model"))) {
    // A config.json without its family: say what each kind of file needs.
    throw InputError(path + ": $.model_type: missing: a Hugging Face config.json names its family in model_type "
                     "(or architectures), a ztune model file starts with \"schema\": \"ztune.model/1\"");
  } else {
    t = transformer_from_json(doc, path);
  }
  if (seq_len > 0 && t.position == PositionEmbedding::learned && t.position_rows > 0 && seq_len > t.position_rows)
    throw InputError("--seq " + std::to_string(seq_len) + ": " + path + "'s learned position table has " +
                     std::to_string(t.position_rows) + " rows (position_rows): no position to embed beyond it");
  if (seq_len > 0) t.seq_len = seq_len;
  return t;
}

}  // namespace ztune
