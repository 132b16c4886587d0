// libFuzzer target: the engine profile reader (engine_profile_from_json, schema
// ztune.engine/1, data/engines/*.json). An accepted profile must survive
// engine_profile_to_json → engine_profile_from_json unchanged.
#include "fuzz_support.hpp"
#include "ztune/vocab/engine_profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ztune::fuzz::read_bytes(data, size, "fuzz-engine.json", [](const nlohmann::json& doc, const std::string& file) {
    const ztune::EngineProfile e = ztune::engine_profile_from_json(doc, file);
    const nlohmann::json out = ztune::engine_profile_to_json(e);
    ztune::fuzz::expect_same(out, ztune::engine_profile_to_json(ztune::engine_profile_from_json(out, file)),
                             file.c_str(), "engine profile round trip changed the profile");
  });
}
