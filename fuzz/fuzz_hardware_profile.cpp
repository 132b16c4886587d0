// libFuzzer target: the hardware profile reader (profile_from_json, what load_profile
// runs on data/profiles/*.json and --profile files). An accepted profile must survive
// profile_to_json → profile_from_json unchanged.
#include "fuzz_support.hpp"
#include "ztune/vocab/hardware_profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ztune::fuzz::read_bytes(data, size, "fuzz-profile.json", [](const nlohmann::json& doc, const std::string& file) {
    const ztune::HardwareProfile p = ztune::profile_from_json(doc, file);
    const nlohmann::json out = ztune::profile_to_json(p);
    ztune::fuzz::expect_same(out, ztune::profile_to_json(ztune::profile_from_json(out, file)),
                             file.c_str(), "hardware profile round trip changed the profile");
  });
}
