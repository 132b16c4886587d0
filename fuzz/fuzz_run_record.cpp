// libFuzzer target: the strict run record reader (run_record_from_json, schema
// ztune.runrecord/1, written by ztune-worker), which ztune run, calibrate --records
// and the fit's stored runs all read through; and the fit's view of the record
// (run_observation_from_record) on what it accepts.
#include "fuzz_support.hpp"
#include "ztune/calibration/profile_fit.hpp"
#include "ztune/vocab/run_record.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ztune::fuzz::read_bytes(data, size, "fuzz-record.json", [](const nlohmann::json& doc, const std::string& file) {
    const ztune::RunRecord record = ztune::run_record_from_json(doc, file);
    if (record.plan_file.model) (void)ztune::run_observation_from_record(record);
  });
}
