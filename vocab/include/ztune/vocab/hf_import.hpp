#pragma once
// Import of Hugging Face `config.json` files (GPT-2, GPT-NeoX, Llama, Mistral, Qwen2, Phi-3, MPT).
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "ztune/vocab/transformer.hpp"

namespace ztune {

/// True when the document carries Hugging Face's "model_type" or "architectures".
bool looks_like_hf_config(const nlohmann::json& doc);
/// Maps the family's fields onto Transformer. `seq_len` > 0 overrides the
/// config's maximum positions. Unknown families are an InputError naming them.
Transformer transformer_from_hf_config(const nlohmann::json& doc, const std::string& file, int seq_len);
/// Whether `t` came from transformer_from_hf_config (its source says so): its
/// modules are then Hugging Face's (Llama, Mistral and Qwen2 keep q/k/v and
/// gate/up as separate projections), not Megatron-LM's fused ones.
[[nodiscard]] bool imported_from_hf_config(const Transformer& t);

}  // namespace ztune
