// libFuzzer target: the cluster reader (cluster_from_json, what load_cluster runs on
// a file). An accepted cluster must survive cluster_to_json → cluster_from_json unchanged.
#include "fuzz_support.hpp"
#include "ztune/vocab/cluster.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ztune::fuzz::read_bytes(data, size, "fuzz-cluster.json", [](const nlohmann::json& doc, const std::string& file) {
    const ztune::Cluster c = ztune::cluster_from_json(doc, file);
    const nlohmann::json out = ztune::cluster_to_json(c);
    ztune::fuzz::expect_same(out, ztune::cluster_to_json(ztune::cluster_from_json(out, file)),
                             file.c_str(), "cluster round trip changed the cluster");
  });
}
