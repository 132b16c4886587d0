// libFuzzer target: the ztune model file reader (transformer_from_json). An accepted
// model must survive transformer_to_json → transformer_from_json unchanged.
#include "fuzz_support.hpp"
#include "ztune/vocab/transformer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ztune::fuzz::read_bytes(data, size, "fuzz-model.json", [](const nlohmann::json& doc, const std::string& file) {
    const ztune::Transformer t = ztune::transformer_from_json(doc, file);
    const nlohmann::json out = ztune::transformer_to_json(t);
    ztune::fuzz::expect_same(out, ztune::transformer_to_json(ztune::transformer_from_json(out, file)),
                             file.c_str(), "model round trip changed the model");
  });
}
