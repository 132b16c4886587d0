// libFuzzer target: the Hugging Face config.json import (transformer_from_hf_config,
// as load_transformer runs it when looks_like_hf_config). The imported model must be
// one ztune's own model file reader accepts back.
#include "fuzz_support.hpp"
#include "ztune/vocab/hf_import.hpp"
#include "ztune/vocab/transformer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ztune::fuzz::read_bytes(data, size, "fuzz-config.json", [](const nlohmann::json& doc, const std::string& file) {
    if (!ztune::looks_like_hf_config(doc)) return;
    const ztune::Transformer t = ztune::transformer_from_hf_config(doc, file, 0);
    const nlohmann::json out = ztune::transformer_to_json(t);
    ztune::fuzz::expect_same(out, ztune::transformer_to_json(ztune::transformer_from_json(out, file)),
                             file.c_str(), "imported model does not round-trip through the model file reader");
  });
}
