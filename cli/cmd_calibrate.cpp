// ztune calibrate: a thin shell over calibration/ (calibrate_session.hpp). It
// runs the calibration microbenchmarks (ztune-calibrate-worker under mpirun),
// gathers the measured training runs (run records given here or stored in the
// results database), and lets the session fit, cross-validate and judge the
// profile; it writes the profile (and the cluster with its re-measured
// figures) and stores it in the database only when the verdict accepts it
// (--force: anyway), and exits 1 when it is refused.
#include <csignal>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ztune/calibration/calibrate_report.hpp"
#include "ztune/calibration/calibrate_session.hpp"
#include "ztune/calibration/history.hpp"
#include "ztune/calibration/session_report.hpp"
#include "db_runs.hpp"
#include "command.hpp"
#include "run_launch.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/input_error.hpp"
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
  bool force = false;          // write even a refused fit
  double wait_quiet_s = 0;     // wait this long for a busy machine's load to fall
  double reference_factor = 2; // refuse a fit this far off its starting profile on a reference plan
  bool report = false;         // print the history of profiles instead of calibrating
};

std::string calibrate_worker_path() {
#ifdef ZTUNE_CALIBRATE_WORKER_PATH
  return sibling_program("ztune-calibrate-worker", ZTUNE_CALIBRATE_WORKER_PATH);
#else
  return sibling_program("ztune-calibrate-worker", nullptr);
#endif
}

// Default ranks: one per core (ranks that time-share a core measure the
// sharing, not the hardware), at most the cluster's devices.
int default_ranks(const Cluster& c, const std::string& backend) {
  if (backend != "cpu") return c.total_devices();
  int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  if (c.node.cpu_cores > 0) cores = std::min(cores, c.node.cpu_cores);  // one rank per core the cluster declares
  return std::max(2, std::min(c.total_devices(), cores));  // collectives need two
}

std::string replace_extension(const std::string& path, const std::string& suffix) {
  std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + suffix)).string();
}

void write_json(const std::string& path, const nlohmann::json& doc, const char* flag) {
  write_file_atomically(path, doc.dump(2) + "\n", flag);
}

// Waits (up to `seconds`) for the load average to fall below the busy mark,
// reporting once; returns the last sample.
MachineSample wait_until_quiet(double seconds, const NoiseLimits& limits, std::FILE* report) {
  MachineSample s = sample_machine();
  if (!s.valid || s.load1 <= limits.busy_load_per_core * s.cores) return s;
  std::fprintf(report, "ztune calibrate: busy machine: load average %.2f on %d core(s)%s\n", s.load1, s.cores,
               seconds > 0 ? "; waiting for it to fall (--wait-quiet)" : "; measuring anyway (--wait-quiet S waits)");
  std::fflush(report);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until && s.load1 > limits.busy_load_per_core * s.cores) {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    s = sample_machine();
  }
  if (seconds > 0)
    std::fprintf(report, "ztune calibrate: load average now %.2f%s\n", s.load1,
                 s.load1 > limits.busy_load_per_core * s.cores ? " (still busy: measuring anyway)" : "");
  return s;
}

// The calibrated profile already in place at `path`, if any (the one a new fit must beat).
std::optional<HardwareProfile> profile_in_place(const std::string& path, std::vector<std::string>& notes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  try {
    return load_profile(path);
  } catch (const InputError& e) {
    notes.push_back(std::string("the profile in place cannot be read (") + e.what() +
                    "); the fit is judged against its starting profile instead");
    return std::nullopt;
  }
}

// --report: the cluster's profiles, oldest first, each with its error on the
// runs measured after it (issue 21: the loop shown).
int report_history(const CalibrateFlags& f) {
  const Cluster c = load_cluster(f.cluster);
  std::vector<std::string> notes;
  std::vector<calibration::ProfileHistoryRow> rows;
  // The user's own database before any command wrote it: no profiles yet (as
  // `ztune history` says); a named --db that is not there is refused.
  const std::string path = f.db.empty() ? default_db_path() : f.db;
  std::error_code ec;
  if (!f.db.empty() || std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
    rows = profile_history_from_db(ResultsDb::open(path, DbAccess::read), c, notes);
  else
    notes.push_back(path + " does not exist yet (search, run and calibrate create it)");
  if (f.json) {
    nlohmann::json j = profile_history_json(c.name, rows);
    j["notes"] = notes;
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  print_profile_history(stdout, c.name, rows);
  for (const auto& n : notes) std::printf("  note: %s\n", n.c_str());
  return kExitOk;
}

int run(const CalibrateFlags& f) {
  if (f.report) return report_history(f);
  {
    std::vector<std::pair<std::string, std::string>> inputs{
        {"--cluster", f.cluster}, {"--measurements", f.measurements}, {"--profile", f.prior}};
    for (const auto& r : f.records) inputs.emplace_back("--records", r);
    for (const auto& r : f.holdout_records) inputs.emplace_back("--holdout-records", r);
    for (auto& d : database_files(f.db, f.no_db)) inputs.push_back(std::move(d));
    for (const auto& [flag, out] : {std::pair<const char*, const std::string&>{"--out", f.out},
                                    {"--cluster-out", f.cluster_out}, {"--keep-measurements", f.keep_measurements}})
      refuse_output_over_input(flag, out, inputs);
    // A record both fitted and held out makes the held-out verdict meaningless.
    for (const auto& r : f.records)
      for (const auto& h : f.holdout_records) {
        std::error_code ec;
        if (std::filesystem::equivalent(r, h, ec) && !ec)
          throw InputError("--holdout-records " + h + ": is also in --records; a held-out run must not be fitted");
      }
  }
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
  // Each output named, in a message, by the flag that chose its path.
  const char* profile_out_named = !f.out.empty() ? "--out" : "the calibrated profile";
  const char* cluster_out_named = !f.cluster_out.empty() ? "--cluster-out"
                                  : !f.out.empty()       ? "--out (the calibrated cluster file beside it)"
                                                         : "the calibrated cluster file";
  std::FILE* report = f.json ? stderr : stdout;
  SessionInputs in;
  in.catalog_cluster = raw_cluster;
  in.prior = prior;
  in.name = name;
  in.rules.reference_factor = f.reference_factor;
  std::vector<std::string> notes;
  in.previous = profile_in_place(profile_out, notes);
  // The run records first: a bad one is refused before any microbenchmark runs.
  in.runs = runs_from_records(f.records);
  in.held_out = runs_from_records(f.holdout_records);
  // A run measured on another backend (a GPU's record into a CPU profile), or
  // one whose ranks time-shared cores, fits nothing this profile predicts:
  // refused by file (stored runs like them are left out with a note).
  for (const auto* runs : {&in.runs, &in.held_out}) {
    for (const auto& r : *runs) {
      if (!r.backend.empty() && !r.backend.starts_with(backend))
        throw InputError(r.label + ": $.environment.backend: the run was measured on " + r.backend + ", and this " +
                         "calibration fits the " + backend + " backend's profile of " + cluster.name);
      if (r.oversubscribed)
        throw InputError(r.label + ": $.environment: " + *r.oversubscribed + ": the ranks time-shared cores, which "
                         "the cost model does not price; rerun with fewer --threads (or ranks) to calibrate on it");
      // Stored runs are taken by cluster; a record file of another one had
      // been fitted as this cluster's without a word.
      if (!r.cluster.empty() && !run_of_cluster(r.cluster, raw_cluster.name))
        throw InputError(r.label + ": $.plan_file.cluster.name: the run was measured on cluster " + r.cluster +
                         ", and this calibration fits " + raw_cluster.name + "'s profile");
      // A record whose step times were scaled (1e-6 of the real ones) had
      // been fitted on, and "replaced" the profile with one 2.7x too fast.
      if (auto why = faster_than_hardware(r, raw_cluster)) throw InputError(*why);
    }
  }

  // The measured runs of the database join the records given, read before
  // the microbenchmarks too: a damaged stored run is refused (naming its row)
  // before minutes of measuring, not after them.
  // A database that cannot be opened (damaged, foreign, read-only) is
  // refused as run and history refuse it: it had been noted among a long
  // report's lines and the fit made without the runs the user named.
  std::optional<ResultsDb> db;
  if (!f.no_db) {
    try {
      db = ResultsDb::open(f.db.empty() ? default_db_path() : f.db);
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) + " (calibrate reads the stored runs from it and stores the profile in "
                       "it; --no-db calibrates without it; nothing was measured)");
    }
  }
  if (db && !f.no_db_runs) {
    std::vector<RunObservation> stored;
    try {
      stored = runs_from_db(*db, cluster.name, notes);
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) + " (--no-db-runs calibrates without the stored runs)");
    }
    // A stored run faster than its hardware (a row edited by hand) is left
    // out and said, as other unusable stored runs are.
    for (auto& r : stored) {
      if (auto why = faster_than_hardware(r, raw_cluster)) {
        notes.push_back(*why + " (the stored run is left out)");
        continue;
      }
      in.runs.push_back(std::move(r));
    }
  }
  // Each measurement once: a record given twice, or the record of a run the
  // database stored too, had been fitted twice (and a held-out one fitted
  // and scored as held out).
  drop_repeated_measurements(in.runs, in.held_out, notes);

  // 1. Measure (or read earlier measurements). The measuring run's scratch
  // directory goes however calibrate ends (--keep-measurements copies the file).
  std::optional<TempDir> scratch;
  std::string measurements_path = f.measurements;
  if (measurements_path.empty()) {
    const int np = f.np > 0 ? f.np : default_ranks(cluster, backend);
    // The cost model shares a node's cores among the ranks beyond them
    // (oversubscribed_view): the figures measured here must be per core.
    if (backend == "cpu" && cluster.node.cpu_cores > 0 && np > std::max(2, cluster.node.cpu_cores))
      throw InputError("--np " + std::to_string(np) + ": more CPU ranks than the " +
                       std::to_string(cluster.node.cpu_cores) + " cores of a " + cluster.name +
                       " node (cpu_cores); ranks would time-share cores and measure a share of one, which the cost "
                       "model already divides out. Use --np " + std::to_string(cluster.node.cpu_cores) + " or fewer");
    // CUDA ranks on a machine without an NVIDIA device would each find none
    // (as `ztune run` says before launching; calibrate launches here only).
    if (backend == "cuda" && !has_nvidia_device())
      throw InputError("--cluster " + cluster.name + ": its GPUs are calibrated by the CUDA backend, and this "
                       "machine has no NVIDIA device (no /dev/nvidia0); calibrate on the GPU machine, or give "
                       "--measurements from one");
    scratch.emplace(false, "ztune-calibrate");
    measurements_path = scratch->path() + "/measurements.json";
    std::vector<std::string> args{calibrate_worker_path(), "--out", measurements_path, "--backend", backend,
                                  "--threads", std::to_string(f.threads)};
    if (f.max_bytes > 0) args.insert(args.end(), {"--max-bytes", std::to_string(f.max_bytes)});
    if (f.quick) args.insert(args.end(), {"--repeats", "5", "--max-repeats", "9", "--round-budget-ms", "20"});
    in.machine_before = wait_until_quiet(f.wait_quiet_s, in.noise_limits, report);
    std::fprintf(report, "ztune calibrate: %d rank(s) of cluster %s (%s backend)%s\n", np, cluster.name.c_str(),
                 backend.c_str(),
                 np < cluster.total_devices()
                     ? ((backend == "cpu" ? std::string(": one per core") : std::string(": one per GPU")) +
                        "; the cluster describes " + std::to_string(cluster.total_devices()) +
                        " (pass --np to calibrate that layout)")
                           .c_str()
                     : "");
    std::fflush(report);
    int interrupted = 0;
    const int rc = run_process(launch_command(np, "", args), f.json, &interrupted);
    in.machine_after = sample_machine();
    if (interrupted != 0) {  // Ctrl-C or a signal: as `ztune run` and `search` end, 128 + the signal
      std::fprintf(stderr, "ztune calibrate: interrupted (signal %d): the microbenchmarks were stopped; nothing "
                   "was fitted or written\n", interrupted);
      return 128 + interrupted;
    }
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
  // Measurements of another backend (a CPU run's for a GPU cluster) describe
  // another machine: a profile fitted to them prices nothing real.
  if (!m.backend.empty() && m.backend != backend)
    throw InputError("--measurements " + measurements_path + ": $.backend: measured on the " + m.backend +
                     " backend, and this calibration fits the " + backend + " backend's profile of " + cluster.name +
                     "; measure on that backend (--backend " + m.backend + " with a cluster of its devices)");
  if (m.wrong > 0) {
    std::fprintf(stderr, "ztune calibrate: %s: %lld element(s) failed their data check; no profile is fitted\n",
                 measurements_path.c_str(), static_cast<long long>(m.wrong));
    return kExitInfeasible;
  }
  if (!f.keep_measurements.empty()) {
    std::ifstream in_file(measurements_path, std::ios::binary);
    std::ostringstream text;
    text << in_file.rdbuf();
    if (auto why = write_file_durably(f.keep_measurements, text.str())) {
      if (scratch) scratch->keep();  // the message points at them: they stay
      throw InputError("--keep-measurements " + f.keep_measurements + ": cannot write the file: " + *why +
                       " (the measurements are at " + measurements_path + ")");
    }
  }
  in.measurements = &m;

  // 2. Fit, cross-validate, decide.
  SessionResult r = run_session(in);
  r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
  const bool write = r.verdict.accept || f.force;

  // 3. Write and store only what earned its place (or what --force insists on).
  // The profile file is the commit (what --profile NAME reads), so it goes
  // last: the cluster file and the database row first. Ctrl-C or a TERM in
  // these milliseconds waits until they are done; a kill had left a profile
  // in use without its row in history, or without its cluster file.
  std::optional<std::int64_t> profile_id;
  if (write) {
    sigset_t deferred, before;
    sigemptyset(&deferred);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&deferred, sig);
    pthread_sigmask(SIG_BLOCK, &deferred, &before);
    try {
      write_json(cluster_out, cluster_to_json(r.cluster), cluster_out_named);
      if (db) {
        try {
          profile_id = db->store_profile(r.profile);
        } catch (const InputError& e) {
          r.notes.push_back(std::string("profile not stored in the results database: ") + e.what());
        }
      }
      write_json(profile_out, profile_to_json(r.profile), profile_out_named);
    } catch (...) {
      pthread_sigmask(SIG_SETMASK, &before, nullptr);
      throw;
    }
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
  const int rc = r.verdict.accept || f.force ? kExitOk : kExitInfeasible;
  if (f.json) {
    nlohmann::json j = session_json(r);
    j["cluster"] = cluster.name;
    j["backend"] = backend;
    j["ranks"] = m.ranks;
    // Where the measurements are kept: the scratch copy goes with calibrate.
    j["measurements"] = !f.measurements.empty()      ? nlohmann::json(f.measurements)
                        : !f.keep_measurements.empty() ? nlohmann::json(f.keep_measurements)
                                                       : nlohmann::json(nullptr);
    j["measurement_time_s"] = m.elapsed_s;
    j["written"] = write;
    j["profile"] = write ? nlohmann::json(profile_out) : nlohmann::json(nullptr);
    j["calibrated_cluster"] = write ? nlohmann::json(cluster_out) : nlohmann::json(nullptr);
    j["profile_id"] = profile_id ? nlohmann::json(*profile_id) : nlohmann::json(nullptr);
    std::printf("%s\n", j.dump(2).c_str());
    return rc;
  }
  std::printf("\n== Fit: %zu microbenchmark points, %zu training run(s) (%zu held out)\n",
              m.gemm.size() + m.attention.size() + m.memory.size() + m.copies.size() + m.collectives.size(),
              in.runs.size(), in.held_out.size());
  print_session(stdout, r);
  std::printf("\n");
  print_verdict(stdout, r, f.force);
  if (!write) {
    // A refusal for the reference plans alone has a second way out: this
    // machine may truly be that far from the prior (a busy or slow host).
    const bool reference_only = !r.verdict.refused_plans.empty() && r.verdict.reasons.size() == 1;
    char factor[32];
    std::snprintf(factor, sizeof factor, "%g", f.reference_factor);
    const std::string hint = reference_only ? std::string("; or, if this machine is that far from the prior, allow it "
                                                          "with --reference-factor F (now ") + factor + ")"
                                            : std::string();
    std::printf("\nnothing written%s; --force writes it anyway%s\n",
                in.previous ? (" (the profile in place stays: " + profile_out + ")").c_str() : "", hint.c_str());
    return rc;
  }
  std::printf("\nprofile: %s%s\ncalibrated cluster (the same figures, for tools that read cluster files): %s\n"
              "use it: ztune predict --cluster %s --profile %s ... (the profile carries the measured figures)\n",
              profile_out.c_str(), profile_id ? (" (stored as profile " + std::to_string(*profile_id) + ")").c_str() : "",
              cluster_out.c_str(), f.cluster.c_str(), profile_out.c_str());
  return rc;
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
      ->check(integer_in(2, 1 << 20, "a rank count"));
  app->add_option("--threads", f->threads, "Compute threads per rank")->check(ThreadCount);
  app->add_option("--out", f->out, "Profile file to write (default: ~/.local/share/ztune/profiles/<cluster>-calibrated.json, "
                  "$XDG_DATA_HOME/ztune/... when set; then --profile <cluster>-calibrated finds it)")
      ->check(WritableFile);
  app->add_option("--cluster-out", f->cluster_out,
                  "Calibrated cluster file (default: beside --out as .cluster.json, else "
                  "~/.local/share/ztune/profiles/calibrated-clusters/)")
      ->check(WritableFile);
  app->add_option("--db", f->db, kDbHelp)->check(DatabasePath);
  app->add_flag("--no-db", f->no_db, "Neither read runs from nor store the profile in the results database");
  app->add_flag("--no-db-runs", f->no_db_runs, "Do not fit to the runs stored in the database");
  app->add_option("--measurements", f->measurements, "Fit these measurements instead of running the benchmarks")
      ->check(GivenPath);
  app->add_option("--keep-measurements", f->keep_measurements, "Also write the measurements JSON here")
      ->check(WritableFile);
  app->add_option("--records", f->records, "Run records (ztune-worker --record) to fit to")
      ->expected(1, -1)
      ->check(GivenPath);
  app->add_option("--holdout-records", f->holdout_records, "Run records to evaluate only (not fitted)")
      ->expected(1, -1)
      ->check(GivenPath);
  app->add_option("--profile", f->prior, "Starting profile (default: data/profiles/<gpu>.json)")->check(GivenPath);
  app->add_option("--max-bytes", f->max_bytes, "Largest collective message (default: 1 GiB; 16 MiB on CPU)")
      ->check(integer_in(4096, 1LL << 36, "a message size in bytes"));
  app->add_flag("--quick", f->quick, "Fewer timed rounds (5 to 9 of ~20 ms)");
  app->add_flag("--json", f->json, "Print the fit and the errors as JSON (benchmark tables go to stderr)");
  app->add_flag("--force", f->force,
                "Write the fitted profile even when it is refused (worse on held-out runs or points, off its starting "
                "profile on a reference plan, or measured on a noisy machine); exit 0");
  app->add_flag("--report", f->report,
                "Print the cluster's calibrated profiles, oldest first, with each one's error on the runs measured "
                "since (from the results database); measures and fits nothing");
  app->add_option("--wait-quiet", f->wait_quiet_s,
                  "Before measuring, wait up to this many seconds for a busy machine's load average to fall")
      ->check(number_in(0.0, 86400.0, "seconds"));
  app->add_option("--reference-factor", f->reference_factor,
                  "Refuse a fit whose prediction of a reference plan differs from its starting profile's by more than "
                  "this factor (default 2)")
      ->check(number_in(1.0, 1e6, "a factor"));
  return {app, [f] { return run(*f); }};
}

}  // namespace ztune::cli
