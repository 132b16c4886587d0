// ztune-calibrate-worker: the calibration microbenchmarks, one rank each.
//   mpirun -np N ztune-calibrate-worker --out measurements.json [--backend cpu]
//          [--min-bytes B] [--max-bytes B] [--iters N] [--warmup-iters N] [--repeats R]
//          [--only gemm,attention,memory,copies,adam,collectives] [--threads T]
// Rank 0 prints nccl-tests-style tables as it goes and writes the measurements
// (schema "ztune.measurements/1") that `ztune calibrate` fits a profile to.
// Exit 0; 1 when any element failed its data check or a busbw fell below
// $ZTUNE_MIN_BUSBW_GBPS (nccl-tests' min-bw gate); 2 for bad usage.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/flag_values.hpp"
#include <Eigen/Core>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include "ztune/calibration/benches.hpp"
#include "ztune/calibration/collective_test.hpp"
#include "ztune/calibration/group_layouts.hpp"
#include "ztune/executor/cpu_backend.hpp"
#include "ztune/executor/mpi_communicator.hpp"
#ifdef ZTUNE_HAVE_CUDA
#include "ztune/executor/cuda/gpu_rank.hpp"
#endif

namespace ztune::calibration {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
// The CPU backend's default caps (printed when applied): a 1 GiB all-reduce
// over shared memory on a 2-core machine takes seconds per call, and the whole
// calibration must stay within minutes (docs/benchmarks.md).
constexpr std::size_t kCpuMaxBytes = std::size_t{16} << 20;
constexpr std::size_t kGpuMaxBytes = std::size_t{1} << 30;
constexpr int kCpuGemmMaxDim = 512;

struct Options {
  std::string out;
  std::string backend = "cpu";
  std::string gemm_precision;  // cuda: bf16 (default), fp16 or fp32; cpu: fp32
  std::size_t min_bytes = 1024;
  std::size_t max_bytes = 0;         // 0: the backend's default
  std::size_t memory_max_bytes = 0;  // 0: the backend's default
  int gemm_max_dim = 0;              // 0: the backend's default
  std::string only;
  std::string collectives;
  int threads = 1;
  Protocol protocol;
  double round_budget_ms = 40;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

nlohmann::json environment(int threads) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string mpi_version(mpi, static_cast<std::size_t>(len));
  if (auto nl = mpi_version.find_first_of(std::string("\n\0", 2)); nl != std::string::npos) mpi_version.resize(nl);
  if (auto comma = mpi_version.find(','); comma != std::string::npos) mpi_version.resize(comma);
  return {{"host", host},
          {"hardware_threads", std::thread::hardware_concurrency()},
          {"threads_per_rank", threads},
          {"mpi", mpi_version},
          {"compiler", std::string("gcc ") + __VERSION__},
          {"eigen", std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                        std::to_string(EIGEN_MINOR_VERSION)}};
}

int run(int argc, char** argv) {
  auto world = executor::MpiCommunicator::world();
  const bool root = world->rank() == 0;
  Options o;
  CLI::App app{"ztune-calibrate-worker: calibration microbenchmarks (launch with mpirun or ztune calibrate)"};
  app.add_option("--out", o.out, "Measurements JSON written by rank 0")->required();
  app.add_option("--backend", o.backend, "Compute backend")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--gemm-precision", o.gemm_precision,
                 "GEMM operands on the CUDA backend (fp32 accumulation): bf16 (default), fp16, fp32 (the "
                 "profile's GEMM table is relative to the cluster's peak for this precision)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  // Sizes bounded where a buffer of them can exist: 2^36 bytes (64 GiB) is past
  // any device's memory; an unchecked -1 wrapped to 2^64 and segfaulted.
  const auto bytes = CLI::Range(std::size_t{1}, std::size_t{1} << 36);
  app.add_option("--min-bytes", o.min_bytes, "Smallest collective message (nccl-tests S)")->check(bytes);
  app.add_option("--max-bytes", o.max_bytes, "Largest collective message (default: 1 GiB; 16 MiB on the CPU backend)")
      ->check(bytes);
  app.add_option("--memory-max-bytes", o.memory_max_bytes, "Largest array of the memory-bound and copy benchmarks")
      ->check(bytes);
  app.add_option("--gemm-max-dim", o.gemm_max_dim, "Largest square GEMM dimension")->check(CLI::Range(1, 1 << 16));
  app.add_option("--only", o.only, "Comma list of sections: gemm,attention,memory,copies,adam,collectives");
  app.add_option("--collectives", o.collectives, "Comma list of collectives (default: all)");
  app.add_option("--threads", o.threads, "Compute threads per rank")->check(CLI::Range(1, ztune::kMaxThreads));
  app.add_option("--iters", o.protocol.iters, "Most back-to-back calls per timed round")->check(CLI::PositiveNumber);
  app.add_option("--warmup-iters", o.protocol.warmup_iters, "Untimed calls first")->check(CLI::NonNegativeNumber);
  app.add_option("--repeats", o.protocol.repeats, "Timed rounds at least (5 or more; the median is reported)")
      ->check(CLI::Range(kMinRepeats, 1000));
  app.add_option("--max-repeats", o.protocol.max_repeats,
                 "Timed rounds at most, while a point's spread (IQR / median) is above --target-spread")
      ->check(CLI::Range(kMinRepeats, 1000));
  app.add_option("--target-spread", o.protocol.target_spread, "Spread (IQR / median) that ends a point's rounds early")
      ->check(CLI::Range(0.0, 10.0));
  app.add_option("--round-budget-ms", o.round_budget_ms, "Calls per round shrink so a round takes about this long")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (root) app.exit(e);
    return e.get_exit_code() == 0 ? 0 : kExitUsage;
  }
  if (o.gemm_precision.empty()) o.gemm_precision = o.backend == "cuda" ? "bf16" : "fp32";
  if (o.backend == "cpu" && o.gemm_precision != "fp32") {
    if (root) std::fprintf(stderr, "ztune-calibrate-worker: error: --gemm-precision %s: the CPU backend computes in "
                                   "fp32\n", o.gemm_precision.c_str());
    return kExitUsage;
  }
#ifndef ZTUNE_HAVE_CUDA
  if (o.backend == "cuda") {
    // Never fake: no CUDA backend is compiled into this worker.
    if (root)
      std::fprintf(stderr,
                   "ztune-calibrate-worker: error: --backend cuda: this worker was built without CUDA (configure "
                   "where the CUDA toolkit and NCCL are installed)\n");
    return kExitUsage;
  }
#endif
  o.protocol.round_budget_s = o.round_budget_ms * 1e-3;
  std::vector<std::string> notes;
  if (o.max_bytes == 0) {
    o.max_bytes = o.backend == "cpu" ? kCpuMaxBytes : kGpuMaxBytes;
    if (o.backend == "cpu")
      notes.push_back("collective sizes capped at 16 MiB on the CPU backend (nccl-tests' 1 GiB would take minutes "
                      "over shared memory; bandwidth has settled long before); --max-bytes changes it");
  }
  if (o.memory_max_bytes == 0) o.memory_max_bytes = o.backend == "cpu" ? kCpuMaxBytes : kGpuMaxBytes;
  if (o.gemm_max_dim == 0) o.gemm_max_dim = o.backend == "cpu" ? kCpuGemmMaxDim : 8192;
  if (o.min_bytes > o.max_bytes) {
    if (root) std::fprintf(stderr, "ztune-calibrate-worker: error: --min-bytes %zu exceeds --max-bytes %zu\n",
                           o.min_bytes, o.max_bytes);
    return kExitUsage;
  }
  if (app.count("--only") > 0 && o.only.empty()) {
    if (root) std::fprintf(stderr, "ztune-calibrate-worker: error: --only: an empty list (name the sections to run)\n");
    return kExitUsage;
  }
  if (o.protocol.max_repeats > 0 && o.protocol.max_repeats < o.protocol.repeats) {
    if (root)
      std::fprintf(stderr, "ztune-calibrate-worker: error: --max-repeats %d is below --repeats %d\n",
                   o.protocol.max_repeats, o.protocol.repeats);
    return kExitUsage;
  }
  const auto sections = split_list(o.only);
  const std::vector<std::string> known{"gemm", "attention", "memory", "copies", "adam", "collectives"};
  for (const auto& s : sections)
    if (std::find(known.begin(), known.end(), s) == known.end()) {
      if (root) std::fprintf(stderr, "ztune-calibrate-worker: error: --only: unknown section \"%s\" (expected gemm, "
                                     "attention, memory, copies, adam or collectives)\n", s.c_str());
      return kExitUsage;
    }
  const auto collectives = split_list(o.collectives);
  for (const auto& c : collectives)
    if (find_collective_test(c) == nullptr) {
      if (root) std::fprintf(stderr, "ztune-calibrate-worker: error: --collectives: unknown collective \"%s\" "
                                     "(expected all_reduce, reduce_scatter, all_gather, broadcast or sendrecv)\n",
                             c.c_str());
      return kExitUsage;
    }
  auto wanted = [&](const char* s) { return sections.empty() || std::find(sections.begin(), sections.end(), s) != sections.end(); };

  const auto start = std::chrono::steady_clock::now();
  // The backend and the communicator the benchmarks use: CPU ranks over MPI,
  // or this rank's GPU with NCCL (MPI stays the bootstrap).
  std::unique_ptr<executor::Backend> backend_owner;
  std::unique_ptr<executor::Communicator> nccl;
  if (o.backend == "cpu") {
    backend_owner = std::make_unique<executor::CpuBackend>(o.threads);
  } else {
#ifdef ZTUNE_HAVE_CUDA
    const auto precision = executor::cuda::gemm_precision_for(o.gemm_precision == "bf16"   ? Precision::bf16
                                                              : o.gemm_precision == "fp16" ? Precision::fp16
                                                                                           : Precision::fp32);
    double failed_here = 0;
    executor::cuda::GpuRank gpu;
    try {
      gpu = executor::cuda::make_gpu_rank(*world, precision);
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "ztune-calibrate-worker: error: rank %d: --backend cuda: %s\n", world->rank(), e.what());
      failed_here = 1;
    }
    world->all_reduce_doubles(&failed_here, 1, executor::ReduceOp::max);
    if (failed_here > 0) return kExitUsage;
    backend_owner = std::move(gpu.backend);
    nccl = std::move(gpu.comm);
#endif
  }
  executor::Backend& backend = *backend_owner;
  executor::Communicator& comm = nccl ? *nccl : static_cast<executor::Communicator&>(*world);
  const NodeInfo nodes = discover_nodes(*world);
  BenchContext ctx{comm, backend, o.protocol, root ? stdout : nullptr, 0};
  if (root) {
    std::printf("# ztune-calibrate-worker: %d rank(s) on %d node(s), %d per node, backend %s, %d thread(s) per rank\n",
                world->size(), nodes.nodes, nodes.ranks_per_node, backend.name().c_str(), o.threads);
    std::printf("# protocol: %d warm-up call(s), then %d to %d round(s) (more while the spread is above %.0f%%) of up to "
                "%d back-to-back calls (~%.0f ms a round); time = median round, slowest rank; data checked after "
                "timing\n",
                o.protocol.warmup_iters, std::max(kMinRepeats, o.protocol.repeats),
                std::max(std::max(kMinRepeats, o.protocol.repeats), o.protocol.max_repeats),
                100 * o.protocol.target_spread, o.protocol.iters, o.round_budget_ms);
    for (const auto& n : notes) std::printf("# note: %s\n", n.c_str());
    std::fflush(stdout);
  }

  nlohmann::json m;
  m["schema"] = "ztune.measurements/1";
  m["backend"] = o.backend;
  m["backend_detail"] = backend.name();
  m["gemm_precision"] = o.gemm_precision;
  m["ranks"] = world->size();
  m["nodes"] = nodes.nodes;
  m["ranks_per_node"] = nodes.ranks_per_node;
  m["threads_per_rank"] = o.threads;
  m["protocol"] = {{"warmup_iters", o.protocol.warmup_iters}, {"iters", o.protocol.iters},
                   {"repeats", o.protocol.repeats}, {"max_repeats", o.protocol.max_repeats},
                   {"target_spread", o.protocol.target_spread}, {"round_budget_s", o.protocol.round_budget_s},
                   {"min_bytes", o.min_bytes}, {"max_bytes", o.max_bytes},
                   {"memory_max_bytes", o.memory_max_bytes}, {"gemm_max_dim", o.gemm_max_dim}};
  m["gemm"] = wanted("gemm") ? bench_gemm(ctx, o.gemm_max_dim) : nlohmann::json::array();
  if (root) std::fflush(stdout);
  m["attention"] = wanted("attention") ? bench_attention(ctx) : nlohmann::json::array();
  if (root) std::fflush(stdout);
  m["memory_bound"] = wanted("memory") ? bench_memory_bound(ctx, o.memory_max_bytes) : nlohmann::json::array();
  if (root) std::fflush(stdout);
  m["copies"] = wanted("copies") ? bench_copies(ctx, o.memory_max_bytes) : nlohmann::json::array();
  if (root) std::fflush(stdout);
  m["host_adam"] = wanted("adam") ? bench_host_adam(ctx, o.threads, nodes.ranks_per_node) : nlohmann::json(nullptr);
  if (root) std::fflush(stdout);
  m["collectives"] = nlohmann::json::array();
  if (wanted("collectives")) {
    auto layouts = make_group_layouts(comm, nodes, notes);
    m["collectives"] = bench_collectives(ctx, layouts, o.min_bytes, o.max_bytes, collectives);
  }
  m["notes"] = notes;
  m["wrong"] = ctx.wrong;
  m["environment"] = environment(o.threads);
  m["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // nccl-tests' footer: out-of-bounds count and the min-bandwidth gate.
  bool failed = ctx.wrong > 0;
  if (const char* gate = std::getenv("ZTUNE_MIN_BUSBW_GBPS"); gate != nullptr && !m["collectives"].empty()) {
    const double min_bw = std::atof(gate);
    double largest = 0, worst = 1e300;
    for (const auto& row : m["collectives"]) largest = std::max(largest, row["bytes"].get<double>());
    for (const auto& row : m["collectives"])
      if (row["bytes"].get<double>() == largest) worst = std::min(worst, row["busbw_gbps"].get<double>());
    if (worst < min_bw) {
      failed = true;
      if (root) std::printf("# busbw at the largest size %.3f GB/s is below ZTUNE_MIN_BUSBW_GBPS=%.3f\n", worst, min_bw);
    }
  }
  if (root) {
    for (const auto& n : notes) std::printf("# note: %s\n", n.c_str());
    std::printf("# out of bounds values : %lld %s\n", static_cast<long long>(ctx.wrong), ctx.wrong == 0 ? "OK" : "FAILED");
    std::printf("# calibration time     : %.1f s\n", m["elapsed_s"].get<double>());
    std::fflush(stdout);
    if (auto why = write_file_durably(o.out, m.dump(1) + "\n")) {
      std::fprintf(stderr, "ztune-calibrate-worker: error: %s: cannot write the measurements: %s\n", o.out.c_str(),
                   why->c_str());
      return kExitFailed;
    }
  }
  return failed ? kExitFailed : 0;
}

}  // namespace
}  // namespace ztune::calibration

int main(int argc, char** argv) {
  ztune::report_file_size_limit_as_error();
  ztune::executor::MpiSession mpi(&argc, &argv);
  return ztune::calibration::run(argc, argv);
}
