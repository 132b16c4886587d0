#pragma once
// Import of Hugging Face `config.json` files (GPT-2, GPT-NeoX, Llama, Mistral, Qwen2, MPT).
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "ztune/vocab/transformer.hpp"

namespace ztune {

/// True when the document carries Hugging Face's "model_type" or "architectures".
bool looks_like_hf_config(const nlohmann::json& doc);
/// Maps the family's fields onto Transformer. `seq_len` > 0 overrides the
/// config's maximum positions. Unknown families are an InputError naming them.
Transformer transformer_from_hf_config(const nlohmann::json& doc, const std::string& file, int seq_len);

}  // namespace ztune
