// libFuzzer target: the plan file reader (plan_file_from_json, what predict --plan,
// export and run read). An accepted plan file must survive plan_file_to_json →
// plan_file_from_json unchanged; when it embeds its model (and cluster) the plan is
// checked against them as predict does (check_plan_shape / check_plan).
#include "fuzz_support.hpp"
#include "ztune/vocab/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ztune::fuzz::read_bytes(data, size, "fuzz-plan.json", [](const nlohmann::json& doc, const std::string& file) {
    const ztune::PlanFile pf = ztune::plan_file_from_json(doc, file);
    const nlohmann::json out = ztune::plan_file_to_json(pf);
    ztune::fuzz::expect_same(out, ztune::plan_file_to_json(ztune::plan_file_from_json(out, file)),
                             file.c_str(), "plan file round trip changed the plan file");
    if (pf.model && pf.cluster) (void)ztune::check_plan(pf.plan, *pf.model, *pf.cluster);
    if (pf.model) (void)ztune::check_plan_shape(pf.plan, *pf.model);
  });
}
