#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/json_reader.hpp"

using Catch::Matchers::Contains;

TEST_CASE("dgx2x16 loads from the catalog with its datasheet figures", "[cluster]") {
  auto c = ztune::load_cluster("dgx2x16");
  CHECK(c.total_devices() == 256);  // 16 DGX-2 nodes × 16 V100
  CHECK(c.node.gpu.memory_gb == 32);
  CHECK(c.node.gpu.peak_tflops_fp16 == 125);
  CHECK(c.inter_node_gbps_per_gpu() == Approx(8 * 12.5 / 16));
}

TEST_CASE("cluster round-trips through JSON", "[cluster]") {
  auto c = ztune::load_cluster("dgx2x16");
  auto again = ztune::cluster_from_json(ztune::cluster_to_json(c), "roundtrip");
  CHECK(again.node.host_memory_gb == c.node.host_memory_gb);
  CHECK(again.inter_node.nics_per_node == 8);
}

TEST_CASE("a wrong unit in a cluster file names file and path", "[cluster]") {
  auto doc = ztune::cluster_to_json(ztune::load_cluster("dgx2x16"));
  doc["node"]["gpu"]["memory_gb"] = "32GB";
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "dgx2x16.json"),
                      "dgx2x16.json: $.node.gpu.memory_gb: expected a number > 0 and at most 1e+06, got \"32GB\"");
}
