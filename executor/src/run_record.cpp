#include "ztune/executor/run_record.hpp"

#include <unistd.h>

#include <cstdio>
#include <thread>

#include <Eigen/Core>
#include <mpi.h>

namespace ztune::executor {


namespace {

nlohmann::json environment(const std::string& backend, int threads) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string mpi_version(mpi, static_cast<std::size_t>(len));
  // The first line; Open MPI counts the terminating NUL in len, which a JSON
  // string would carry as \u0000.
  if (auto end = mpi_version.find_first_of(std::string("\n\0", 2)); end != std::string::npos) mpi_version.resize(end);
  return {{"backend", backend},
          {"host", host},
          {"hardware_threads", std::thread::hardware_concurrency()},
          {"threads_per_rank", threads},
          {"mpi", mpi_version},
          {"compiler", std::string("gcc ") + __VERSION__},
          {"eigen", std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                        std::to_string(EIGEN_MINOR_VERSION)}};
}

}  // namespace

nlohmann::json make_run_record(const RunRecordInput& in) {
  nlohmann::json r;
  r["schema"] = "ztune.runrecord/1";
  r["plan_file"] = in.plan_file;
  r["plan_digest"] = json_fnv1a_hex(in.plan_file.at("plan"));
  r["model_digest"] = in.plan_file.contains("model") ? json_fnv1a_hex(in.plan_file.at("model")) : "";
  r["data"] = in.data;
  nlohmann::json steps = nlohmann::json::array(), losses = nlohmann::json::array();
  std::vector<double> times;
  for (const auto& s : in.steps) {
    steps.push_back({{"step", s.step},
                     {"loss", s.result.loss},
                     {"grad_norm", s.result.grad_norm},
                     {"lr", s.result.lr},
                     {"time_s", s.result.seconds},
                     {"loss_scale", s.result.loss_scale},
                     {"skipped", s.result.skipped}});
    losses.push_back(s.result.loss);
    times.push_back(s.result.seconds);
  }
  r["steps"] = steps;
  r["losses"] = losses;
  const double median = median_step_time(std::move(times));
  r["step_time_s"] = median;
  r["tokens_per_step"] = in.tokens_per_step;
  r["tokens_per_s"] = median > 0 ? in.tokens_per_step / median : 0.0;
  nlohmann::json ops = nlohmann::json::object();
  for (std::size_t k = 0; k < static_cast<std::size_t>(OpKind::count); ++k) {
    const auto& t = in.backend->ops().total(static_cast<OpKind>(k));
    nlohmann::json o{{"time_s", t.seconds}, {"count", t.count}};
    if (t.bytes > 0) o["bytes"] = t.bytes;
    ops[kOpKindNames[k]] = o;
  }
  r["ops_rank0"] = ops;
  nlohmann::json coll = nlohmann::json::object();
  for (auto* c : in.comms) {
    if (c == nullptr || c->size() < 2) continue;
    nlohmann::json g = nlohmann::json::object();
    for (const Collective kind : all_collectives()) {
      const auto& t = c->stats().total(kind);
      if (t.count == 0) continue;
      g[to_string(kind)] = {{"count", t.count},
                              {"bytes", t.bytes},
                              {"time_s", t.seconds},
                              {"algbw_gbps", t.algbw_gbps()},
                              {"busbw_gbps", t.algbw_gbps() * bus_factor(kind, c->size())}};
    }
    g["ranks"] = c->size();
    coll[c->name()] = g;
  }
  r["collectives_rank0"] = coll;
  nlohmann::json mem = nlohmann::json::array();
  for (std::size_t rank = 0; rank < in.memory.size(); ++rank) {
    nlohmann::json m = nlohmann::json::object();
    for (std::size_t k = 0; k < in.memory[rank].size(); ++k) m[kMemCategoryNames[k]] = in.memory[rank][k];
    nlohmann::json entry{{"rank", rank},
                         {"peak_bytes", in.peak_total[rank]},
                         {"peak_host_bytes", in.peak_host_total[rank]},
                         {"by_category", m}};
    if (rank < in.at_peak.size()) {
      nlohmann::json at = nlohmann::json::object();
      for (std::size_t k = 0; k < in.at_peak[rank].size(); ++k)
        if (!MemoryTracker::is_host(static_cast<MemCategory>(k))) at[kMemCategoryNames[k]] = in.at_peak[rank][k];
      entry["at_peak"] = at;
    }
    mem.push_back(entry);
  }
  r["memory"] = mem;
  r["peak_memory_bytes"] = in.peak_total;
  // Buffered NVMe I/O (a file system that refuses O_DIRECT) measures the page
  // cache, not the drive: say which one the offload times describe.
  if (in.nvme_direct_io) r["nvme_io"] = *in.nvme_direct_io ? "direct" : "buffered";
  r["environment"] = environment(in.backend != nullptr ? in.backend->name() : std::string("cpu"), in.threads);
  return r;
}

}  // namespace ztune::executor
