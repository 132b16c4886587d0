// ztune calibrate: runs the calibration microbenchmarks (ztune-calibrate-worker
// under mpirun), fits the hardware profile to them and to the measured training
// runs (run records given here or stored in the results database), writes the
// profile (and the cluster with its re-measured figures), stores the profile in
// the database, and reports the prediction error of the runs before and after.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "ztune/calibration/calibrate_report.hpp"
#include "db_runs.hpp"
#include "command.hpp"
#include "run_launch.hpp"
#include "ztune/model/catalog.hpp"
#include "ztune/model/hardware_profile.hpp"
#include "ztune/model/input_error.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/calibration/profile_fit.hpp"
#include "ztune/tuner/results_db.hpp"

namespace ztune::cli {
namespace {

using namespace calibration;  // NOLINT: the loop's report and run sources

struct CalibrateFlags {
  std::string cluster;
  std::string backend;  // "" = the cluster's device kind
  int np = 0;
  int threads = 1;
  std::string out;
  std::string cluster_out;
  std::string db;
  bool no_db = false;
  std::string measurements;       // fit these instead of running the microbenchmarks
  std::string keep_measurements;  // copy the measurements here
  std::vector<std::string> records;
  std::vector<std::string> holdout_records;
  bool no_db_runs = false;
  std::string prior;
  std::size_t max_bytes = 0;
  bool quick = false;
  bool json = false;
};

std::string calibrate_worker_path() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto next = self.parent_path() / "ztune-calibrate-worker";
    if (std::filesystem::exists(next)) return next.string();
  }
#ifdef ZTUNE_CALIBRATE_WORKER_PATH
  return ZTUNE_CALIBRATE_WORKER_PATH;
#else
  return "ztune-calibrate-worker";
#endif
}

// Default ranks: one per core (ranks that time-share a core measure the
// sharing, not the hardware), at most the cluster's devices.
int default_ranks(const Cluster& c, const std::string& backend) {
  if (backend != "cpu") return c.total_gpus();
  int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  if (c.node.cpu_cores > 0) cores = std::min(cores, c.node.cpu_cores);  // one rank per core the cluster declares
  return std::max(2, std::min(c.total_gpus(), cores));  // collectives need two
}

std::string replace_extension(const std::string& path, const std::string& suffix) {
  std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + suffix)).string();
}

void write_json(const std::string& path, const nlohmann::json& doc) {
  write_file_atomically(path, doc.dump(2) + "\n", "--out");
}

int run(const CalibrateFlags& f) {
  const Cluster raw_cluster = load_cluster(f.cluster);
  const HardwareProfile prior = f.prior.empty() ? default_profile_for(raw_cluster) : load_profile(f.prior);
  // A prior fitted earlier carries its measured figures: start from them.
  const Cluster cluster = with_measured_figures(raw_cluster, prior);
  const std::string backend =
      !f.backend.empty() ? f.backend : (cluster.device_kind == DeviceKind::cpu ? std::string("cpu") : "cuda");
  // --backend cuda runs the benchmarks on one GPU per rank with NCCL; the
  // worker itself refuses (exit 2, with the reason) when it was built without
  // CUDA or the node has no device: never a faked measurement.
  if (backend == "cuda" && cluster.device_kind == DeviceKind::cpu && f.measurements.empty())
    throw InputError("--backend cuda: cluster " + cluster.name + " describes CPU ranks (use --backend cpu)");
  if (backend == "cpu" && cluster.device_kind != DeviceKind::cpu && f.measurements.empty())
    throw InputError("--backend cpu: cluster " + cluster.name +
                     " describes GPUs; CPU-rank measurements cannot calibrate it (use a CPU cluster such as "
                     "local-cpu, or --measurements FILE from its GPUs)");
  const std::string name = cluster.name + "-calibrated";
  const std::string profile_out =
      !f.out.empty() ? f.out : (std::filesystem::path(user_data_dir()) / "profiles" / (name + ".json")).string();
  const std::string cluster_out =
      !f.cluster_out.empty() ? f.cluster_out
      : !f.out.empty()       ? replace_extension(f.out, ".cluster.json")
                             : (std::filesystem::path(user_data_dir()) / "profiles" / "calibrated-clusters" /
                                (name + ".json"))
                                   .string();
  std::FILE* report = f.json ? stderr : stdout;
  // The run records first: a bad one is refused before any microbenchmark runs.
  std::vector<RunObservation> fit_runs = runs_from_records(f.records);
  const std::vector<RunObservation> held = runs_from_records(f.holdout_records);

  // 1. Measure (or read earlier measurements).
  std::string measurements_path = f.measurements;
  int np = 0;
  if (measurements_path.empty()) {
    np = f.np > 0 ? f.np : default_ranks(cluster, backend);
    // The cost model shares a node's cores among the ranks beyond them
    // (oversubscribed_view): the figures measured here must be per core.
    if (backend == "cpu" && cluster.node.cpu_cores > 0 && np > std::max(2, cluster.node.cpu_cores))
      throw InputError("--np " + std::to_string(np) + ": more CPU ranks than the " +
                       std::to_string(cluster.node.cpu_cores) + " cores of a " + cluster.name +
                       " node (cpu_cores); ranks would time-share cores and measure a share of one, which the cost "
                       "model already divides out. Use --np " + std::to_string(cluster.node.cpu_cores) + " or fewer");
    char tmpl[] = "/tmp/ztune-calibrate-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw InputError("cannot create a temporary directory in /tmp");
    measurements_path = std::string(tmpl) + "/measurements.json";
    std::vector<std::string> args{calibrate_worker_path(), "--out", measurements_path, "--backend", backend,
                                  "--threads", std::to_string(f.threads)};
    if (f.max_bytes > 0) args.insert(args.end(), {"--max-bytes", std::to_string(f.max_bytes)});
    if (f.quick) args.insert(args.end(), {"--repeats", "5", "--max-repeats", "9", "--round-budget-ms", "20"});
    std::fprintf(report, "ztune calibrate: %d rank(s) of cluster %s (%s backend)%s\n", np, cluster.name.c_str(),
                 backend.c_str(),
                 np < cluster.total_gpus()
                     ? ((backend == "cpu" ? std::string(": one per core") : std::string(": one per GPU")) +
                        "; the cluster describes " + std::to_string(cluster.total_gpus()) +
                        " (pass --np to calibrate that layout)")
                           .c_str()
                     : "");
    std::fflush(report);
    const int rc = run_process(launch_command(np, "", args), f.json);
    if (rc == kExitUsage) return kExitUsage;
    if (rc != 0) {
      std::fprintf(stderr, "ztune calibrate: the microbenchmarks failed (exit %d)%s\n", rc,
                   std::filesystem::exists(measurements_path)
                       ? ": some results failed their data check (#wrong above); no profile is fitted to them"
                       : "; see the messages above");
      return kExitInfeasible;
    }
  }
  const Measurements m = load_measurements(measurements_path);
  if (m.wrong > 0) {
    std::fprintf(stderr, "ztune calibrate: %s: %lld element(s) failed their data check; no profile is fitted\n",
                 measurements_path.c_str(), static_cast<long long>(m.wrong));
    return kExitInfeasible;
  }
  if (!f.keep_measurements.empty()) std::filesystem::copy_file(measurements_path, f.keep_measurements,
                                                               std::filesystem::copy_options::overwrite_existing);

  // 2. Fit to the microbenchmarks.
  const ProfileFit micro = fit_profile(m, cluster, prior, name);

  // 3. The measured runs: fitted ones (records and the database) and held-out ones.
  std::vector<std::string> notes = micro.notes;
  std::optional<ResultsDb> db;
  if (!f.no_db) {
    try {
      db = ResultsDb::open(f.db.empty() ? default_db_path() : f.db);
    } catch (const InputError& e) {
      notes.push_back(std::string("results database not used: ") + e.what());
    }
  }
  if (db && !f.no_db_runs) {
    auto stored = runs_from_db(*db, cluster.name, notes);
    fit_runs.insert(fit_runs.end(), stored.begin(), stored.end());
  }
  const RunFit fitted = fit_profile_to_runs(fit_runs, micro.cluster, micro.profile);
  notes.insert(notes.end(), fitted.notes.begin(), fitted.notes.end());
  HardwareProfile final_profile = fitted.profile;
  final_profile.name = name;
  final_profile.source = micro.profile.source + (fit_runs.empty() ? std::string()
                                                                   : "; refined on " + std::to_string(fit_runs.size()) +
                                                                         " measured training run(s)");
  Cluster final_cluster = fitted.cluster;
  // The profile carries the figures measured here, so --profile alone
  // reproduces these predictions on the catalog cluster.
  final_profile.measured = measured_figures(raw_cluster, final_cluster, prior.measured);
  for (const auto& s : m.collectives) (s.crosses_nodes ? final_profile.measured.inter_node : final_profile.measured.intra_node).fitted = true;

  std::vector<RunComparison> rows;
  auto compare = [&](const std::vector<RunObservation>& runs, bool held_out) {
    for (const auto& r : runs)
      rows.push_back({r.label, r.plan.summary(), held_out, r.measured_iteration_s,
                      predict_time(r.model, r.plan, cluster, prior).iteration_s,
                      predict_time(r.model, r.plan, micro.cluster, micro.profile).iteration_s,
                      predict_time(r.model, r.plan, final_cluster, final_profile).iteration_s});
  };
  compare(fit_runs, false);
  compare(held, true);

  // 4. Write and store. What the fit found of the executor's host costs and
  // overlap is the measured ztune engine on this hardware.
  final_profile.measured_engine = final_profile.engine;
  write_json(profile_out, profile_to_json(final_profile));
  write_json(cluster_out, cluster_to_json(final_cluster));
  std::optional<std::int64_t> profile_id;
  if (db) {
    try {
      profile_id = db->store_profile(final_profile);
    } catch (const InputError& e) {
      notes.push_back(std::string("profile not stored in the results database: ") + e.what());
    }
  }

  if (f.json) {
    nlohmann::json j{{"cluster", cluster.name},
                     {"backend", backend},
                     {"ranks", m.ranks},
                     {"measurements", measurements_path},
                     {"measurement_time_s", m.elapsed_s},
                     {"profile", profile_out},
                     {"calibrated_cluster", cluster_out},
                     {"profile_id", profile_id ? nlohmann::json(*profile_id) : nlohmann::json(nullptr)},
                     {"microbenchmark_fit", fitted_values_json(micro.values)},
                     {"collectives", collective_fits_json(micro.collectives)},
                     {"run_fit", fitted_values_json(fitted.values)},
                     {"runs", run_comparisons_json(rows)},
                     {"mean_abs_error", {{"fitted", {{"before", mean_abs_error(rows, false, 0)},
                                                     {"micro_fit", mean_abs_error(rows, false, 1)},
                                                     {"after", mean_abs_error(rows, false, 2)}}},
                                         {"held_out", {{"before", mean_abs_error(rows, true, 0)},
                                                       {"micro_fit", mean_abs_error(rows, true, 1)},
                                                       {"after", mean_abs_error(rows, true, 2)}}}}},
                     {"notes", notes}};
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("\n== Fit: %zu microbenchmark points, %zu training run(s) (%zu held out)\n",
              m.gemm.size() + m.attention.size() + m.memory.size() + m.copies.size() + m.collectives.size(),
              fit_runs.size(), held.size());
  print_fitted_values(stdout, "Microbenchmark fit (least squares, robust, relative error)", micro.values);
  print_collective_fits(stdout, micro.collectives);
  if (!fit_runs.empty())
    print_fitted_values(stdout,
                        "Run fit (Levenberg-Marquardt on iteration time, " + std::to_string(fitted.iterations) +
                            " iterations)",
                        fitted.values);
  print_notes(stdout, notes);
  print_run_comparisons(stdout, rows);
  std::printf("\nprofile: %s%s\ncalibrated cluster (the same figures, for tools that read cluster files): %s\n"
              "use it: ztune predict --cluster %s --profile %s ... (the profile carries the measured figures)\n",
              profile_out.c_str(), profile_id ? (" (stored as profile " + std::to_string(*profile_id) + ")").c_str() : "",
              cluster_out.c_str(), f.cluster.c_str(), profile_out.c_str());
  return kExitOk;
}

}  // namespace

Command add_calibrate(CLI::App& root) {
  auto f = std::make_shared<CalibrateFlags>();
  auto* app = root.add_subcommand(
      "calibrate", "Measure this machine (microbenchmarks, training runs) and fit the hardware profile to it");
  app->add_option("--cluster", f->cluster, "Cluster to calibrate (catalog name or file)")->required();
  app->add_option("--backend", f->backend, "cpu or cuda (default: the cluster's device kind)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app->add_option("--np", f->np, "Ranks (default: one per core on the CPU backend, at most the cluster's)")
      ->check(CLI::Range(2, 1 << 20));
  app->add_option("--threads", f->threads, "Compute threads per rank")->check(ThreadCount);
  app->add_option("--out", f->out, "Profile file to write (default: ~/.local/share/ztune/profiles/<cluster>-calibrated.json, "
                  "$XDG_DATA_HOME/ztune/... when set; then --profile <cluster>-calibrated finds it)");
  app->add_option("--cluster-out", f->cluster_out,
                  "Calibrated cluster file (default: beside --out as .cluster.json, else "
                  "~/.local/share/ztune/profiles/calibrated-clusters/)");
  app->add_option("--db", f->db, "Results database (default: ~/.local/share/ztune/results.db)");
  app->add_flag("--no-db", f->no_db, "Neither read runs from nor store the profile in the results database");
  app->add_flag("--no-db-runs", f->no_db_runs, "Do not fit to the runs stored in the database");
  app->add_option("--measurements", f->measurements, "Fit these measurements instead of running the benchmarks");
  app->add_option("--keep-measurements", f->keep_measurements, "Also write the measurements JSON here");
  app->add_option("--records", f->records, "Run records (ztune-worker --record) to fit to")->expected(1, -1);
  app->add_option("--holdout-records", f->holdout_records, "Run records to evaluate only (not fitted)")
      ->expected(1, -1);
  app->add_option("--profile", f->prior, "Starting profile (default: data/profiles/<gpu>.json)");
  app->add_option("--max-bytes", f->max_bytes, "Largest collective message (default: 1 GiB; 16 MiB on CPU)");
  app->add_flag("--quick", f->quick, "Fewer timed rounds (5 to 9 of ~20 ms)");
  app->add_flag("--json", f->json, "Print the fit and the errors as JSON (benchmark tables go to stderr)");
  return {app, [f] { return run(*f); }};
}

}  // namespace ztune::cli
