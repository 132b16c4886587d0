// ztune list clusters|models: the catalog, one line each with its headline figures.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "command.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune::cli {

Command add_list(CLI::App& root) {
  auto what = std::make_shared<std::string>();
  auto* app = root.add_subcommand("list", "List the catalog: clusters or models");
  app->add_option("what", *what, "clusters or models")->required()->check(CLI::IsMember({"clusters", "models"}));
  return {app, [what]() {
            // An empty table would read as "the catalog has none": a missing catalog is said.
            const std::filesystem::path dir = std::filesystem::path(data_dir()) / *what;
            std::error_code ec;
            if (!std::filesystem::is_directory(dir, ec))
              throw InputError(dir.string() + ": no catalog directory (ZTUNE_DATA_DIR, when set, must name the "
                                              "project's data/ folder)");
            if (*what == "clusters") {
              std::printf("%-18s %6s %5s %-22s %8s %10s  %s\n", "name", "nodes", "gpus", "gpu", "mem GiB", "TFLOP/s16",
                          "inter-node");
              for (const auto& n : catalog_names("clusters")) {
                Cluster c = load_cluster(n);
                double peak = std::max(c.node.gpu.peak_tflops_bf16, c.node.gpu.peak_tflops_fp16);
                // A device without 16-bit units (a CPU rank) shows "-", not 0.0.
                char peak_text[32] = "-";
                if (peak > 0) std::snprintf(peak_text, sizeof peak_text, "%.1f", peak);
                std::printf("%-18s %6d %5d %-22s %8.1f %10s  %d× %.1f GB/s %s\n", n.c_str(), c.nodes,
                            c.total_devices(), c.node.gpu.name.c_str(), c.node.gpu.memory_gb, peak_text,
                            c.inter_node.nics_per_node, c.inter_node.bandwidth_gbps, c.inter_node.name.c_str());
              }
            } else {
              std::printf("%-16s %10s %7s %7s %6s %7s %6s  %s\n", "name", "params", "layers", "hidden", "heads",
                          "vocab", "seq", "activation");
              for (const auto& n : catalog_names("models")) {
                Transformer t = load_transformer(n);
                std::printf("%-16s %10s %7d %7d %6d %7d %6d  %s\n", n.c_str(), params_text(t.total_params()).c_str(),
                            t.layers,
                            t.hidden, t.heads, t.vocab, t.seq_len,
                            t.activation == Activation::gelu ? "gelu" : "swiglu");
              }
            }
            return kExitOk;
          }};
}

}  // namespace ztune::cli
