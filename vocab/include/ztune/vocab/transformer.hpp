#pragma once
// The model being trained: a decoder-only transformer (GPT, Llama families).
#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace ztune {

enum class Activation { gelu, swiglu };
enum class NormKind { layernorm, rmsnorm };
// learned: a seq_len × h table (GPT-2); rotary: RoPE on Q and K (Su et al. 2021);
// alibi: a per-head linear bias on the attention scores (Press et al. 2022; MPT);
// none: no position information (causal attention alone; MPT with every option off).
enum class PositionEmbedding { learned, rotary, alibi, none };

/// "learned", "rotary", "alibi" or "none", as the model file spells them.
const char* to_string(PositionEmbedding p);

/// RoFormer's rotary base (Su et al. 2021, §3.2.2), the default of Hugging Face
/// configs and of Megatron-LM's --rotary-base.
inline constexpr double kRoformerRopeTheta = 10000;

/// The norms' ε when a model file (or a GPT-2 or GPT-NeoX config.json) does not
/// give one: GPT-2's layer_norm_epsilon, GPT-NeoX's layer_norm_eps, Llama 2/3's
/// rms_norm_eps; torch.nn.LayerNorm's and Megatron-LM's --norm-epsilon default.
inline constexpr double kDefaultNormEps = 1e-5;
/// The largest shape a model may state, one set of bounds for model files and
/// Hugging Face configs: far past any model trained, and products of them
/// (parameters, FLOPs) stay finite.
inline constexpr int kMaxLayers = 100000;
inline constexpr int kMaxHidden = 1 << 20;
inline constexpr int kMaxHeads = 1 << 16;
inline constexpr int kMaxFfnHidden = 1 << 22;
inline constexpr int kMaxVocab = 1 << 24;
inline constexpr int kMaxSeqLen = 1 << 24;
/// GPT-2's and Megatron-LM's dropout, which Korthikanti et al. 2022's
/// activation count (its 1-byte masks) assumes: a model file without "dropout".
inline constexpr double kDefaultDropout = 0.1;

struct Transformer {
  std::string name;
  std::string source;
  /// Not in the file: seq_len is an imported Hugging Face config's maximum
  /// positions (max_position_embeddings, n_positions), not a length chosen to
  /// train at; the shells say so (Mistral-7B's is 32,768).
  bool seq_len_is_position_limit = false;
  int layers = 0;
  int hidden = 0;          // h
  int heads = 0;           // a
  int kv_heads = 0;        // = heads without grouped-query attention
  int ffn_hidden = 0;      // 4h for GPT; ~8h/3 for SwiGLU models
  Activation activation = Activation::gelu;
  NormKind norm = NormKind::layernorm;
  double norm_eps = kDefaultNormEps;  // ε of every norm, LayerNorm or RMSNorm (Llama 1, Qwen2, Gemma 1e-6)
  PositionEmbedding position = PositionEmbedding::learned;
  double rope_theta = kRoformerRopeTheta;  // rotary base θ (Llama 1/2 10^4, Llama 3 5·10^5)
  double rotary_fraction = 1;  // share of each head's channels RoPE turns (GPT-NeoX's rotary_pct 0.25)
  bool parallel_residual = false;  // GPT-J/NeoX block: x + attn(ln1(x)) + mlp(ln2(x)), not sequential
  bool bias = true;        // linear layers and norms carry biases (GPT) or not (Llama)
  bool qkv_bias = false;   // without `bias`: the Q, K and V projections still carry biases (Qwen2)
  /// Sliding-window attention (Mistral's sliding_window): each query attends to
  /// itself and the attention_window − 1 tokens before it; 0 = the whole causal prefix.
  int attention_window = 0;
  int vocab = 0;           // V
  int seq_len = 0;         // s
  /// Rows of a learned position table longer than the sequences trained
  /// (GPT-2's n_positions 1024 trained at 512): the table is the model's,
  /// whatever length it trains at. 0: seq_len rows (ztune's own model files,
  /// where --seq sets both).
  int position_rows = 0;
  bool tied_embeddings = true;
  /// Share of each sequence's positions the output head (logits GEMM, softmax,
  /// loss) runs on: 1 for causal language modelling (every position predicts the
  /// next token); 0.15 for BERT's masked-LM pre-training, whose implementations
  /// gather the masked positions before the decoder (Devlin et al. 2019 mask
  /// 15 %; NVIDIA's and DeepSpeed's BERT index_select them).
  double head_token_fraction = 1;
  /// Probability of the hidden-state and attention-probability dropouts
  /// (Megatron-LM --hidden-dropout/--attention-dropout, GPT-2's resid/attn
  /// pdrop: 0.1; Llama, Nemotron, OLMo: 0). At 0 no masks are kept and no
  /// dropout kernel runs (PyTorch's dropout returns its input at p = 0), so
  /// Korthikanti et al.'s activation count loses its masks (memory_model).
  double dropout = kDefaultDropout;
  std::int64_t global_batch = 0;  // default global batch (sequences) for the tuner
  double train_tokens = 0;        // default token budget for "days to train"

  [[nodiscard]] int head_dim() const { return hidden / heads; }
  /// Rows of the learned position table (position_rows, else seq_len).
  [[nodiscard]] int learned_position_rows() const { return position_rows > seq_len ? position_rows : seq_len; }
  /// Whether training keeps dropout masks and runs dropout kernels (dropout > 0).
  [[nodiscard]] bool has_dropout() const { return dropout > 0; }
  /// Whether a sliding window cuts the causal prefix at this sequence length.
  [[nodiscard]] bool windowed() const { return attention_window > 0 && attention_window < seq_len; }
  /// The share of the causal (query, key) pairs the window keeps: for s
  /// tokens and a window of w, (w·s − w(w−1)/2) / (s(s+1)/2); 1 without a window.
  [[nodiscard]] double attended_fraction() const;
  /// Channels of each head RoPE turns: int(head_dim · rotary_fraction), as GPT-NeoX's rotary_ndims.
  [[nodiscard]] int rotary_dims() const { return static_cast<int>(head_dim() * rotary_fraction); }
  /// Parameters of one transformer block (attention, MLP, two norms).
  [[nodiscard]] double params_per_layer() const;
  /// The block's four weight matrices in forward order, Megatron's modules:
  /// fused QKV h·(h + 2·kv·d), attention output h², FC1 h·f (with SwiGLU the
  /// fused gate and up projection, 2·h·f), FC2 f·h. THE one list of their
  /// sizes: params_per_layer, largest_module_params and ZeRO-3's release rule
  /// (op_costs zero3_backward_regather_share) read it.
  [[nodiscard]] std::array<double, 4> block_weight_params() const;
  /// The block's largest weight matrix: FC1, the unit DeepSpeed ZeRO-3 fetches and releases.
  [[nodiscard]] double largest_module_params() const { return block_weight_params()[2]; }
  /// Token embedding (+ learned positions) parameters.
  [[nodiscard]] double embedding_params() const;
  /// Parameters of the untied LM head (0 when tied) plus the final norm.
  [[nodiscard]] double head_params() const;
  /// Exact total parameter count Ψ.
  [[nodiscard]] double total_params() const;
};

Transformer transformer_from_json(const nlohmann::json& doc, const std::string& file);
nlohmann::json transformer_to_json(const Transformer& t);
/// A catalog name (data/models/NAME.json), a ztune model file, or a Hugging Face
/// config.json (GPT-2, GPT-NeoX, Llama, Mistral, Qwen2, Phi-3, MPT). `seq_len` > 0 overrides the sequence length.
Transformer load_transformer(const std::string& name_or_path, int seq_len = 0);
/// Checks the shape's internal consistency (heads divide hidden, ...). Throws InputError.
void validate_transformer(const Transformer& t, const std::string& file);

}  // namespace ztune
