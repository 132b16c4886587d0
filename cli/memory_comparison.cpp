#include "memory_comparison.hpp"

#include <cstdio>
#include <string>

namespace ztune::cli {

nlohmann::json memory_vs_prediction(const RunRecord& record, const MemoryPrediction& mp) {
  nlohmann::json out = nlohmann::json::object();
  if (record.memory.empty()) return out;
  const RunRecordRankMemory& rank = record.memory.at(record.peak_rank());
  // Every line the executor tracks (the CUDA runtime and the allocator's
  // fragmentation it does not).
  for (const char* line : {"params", "grads", "optimizer", "activations", "comm_buckets", "zero3_gathered",
                           "workspace", "logits"}) {
    double predicted = 0;
    for (std::size_t i = 0; i < kMemLineNames.size(); ++i)
      if (std::string(kMemLineNames[i]) == line) predicted = mp.gpu[i];
    const auto it = rank.by_category.find(line);
    const double measured = it == rank.by_category.end() ? 0.0 : it->second;
    out[line] = {{"measured_bytes", measured}, {"predicted_bytes", predicted}};
    // The predicted lines are the peak's composition: each is compared with
    // what the line held at the peak where the record says, else (an older
    // record) with the line's own peak.
    double against = measured;
    if (const auto at = rank.at_peak.find(line); at != rank.at_peak.end()) {
      out[line]["at_peak_bytes"] = at->second;
      against = at->second;
    }
    out[line]["error"] = against > 0 ? (predicted - against) / against : 0.0;
  }
  const double total = rank.peak_bytes;
  out["total"] = {{"rank", rank.rank},
                  {"measured_bytes", total},
                  {"predicted_bytes", mp.gpu_total_bytes},
                  {"error", total > 0 ? (mp.gpu_total_bytes - total) / total : 0.0}};
  return out;
}

std::string memory_at_peak_table(const RunRecord& record, const MemoryPrediction& mp) {
  if (record.memory.empty() || record.memory.at(record.peak_rank()).at_peak.empty()) return "";
  const RunRecordRankMemory& rank = record.memory.at(record.peak_rank());
  char row[160];
  std::snprintf(row, sizeof row, "memory at rank %d's peak (MiB)   predicted   measured\n", rank.rank);
  std::string out = row;
  for (std::size_t i = 0; i < kMemLineNames.size(); ++i) {
    const auto it = rank.at_peak.find(kMemLineNames[i]);
    const double measured = it == rank.at_peak.end() ? 0.0 : it->second;
    if (mp.gpu[i] == 0 && measured == 0) continue;
    std::snprintf(row, sizeof row, "  %-28s %11.2f %10.2f\n", kMemLineNames[i], mp.gpu[i] / 1048576.0,
                  measured / 1048576.0);
    out += row;
  }
  return out;
}

}  // namespace ztune::cli
