// The data catalog (data/clusters, data/models): every file loads, and its
// figures match the datasheets and papers it cites. The expected values below
// are written by hand from those sources (with the unit conversion spelled
// out), not read back from the files.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

/// File stems in data/<kind>/, listed with std::filesystem (not catalog_names).
std::set<std::string> files_in(const std::string& kind) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(ZTUNE_TEST_DATA_DIR) / kind))
    if (e.path().extension() == ".json") out.insert(e.path().stem().string());
  return out;
}

}  // namespace

TEST_CASE("every catalog cluster loads, is named after its file and cites a source", "[catalog]") {
  const auto stems = files_in("clusters");
  REQUIRE(stems.size() >= 10);
  for (const auto& stem : stems) {
    INFO("data/clusters/" << stem << ".json");
    ztune::Cluster c;
    REQUIRE_NOTHROW(c = ztune::load_cluster(stem));
    CHECK(c.name == stem);
    CHECK(c.source.size() > 40);
    CHECK(c.total_devices() >= 1);
  }
  const auto listed = ztune::catalog_names("clusters");
  CHECK(std::set<std::string>(listed.begin(), listed.end()) == stems);
}

TEST_CASE("every catalog model loads, is named after its file and cites a source", "[catalog]") {
  const auto stems = files_in("models");
  REQUIRE(stems.size() >= 17);
  for (const auto& stem : stems) {
    INFO("data/models/" << stem << ".json");
    ztune::Transformer t;
    REQUIRE_NOTHROW(t = ztune::load_transformer(stem));
    CHECK(t.name == stem);
    CHECK(t.source.size() > 40);
    CHECK(t.hidden % t.heads == 0);
    CHECK(t.global_batch > 0);
    CHECK(t.train_tokens > 0);
  }
  const auto listed = ztune::catalog_names("models");
  CHECK(std::set<std::string>(listed.begin(), listed.end()) == stems);
}

TEST_CASE("the catalog holds the entries issue 2 names", "[catalog]") {
  const auto clusters = files_in("clusters");
  for (const char* n : {"dgx2", "dgx2x16", "dgx-a100-40gb", "dgx-a100-80gb", "dgx-a100-80gbx16", "selene-3072",
                        "dgx-h100", "dgx-h100x32", "dgx-h200", "v100-workstation", "h200-box", "local-cpu"})
    CHECK(clusters.count(n) == 1);
  const auto models = files_in("models");
  for (const char* n : {"gpt2-1.5b", "megatron-8.3b", "turing-nlg-17b", "20b", "40b", "60b", "80b", "100b", "170b",
                        "200b", "gpt3-175b", "turing-530b", "1t", "llama-7b", "llama-70b", "llama-405b", "tiny"})
    CHECK(models.count(n) == 1);
}

namespace {

/// One cluster's figures as its datasheets print them.
struct DatasheetCluster {
  const char* file;
  int nodes;
  int gpus_per_node;
  const char* gpu;
  double memory_gb;
  double fp16_tflops;   // dense tensor core
  double bf16_tflops;   // 0 = no bf16 (V100)
  double fp32_tflops;
  double hbm_gbps;
  double intra_gbps;    // per GPU, one direction
  int nics;             // inter-node NICs per node
  double nic_gbps;      // per NIC, one direction
};

// V100: datasheet 125 TFLOP/s tensor, 15.7 fp32, 900 GB/s; NVLink2 300 GB/s
// bidirectional per GPU. A100: 312 dense (624 sparse), 19.5 fp32, 1555 GB/s
// (40GB) / 2039 GB/s (80GB); NVLink3 600 GB/s bidirectional. H100/H200 SXM:
// 1979 sparse → 989.4 dense, 67 fp32, 3350 / 4800 GB/s; NVLink4 900 GB/s
// bidirectional. InfiniBand EDR/HDR/NDR: 100/200/400 Gb/s per port.
const DatasheetCluster kDatasheets[] = {
    {"dgx2", 1, 16, "V100-SXM3-32GB", 32, 125, 0, 15.7, 900, 300.0 / 2, 8, 100.0 / 8},
    {"dgx2x16", 16, 16, "V100-SXM3-32GB", 32, 125, 0, 15.7, 900, 300.0 / 2, 8, 100.0 / 8},
    {"dgx-a100-40gb", 1, 8, "A100-SXM4-40GB", 40, 312, 312, 19.5, 1555, 600.0 / 2, 8, 200.0 / 8},
    {"dgx-a100-80gb", 1, 8, "A100-SXM4-80GB", 80, 312, 312, 19.5, 2039, 600.0 / 2, 8, 200.0 / 8},
    {"dgx-a100-80gbx16", 16, 8, "A100-SXM4-80GB", 80, 312, 312, 19.5, 2039, 600.0 / 2, 8, 200.0 / 8},
    {"dgx-a100-80gbx64", 64, 8, "A100-SXM4-80GB", 80, 312, 312, 19.5, 2039, 600.0 / 2, 8, 200.0 / 8},
    // Narayanan et al. 2021: 3072 A100 80GB, eight 200 Gb/s HDR HCAs per node.
    {"selene-3072", 3072 / 8, 8, "A100-SXM4-80GB", 80, 312, 312, 19.5, 2039, 600.0 / 2, 8, 200.0 / 8},
    {"dgx-h100", 1, 8, "H100-SXM5-80GB", 80, 1978.9 / 2, 1978.9 / 2, 67, 3350, 900.0 / 2, 8, 400.0 / 8},
    {"dgx-h100x4", 4, 8, "H100-SXM5-80GB", 80, 1978.9 / 2, 1978.9 / 2, 67, 3350, 900.0 / 2, 8, 400.0 / 8},
    {"dgx-h100x32", 32, 8, "H100-SXM5-80GB", 80, 1978.9 / 2, 1978.9 / 2, 67, 3350, 900.0 / 2, 8, 400.0 / 8},
    {"dgx-h100x128", 128, 8, "H100-SXM5-80GB", 80, 1978.9 / 2, 1978.9 / 2, 67, 3350, 900.0 / 2, 8, 400.0 / 8},
    {"dgx-h200", 1, 8, "H200-SXM-141GB", 141, 1978.9 / 2, 1978.9 / 2, 67, 4800, 900.0 / 2, 8, 400.0 / 8},
    // DGX Station: 4 V100 32GB, each GPU's six 25 GB/s NVLink2 links; dual 10 GbE.
    {"v100-workstation", 1, 4, "V100-SXM2-32GB", 32, 125, 0, 15.7, 900, 6 * 25.0, 1, 10.0 / 8},
    {"h200-box", 1, 1, "H200-SXM-141GB", 141, 1978.9 / 2, 1978.9 / 2, 67, 4800, 900.0 / 2, 1, 25.0 / 8},
};

}  // namespace

TEST_CASE("catalog clusters carry their datasheet figures in ztune's units", "[catalog]") {
  for (const auto& d : kDatasheets) {
    INFO(d.file);
    const auto c = ztune::load_cluster(d.file);
    CHECK(c.device_kind == ztune::DeviceKind::gpu);
    CHECK(c.nodes == d.nodes);
    CHECK(c.node.gpus == d.gpus_per_node);
    CHECK(c.node.gpu.name == d.gpu);
    CHECK(c.node.gpu.memory_gb == Approx(d.memory_gb));
    CHECK(c.node.gpu.peak_tflops_fp16 == Approx(d.fp16_tflops).epsilon(1e-3));
    CHECK(c.node.gpu.peak_tflops_bf16 == Approx(d.bf16_tflops).epsilon(1e-3));
    CHECK(c.node.gpu.peak_tflops_fp32 == Approx(d.fp32_tflops));
    CHECK(c.node.gpu.hbm_bandwidth_gbps == Approx(d.hbm_gbps));
    CHECK(c.intra_node.bandwidth_gbps == Approx(d.intra_gbps));
    CHECK(c.inter_node.nics_per_node == d.nics);
    CHECK(c.inter_node.bandwidth_gbps == Approx(d.nic_gbps));
  }
  // V100 has no bf16 unit: the loader keeps the 0, and the peak for bf16 is 0.
  CHECK(ztune::load_cluster("dgx2").node.gpu.peak_flops(ztune::Precision::bf16) == 0);
  // Selene's 3072 GPUs and the per-GPU share of the node's eight HDR NICs (25 GB/s).
  const auto selene = ztune::load_cluster("selene-3072");
  CHECK(selene.total_devices() == 3072);
  CHECK(selene.inter_node_gbps_per_gpu() == Approx(8 * 25.0 / 8));
}

TEST_CASE("overriding the node count (what --nodes does) scales the GPU total", "[catalog]") {
  auto c = ztune::load_cluster("dgx-h100");
  c.nodes = 16;  // what InputFlags does for --nodes 16
  CHECK(c.total_devices() == 128);
}

namespace {

/// A model's size as its source prints it, and how close ztune must come.
struct PublishedSize {
  const char* file;
  double params;    // as published
  double rel_tol;   // |ztune / published − 1| allowed
  const char* why;  // the source, and why the tolerance is what it is
};

const PublishedSize kPublished[] = {
    {"gpt2-1.5b", 1557611200.0, 1e-9,
     "Hugging Face GPT2LMHeadModel(gpt2-xl).num_parameters(); the paper's Table 2 prints 1542M"},
    {"megatron-8.3b", 8.3e9, 0.05 / 8.3, "Shoeybi et al. 2019 Table 2: 8.3B (rounding of the last digit)"},
    {"turing-nlg-17b", 17e9, 0.5 / 17, "Turing-NLG blog: 17B (rounding)"},
    {"20b", 20e9, 0.5 / 20, "ZeRO Table 10: 20B (rounding)"},
    {"40b", 40e9, 0.5 / 40, "ZeRO Table 10: 40B (rounding)"},
    {"60b", 60e9, 0.5 / 60, "ZeRO Table 10: 60B (rounding)"},
    // ZeRO names models by ~12·L·h²; the 0.42B of embeddings at h = 8192 come on top.
    {"80b", 80e9, 0.015, "ZeRO Table 10: 80B, nominal (12·L·h² = 80.53B)"},
    {"100b", 100e9, 0.015, "ZeRO Table 10: 100B, nominal (12·L·h² = 100.66B)"},
    {"170b", 170e9, 0.015, "ZeRO Table 10: 170B, nominal (12·L·h² = 170.73B)"},
    {"200b", 200e9, 0.5 / 200, "ztune's 200B extension of the ZeRO family (rounding)"},
    {"gpt3-175b", 175.0e9, 0.005, "Brown et al. 2020 Table 2.1: 175.0B; the shape gives 174.6B"},
    {"turing-530b", 529.6e9, 0.05 / 529.6, "Narayanan et al. 2021 Table 1: 529.6B (rounding)"},
    {"1t", 1008.0e9, 0.05 / 1008.0, "Narayanan et al. 2021 Table 1: 1008.0B (rounding)"},
    {"llama-7b", 6.7e9, 0.05 / 6.7, "Touvron et al. 2023a Table 2: 6.7B (rounding)"},
    {"llama-70b", 70e9, 0.016, "Llama 2: '70B' nominal; the shape gives 68.98B (-1.5%)"},
    {"llama-405b", 405e9, 0.0025, "Llama 3: '405B' nominal; the shape gives 405.85B (+0.2%)"},
    {"deepspeed-1t", 1e12, 0.09,
     "DeepSpeed 3D-parallelism blog (2020): 'one trillion' nominal for 298 layers at hidden 17,408; "
     "12·L·h² alone is 1.084T and the shape gives 1.085T (+8.5%)"},
};

}  // namespace

TEST_CASE("catalog models have their published parameter counts", "[catalog]") {
  for (const auto& p : kPublished) {
    INFO(p.file << ": " << p.why);
    const auto t = ztune::load_transformer(p.file);
    INFO("ztune counts " << t.total_params() / 1e9 << "B");
    CHECK(std::abs(t.total_params() / p.params - 1.0) <= p.rel_tol);
  }
  // Every model except the test models `tiny`, `tiny-llama` and `tiny-neox` has a published size to check.
  CHECK(std::size(kPublished) + 3 == files_in("models").size());
  // tiny-neox by hand: GPT's 12h² + 13h per layer, embedding and the untied head
  // 256·64 each, and the final LayerNorm's 2·64.
  CHECK(ztune::load_transformer("tiny-neox").total_params() == 4 * (12.0 * 64 * 64 + 13 * 64) + 2 * 256 * 64 + 2 * 64);
  // tiny-llama by hand: embedding 256·64; per layer Q, K, V, O 64·(64 + 2·32) + 64·64,
  // SwiGLU 3·64·176, two RMSNorm scales 2·64; final norm 64 and the untied head 256·64.
  const double per_layer = 64.0 * (64 + 2 * 32) + 64 * 64 + 3 * 64 * 176 + 2 * 64;
  CHECK(ztune::load_transformer("tiny-llama").total_params() == 256 * 64 + 4 * per_layer + 64 + 256 * 64);
}

TEST_CASE("GQA models have fewer kv heads than heads", "[catalog]") {
  for (const char* n : {"llama-70b", "llama-405b"}) {
    INFO(n);
    const auto t = ztune::load_transformer(n);
    CHECK(t.kv_heads == 8);  // Llama 2 70B and Llama 3 405B: 8 kv heads
    CHECK(t.heads % t.kv_heads == 0);
  }
  CHECK(ztune::load_transformer("llama-7b").kv_heads == 32);
}

TEST_CASE("a name that is neither a file nor in the catalog lists the catalog", "[catalog][bad-input]") {
  REQUIRE_THROWS_WITH(ztune::load_cluster("dgx-z100"),
                      Contains("--cluster dgx-z100: not a file and not a catalog cluster (did you mean dgx-h100?) "
                               "(catalog: ") &&
                          Contains("dgx-h100") && Contains("selene-3072"));
  REQUIRE_THROWS_WITH(ztune::load_transformer("gpt5"),
                      Contains("--model gpt5: not a file and not a catalog model (catalog: ") && Contains("llama-405b"));
  REQUIRE_THROWS_WITH(ztune::load_transformer("no/such/config.json"), "no/such/config.json: no such file");
  // Typos of a catalog name get the nearest one; a catalog name typed as a file, the flag that takes it.
  REQUIRE_THROWS_WITH(ztune::load_transformer("llama-7"), Contains("(did you mean llama-7b?)"));
  REQUIRE_THROWS_WITH(ztune::load_transformer("Llama-7B"), Contains("(did you mean llama-7b?)"));
  // Spaces around a catalog name (the planner trims them; a file may begin with one): shown and said.
  REQUIRE_THROWS_WITH(ztune::load_cluster(" dgx-h100 "),
                      Contains("--cluster \" dgx-h100 \": not a file and not a catalog cluster (did you mean "
                               "dgx-h100?) (the name has spaces around it)"));
  REQUIRE_THROWS_WITH(ztune::load_transformer("LLAMA-7B"), Contains("(did you mean llama-7b?)"));
  REQUIRE_THROWS_WITH(ztune::load_transformer("llama-7b.json"),
                      "llama-7b.json: no such file (the catalog's model is --model llama-7b)");
}

TEST_CASE("a Hugging Face checkpoint folder is read through its config.json and other folders are named as such",
          "[catalog][hf]") {
  const fs::path dir = fs::temp_directory_path() / ("ztune-test-hf-folder-" + std::to_string(::getpid()));
  fs::create_directories(dir / "Llama-2-7b-hf");
  fs::copy_file(std::string(ZTUNE_SOURCE_DIR) + "/tests/vocab/fixtures/hf/llama-2-7b/config.json",
                dir / "Llama-2-7b-hf" / "config.json");
  fs::create_directories(dir / "empty");
  const auto t = ztune::load_transformer((dir / "Llama-2-7b-hf").string());
  CHECK(t.name == "Llama-2-7b-hf");
  CHECK(t.total_params() == 6738415616.0);  // LlamaForCausalLM's num_parameters(), as the fixture's test
  REQUIRE_THROWS_WITH(ztune::load_transformer((dir / "empty").string()), Contains("is a directory"));
  // One rule for names the catalog has: a bare name is the catalog's, a path
  // (./NAME) the local one, for a folder and for a file alike.
  const fs::path here = fs::current_path();
  fs::create_directories(dir / "cwd" / "tiny");
  fs::copy_file(dir / "Llama-2-7b-hf" / "config.json", dir / "cwd" / "tiny" / "config.json");
  fs::copy_file(dir / "Llama-2-7b-hf" / "config.json", dir / "cwd" / "gpt3-175b");
  fs::current_path(dir / "cwd");
  const double tiny = ztune::load_transformer(std::string(ZTUNE_TEST_DATA_DIR) + "/models/tiny.json").total_params();
  CHECK(ztune::load_transformer("tiny").total_params() == tiny);
  CHECK(ztune::load_transformer("./tiny").total_params() == 6738415616.0);
  CHECK(ztune::load_transformer("gpt3-175b").total_params() > 1.7e11);
  CHECK(ztune::load_transformer("./gpt3-175b").total_params() == 6738415616.0);
  fs::current_path(here);
  fs::remove_all(dir);
}

// A model named through a symbolic link that loops or dangles: said as such
// (it had read "no such file", or, for a folder's config.json, "is a
// directory"). Oracle: the links made here and ELOOP's strerror.
TEST_CASE("a model path through a broken symbolic link says it is one", "[catalog][bad-input]") {
  const fs::path dir = fs::temp_directory_path() / ("ztune-test-broken-link-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "loop");
  fs::create_symlink("config.json", dir / "loop" / "config.json");  // points at itself
  fs::create_symlink(dir / "nowhere.json", dir / "dangling.json");
  REQUIRE_THROWS_WITH(ztune::load_transformer((dir / "loop").string()),
                      Contains((dir / "loop" / "config.json").string() + ": a symbolic link that loops (" +
                               std::strerror(ELOOP) + "), expected the folder's config.json"));
  REQUIRE_THROWS_WITH(ztune::load_transformer((dir / "loop" / "config.json").string()),
                      Contains("a symbolic link that loops"));
  REQUIRE_THROWS_WITH(ztune::load_transformer((dir / "dangling.json").string()),
                      Contains((dir / "dangling.json").string() + ": a symbolic link to a missing file"));
  fs::remove_all(dir);
}

TEST_CASE("the examples in docs/formats.md load", "[catalog][docs]") {
  const std::string path = std::string(ZTUNE_SOURCE_DIR) + "/docs/formats.md";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string md = text.str();
  std::set<std::string> seen;
  for (std::size_t at = md.find("```json\n"); at != std::string::npos; at = md.find("```json\n", at)) {
    at += 8;
    const std::size_t end = md.find("```", at);
    REQUIRE(end != std::string::npos);
    const std::string where = path + " (example " + std::to_string(seen.size() + 1) + ")";
    INFO(where);
    const auto doc = ztune::parse_json_text(md.substr(at, end - at), where);
    const std::string schema = doc.at("schema").get<std::string>();
    if (schema == "ztune.cluster/1") CHECK_NOTHROW(ztune::cluster_from_json(doc, where));
    else if (schema == "ztune.model/1") CHECK_NOTHROW(ztune::transformer_from_json(doc, where));
    else if (schema == "ztune.planfile/1") CHECK_NOTHROW(ztune::plan_file_from_json(doc, where));
    else if (schema == "ztune.profile/1") CHECK_NOTHROW(ztune::profile_from_json(doc, where));
    else FAIL("unexpected schema " << schema);
    seen.insert(schema);
    at = end + 3;
  }
  CHECK(seen == std::set<std::string>{"ztune.cluster/1", "ztune.model/1", "ztune.planfile/1", "ztune.profile/1"});
}
