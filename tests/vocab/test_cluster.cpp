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

// A figure no GPU has is the right one in another unit (the oracle: the
// datasheets' units): nvidia-smi's MiB, a datasheet's TB/s or PFLOP/s, a
// NIC's Gb/s line rate. Each is refused naming the unit it looks like.
TEST_CASE("a GPU figure in another unit (MiB or TB/s or PFLOP/s or Gb/s) is refused naming the unit", "[cluster]") {
  const auto good = ztune::cluster_to_json(ztune::load_cluster("dgx-h100"));
  auto refused = [&](const char* a, const char* b, const char* c, double v, const std::string& said) {
    auto doc = good;
    auto& slot = c != nullptr ? doc[a][b][c] : doc[a][b];
    slot = v;
    INFO(said);
    REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "mine.json"), Contains(said));
  };
  auto gpu = [&](const char* key, double v, const std::string& said) { refused("node", "gpu", key, v, said); };
  gpu("memory_gb", 81559, "mine.json: $.node.gpu.memory_gb: expected the GPU's memory in GiB");
  gpu("memory_gb", 81559, "which looks like MiB");
  gpu("hbm_bandwidth_gbps", 3.35, "$.node.gpu.hbm_bandwidth_gbps: expected GB/s (an H100 SXM is 3350), got 3.35, which looks like TB/s");
  auto peak = good;
  peak["node"]["gpu"]["peak_tflops"]["bf16"] = 0.989;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(peak, "mine.json"), Contains("peak_tflops.bf16") && Contains("looks like PFLOP/s"));
  refused("fabric", "inter_node", "bandwidth_gbps", 400,
          "$.fabric.inter_node.bandwidth_gbps: expected GB/s per NIC in one direction (line rate in Gb/s / 8: 400 "
          "Gb/s NDR is 50), got 400, which looks like Gb/s");
  // The catalog's own figures, and a CPU cluster's small ones, pass.
  for (const char* name : {"dgx-h100", "dgx-h200", "dgx2x16", "dgx-a100-40gb", "local-cpu"})
    CHECK_NOTHROW(ztune::load_cluster(name));
}
