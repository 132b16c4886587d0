// libFuzzer target: the run record reader (schema ztune.runrecord/1, written by
// ztune-worker): run_observation_from_record, what calibrate --records reads.
#include "fuzz_support.hpp"
#include "ztune/model/profile_fit.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ztune::fuzz::read_bytes(data, size, "fuzz-record.json", [](const nlohmann::json& doc, const std::string& file) {
    (void)ztune::run_observation_from_record(doc, file);
  });
}
