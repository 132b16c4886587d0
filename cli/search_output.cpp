#include "search_output.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>

#include "ztune/vocab/text.hpp"
#include "ztune/tuner/objective.hpp"

namespace ztune::cli {

namespace {


std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string offload_text(const Plan& p) {
  std::string s;
  if (p.offload_optimizer != OffloadTarget::none) s += "opt:" + to_string(p.offload_optimizer);
  if (p.offload_params != OffloadTarget::none) s += std::string(s.empty() ? "" : " ") + "par:" + to_string(p.offload_params);
  if (p.cpu_checkpointing) s += std::string(s.empty() ? "" : " ") + "ckpt:cpu";
  return s.empty() ? "-" : s;
}

std::string layout_text(const Plan& p) {
  std::string s = std::to_string(p.dp) + "×" + std::to_string(p.tp) + "×" + std::to_string(p.pp);
  if (p.virtual_stages > 1) s += "×" + std::to_string(p.virtual_stages);
  if (p.cp > 1) s += " cp" + std::to_string(p.cp);  // context parallelism (dp×tp×pp×cp ranks)
  if (p.ulysses > 1) s += " u" + std::to_string(p.ulysses);  // DeepSpeed-Ulysses (dp×tp×pp×u ranks)
  if (p.dp_shard > 0) s += " shard" + std::to_string(p.dp_shard);  // hybrid sharding: ZeRO-3 in groups of dp_shard
  return s;
}

std::string zero_text(const Plan& p) {
  std::string s = std::to_string(p.zero_stage);
  if (p.zeropp) s += "++";
  if (p.onebit_adam) s += " 1bit";
  return s;
}

/// Text columns; numeric columns are right-aligned.
void print_columns(std::ostream& os, const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], display_width(r[i]));
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      const std::string pad(width[i] - display_width(r[i]), ' ');
      line += (i == 0 ? "" : "  ") + (right[i] ? pad + r[i] : r[i] + (i + 1 == r.size() ? "" : pad));
    }
    os << line << "\n";
  }
}

// "-" for the standard dense kernel, "flash", "cudnn", or the sparse layout and block.
std::string attention_text(const Plan& p) {
  if (p.sparse_attention != SparseLayout::none)
    return to_string(p.sparse_attention) + "/" + std::to_string(p.sparse_block);
  return fused_attention(p.attention) ? to_string(p.attention) : "-";
}

}  // namespace

std::string sequence_note(const Transformer& m) {
  if (!m.seq_len_is_position_limit) return "";
  return "note: " + m.name + " is trained at " + std::to_string(m.seq_len) +
         "-token sequences, the longest its config allows (its maximum positions: max_position_embeddings, "
         "n_positions or max_seq_len, by model type), not a length it was told to train at: --seq N sets it";
}

namespace {

// A column's unit, chosen so that the table's figures are not all 0.0: the
// tiny model on CPU ranks uses a few MiB (byte_unit_for) and GFLOP/s, a short
// token budget takes hours, not days.
struct Unit {
  const char* name;
  double per;  // base units (bytes, FLOP/s, days) in one of it
};

// A table with no figure at all (closest plans, none timed) keeps the usual TFLOP/s.
Unit flops_unit(double largest_tflops) {
  return largest_tflops >= 0.1 || largest_tflops <= 0 ? Unit{"TFLOP/s", 1} : Unit{"GFLOP/s", 1e-3};
}

// Days unless the shortest is under one: then hours, minutes or seconds.
Unit duration_unit(double shortest_days) {
  if (!(shortest_days < 1)) return {"days", 1};
  if (shortest_days * 24 >= 1) return {"hours", 1.0 / 24};
  if (shortest_days * 24 * 60 >= 1) return {"minutes", 1.0 / (24 * 60)};
  return {"seconds", 1.0 / 86400};
}

}  // namespace

void print_plan_table(std::ostream& os, const SearchResult& r, const std::vector<Candidate>& plans) {
  bool any_simulated = false;
  for (const auto& c : plans) any_simulated |= c.simulated.has_value();
  double largest_bytes = 0, largest_tflops = 0, shortest_days = std::numeric_limits<double>::infinity();
  bool headroom = false;  // --memory-headroom: plans are judged against the usable memory, shown so
  for (const auto& c : plans) {
    largest_bytes = std::max(largest_bytes, c.prediction.memory.gpu_total_bytes);
    headroom |= c.prediction.memory.gpu_usable_bytes < c.prediction.memory.gpu_capacity_bytes;
    if (!c.timed) continue;
    largest_tflops = std::max(largest_tflops, c.prediction.time.model_tflops_per_gpu);
    shortest_days = std::min(shortest_days, days_to_train(r.tokens, c.time().tokens_per_s));
  }
  const ByteUnit mem_unit = byte_unit_for(largest_bytes);
  const Unit rate_unit = flops_unit(largest_tflops), time_unit = duration_unit(shortest_days);
  // The GPUs each plan uses (the search may take fewer than the cluster has:
  // --min-gpus, layouts that do not divide it), and, ranked by cost, its cost.
  const bool cost = r.objective == Objective::cost;
  std::vector<std::vector<std::string>> rows{{"#", "dp×tp×pp(×v)", "GPUs", "ZeRO", "offload", "mb×acc", "recompute",
                                              "sched", "sp", "attn", "prec",
                                              std::string("GPU mem ") + mem_unit.name + (headroom ? " of usable" : ""),
                                              std::string(rate_unit.name) + "/GPU", "MFU", "tokens/s", time_unit.name}};
  std::vector<bool> right{true, false, true, false, false, false, false, false, false,
                          false, false, true, true, true, true, true};
  if (cost) {
    // "cost" (GPU-hours × --gpu-hour-price, in the price's currency) or "GPU-hours" without a price.
    rows.front().emplace_back(objective_unit(r.objective, r.gpu_hour_price));
    right.push_back(true);
  }
  if (any_simulated) {
    rows.front().emplace_back("sim tokens/s");
    right.push_back(true);
  }
  int rank = 0;
  for (const auto& c : plans) {
    const auto& p = c.plan;
    const auto& mem = c.prediction.memory;
    const auto& t = c.prediction.time;  // analytical; the simulated throughput has its own column
    std::string memory = mem.gpu_capacity_bytes > 0 ? fmt("%.1f", mem.gpu_total_bytes / mem_unit.bytes) + "/" +
                                                           fmt("%.1f", mem.gpu_usable_bytes / mem_unit.bytes)
                                                     : "-";
    if (mem.gpu_capacity_bytes > 0 && !mem.fits()) memory += " !";
    // days (and cost) from the time the ranking used: simulated where it was.
    const double ranked_tokens_per_s = c.timed ? c.time().tokens_per_s : 0;
    rows.push_back({std::to_string(++rank) + (c.simulated ? "*" : ""), layout_text(p), grouped(p.gpus()), zero_text(p),
                    offload_text(p),
                    std::to_string(p.micro_batch) + "×" + std::to_string(p.grad_accum), recompute_text(p),
                    p.pp > 1 ? to_string(p.schedule) : "-", p.sequence_parallel ? "sp" : p.partition_activations ? "pa" : "-", attention_text(p),
                    // FP8 linear GEMMs beside the training precision ("bf16+fp8").
                    to_string(p.precision) + (p.fp8 != Fp8Recipe::none ? "+fp8" : ""),
                    memory, c.timed ? fmt("%.1f", t.model_tflops_per_gpu / rate_unit.per) : "-",
                    c.timed ? fmt("%.1f%%", 100 * t.mfu) : "-", c.timed ? grouped(t.tokens_per_s) : "-",
                    c.timed ? fmt("%.1f", days_to_train(r.tokens, ranked_tokens_per_s) / time_unit.per) : "-"});
    if (cost) rows.back().push_back(c.timed && std::isfinite(c.objective) ? grouped(c.objective) : "-");
    if (any_simulated) rows.back().push_back(c.simulated ? grouped(c.simulated->tokens_per_s) : "-");
  }
  print_columns(os, rows, right);
}

void print_breakdowns(std::ostream& os, const Candidate& c) {
  const auto& mem = c.prediction.memory;
  const ByteUnit unit = byte_unit_for(mem.gpu_total_bytes);
  os << "Memory per GPU (" << unit.name << "), " << fmt("%.2f", mem.gpu_total_bytes / unit.bytes) << " of "
     << fmt("%.2f", mem.gpu_capacity_bytes / unit.bytes);
  if (mem.gpu_usable_bytes < mem.gpu_capacity_bytes)
    os << " (" << fmt("%.2f", mem.gpu_usable_bytes / unit.bytes) << " usable: --memory-headroom keeps "
       << fmt("%.3g", 100 * (1 - mem.gpu_usable_bytes / mem.gpu_capacity_bytes)) << "% free)";
  os << ":\n";
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < mem.gpu.size(); ++i) {
    if (mem.gpu[i] == 0) continue;
    rows.push_back({std::string("  ") + kMemLineNames[i], fmt("%.2f", mem.gpu[i] / unit.bytes),
                    mem.gpu_total_bytes > 0 ? fmt("%.1f%%", 100 * mem.gpu[i] / mem.gpu_total_bytes) : "-"});
  }
  if (!rows.empty()) print_columns(os, rows, {false, true, true});
  if (mem.host_bytes_per_node > 0)
    os << "  host per node: " << fmt("%.1f", mem.host_bytes_per_node / kBytesPerGiB) << " of "
       << fmt("%.1f", mem.host_capacity_bytes / kBytesPerGiB) << " GiB\n";
  if (mem.nvme_bytes_per_node > 0)
    os << "  NVMe per node: " << fmt("%.1f", mem.nvme_bytes_per_node / kBytesPerGiB) << " of "
       << fmt("%.1f", mem.nvme_capacity_bytes / kBytesPerGiB) << " GiB\n";
  if (!c.timed) return;
  auto print_time = [&](const char* title, const TimePrediction& t) {
    os << title << fmt("%.3f", t.iteration_s) << " s (MFU " << fmt("%.1f%%", 100 * t.mfu) << ", HFU "
       << fmt("%.1f%%", 100 * t.hfu) << "):\n";
    std::vector<std::vector<std::string>> trows;
    for (std::size_t i = 0; i < t.parts.size(); ++i) {
      if (t.parts[i] == 0) continue;
      trows.push_back({std::string("  ") + kTimePartNames[i], fmt("%.3f", t.parts[i]),
                       t.iteration_s > 0 ? fmt("%.1f%%", 100 * t.parts[i] / t.iteration_s) : "-"});
    }
    if (!trows.empty()) print_columns(os, trows, {false, true, true});
  };
  print_time("Iteration time (analytical), ", c.prediction.time);
  if (c.simulated) print_time("Iteration time (simulated), ", *c.simulated);
}

void print_pass_summary(std::ostream& os, const SearchResult& r) {
  os << "Searched " << grouped(static_cast<double>(r.space)) << " plans in " << grouped(static_cast<double>(r.layouts))
     << " dp×tp×pp layouts (" << grouped(static_cast<double>(r.evaluated)) << " evaluated, "
     << grouped(static_cast<double>(r.feasible)) << " fit"
     << (r.block_recompute > 0 ? ", " + grouped(static_cast<double>(r.block_recompute)) +
                                     " of them with block recomputation"
                               : std::string())
     << ") in " << fmt("%.3f", r.elapsed_s) << " s on " << r.threads
     << (r.threads == 1 ? " thread" : " threads") << "; objective " << to_string(r.objective) << ", global batch "
     << r.global_batch << ", " << fmt("%.3g", r.tokens) << " tokens"
     << (r.interrupted ? "; INTERRUPTED: best of the plans seen so far" : "") << ".\n";
  // Each pass's time is CPU-seconds summed over the worker threads (it can
  // exceed the wall time above).
  os << "Passes:";
  for (const auto& p : r.passes) {
    os << "  " << p.name;
    if (!p.enabled) {
      os << " off";
    } else {
      os << " " << grouped(static_cast<double>(p.in)) << "→" << grouped(static_cast<double>(p.out)) << " ("
         << fmt("%.3f", p.seconds) << " CPU-s)";
    }
    if (!p.note.empty()) os << " [" << p.note << "]";
    os << ";";
  }
  os << "\n";
}

void print_rule_counts(std::ostream& os, const SearchResult& r) {
  os << "Plans removed, by rule (of " << grouped(static_cast<double>(r.space)) << "):\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, n] : r.pruned.named())
    rows.push_back({"  " + name, grouped(static_cast<double>(n)),
                    r.space > 0 ? fmt("%.1f%%", 100.0 * static_cast<double>(n) / static_cast<double>(r.space)) : "-"});
  rows.push_back({"  fit (feasible)", grouped(static_cast<double>(r.feasible)),
                  r.space > 0 ? fmt("%.1f%%", 100.0 * static_cast<double>(r.feasible) / static_cast<double>(r.space))
                              : "-"});
  print_columns(os, rows, {false, true, true});
}

void print_infeasible(std::ostream& os, const SearchResult& r, const std::vector<FitHint>& hints) {
  os << "No plan fits: " << grouped(static_cast<double>(r.space)) << " plans searched, none passes every rule and fits"
     << " in memory.\n";
  if (!r.closest.empty()) {
    os << "\nClosest to fitting (GPU memory used/capacity; '!' = does not fit):\n";
    print_plan_table(os, r, r.closest);
  }
  if (!hints.empty()) {
    os << "\nWhat would make a plan fit:\n";
    for (const auto& h : hints) os << "  " << (h.fits ? "[fits] " : "[no]   ") << h.change << ": " << h.detail << "\n";
  }
}

void print_tight_memory(std::ostream& os, const HeadroomAlternative& t) {
  os << "note: " << describe_tight_memory(t, "--memory-headroom " + formatted("%g", t.headroom_pct)) << "\n";
}

}  // namespace ztune::cli
