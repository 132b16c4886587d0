#include "autorun.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "db_runs.hpp"
#include "memory_comparison.hpp"
#include "command.hpp"
#include "run_launch.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/executor_support.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/calibration/calibrate_session.hpp"
#include "ztune/calibration/profile_fit.hpp"
#include "ztune/vocab/run_record.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/model/time_model.hpp"
#include "ztune/tuner/export.hpp"

namespace ztune::cli {

namespace {

// Devices this launch can reach. CPU ranks: any number (Open MPI
// oversubscribes the cores; the ranks then share them). GPUs: the slots of a
// Slurm allocation or of --hosts, else the NVIDIA devices of this machine.
struct Availability {
  int devices = 0;
  std::string where;
};

Availability available_devices(const Cluster& c, const std::string& hosts) {
  if (c.device_kind == DeviceKind::cpu) return {c.total_devices(), "CPU ranks on this machine (oversubscribed when needed)"};
  if (const char* n = std::getenv("SLURM_NTASKS"); n != nullptr)
    return {std::atoi(n), "the Slurm allocation (SLURM_NTASKS)"};
  if (!hosts.empty()) {
    int slots = 0;
    std::stringstream ss(hosts);
    for (std::string h; std::getline(ss, h, ',');) {
      const auto colon = h.find(':');
      slots += colon == std::string::npos ? 1 : std::atoi(h.c_str() + colon + 1);
    }
    return {slots, "--hosts"};
  }
  int gpus = 0;
  for (int i = 0; i < 64; ++i)
    if (std::filesystem::exists("/dev/nvidia" + std::to_string(i))) ++gpus;
  return {gpus, "this machine (/dev/nvidia*)"};
}

// What `ztune export` would give for the plan, or the engine's refusal.
void print_exports(const PlanFile& pf, const std::string& plan_path) {
  try {
    std::printf("\nDeepSpeed ds_config.json:\n%s\n", deepspeed_config(pf, plan_path).dump(2).c_str());
    std::printf("DeepSpeed launch: %s\n", deepspeed_launch(pf, "ds_config.json", plan_path).c_str());
  } catch (const InputError& e) {
    std::printf("\nDeepSpeed: %s\n", e.what());
  }
  try {
    std::printf("Megatron-LM launch: %s\n", megatron_launch(pf, plan_path).c_str());
  } catch (const InputError& e) {
    std::printf("Megatron-LM: %s\n", e.what());
  }
}

double err(double predicted, double measured) { return measured > 0 ? 100.0 * (predicted - measured) / measured : 0; }

// Measured beside predicted: iteration, tokens/s, peak memory per rank (each
// beside its own pipeline stage's prediction, `stage_bytes`), and time per
// operation type (rank 0, per step) beside the prediction's parts.
void print_comparison(const RunRecord& record, const Prediction& p, const std::vector<double>& stage_bytes,
                      const ComputeByKind& kinds) {
  const double measured = record.step_time_s;
  std::printf("\n%-28s %14s %14s %9s\n", "", "predicted", "measured", "error");
  std::printf("%-28s %13.4fs %13.4fs %+8.1f%%\n", "iteration time", p.time.iteration_s, measured,
              err(p.time.iteration_s, measured));
  std::printf("%-28s %14.0f %14.0f %+8.1f%%\n", "tokens/s", p.time.tokens_per_s,
              record.tokens_per_s, err(p.time.tokens_per_s, record.tokens_per_s));
  const auto& peaks = record.peak_memory_bytes;
  for (std::size_t r = 0; r < peaks.size(); ++r) {
    const double m = peaks[r];
    const double predicted = r < stage_bytes.size() ? stage_bytes[r] : p.memory.gpu_total_bytes;
    std::printf("%-28s %12.2fMiB %12.2fMiB %+8.1f%%\n", ("peak memory rank " + std::to_string(r)).c_str(),
                predicted / 1048576.0, m / 1048576.0, err(predicted, m));
  }
  std::fputs(memory_at_peak_table(record, p.memory).c_str(), stdout);
  // Per operation type: the executor times kernels by kind on rank 0, the cost
  // model predicts rank 0's compute by the same kinds; then its exposed
  // communication parts beside the measured collectives. Both per step.
  const double steps = static_cast<double>(std::max<std::size_t>(1, record.steps.size()));
  auto op = [&](const char* k) { return record.op_seconds_per_step(k); };
  const double compute_measured = op("gemm") + op("attention") + op("memory_bound") + op("host_adam");
  const double compute_predicted = kinds.gemm + kinds.attention + kinds.memory_bound + kinds.host_adam;
  auto row = [&](const char* name, double predicted, double observed) {
    std::printf("  %-26s %14.4f %14.4f %+8.1f%%\n", name, predicted, observed, err(predicted, observed));
  };
  std::printf("\nper step, rank 0 (s)          %14s %14s %9s\n", "predicted", "measured", "error");
  row("gemm", kinds.gemm, op("gemm"));
  row("attention", kinds.attention, op("attention"));
  row("memory_bound", kinds.memory_bound, op("memory_bound"));
  if (kinds.host_adam > 0 || op("host_adam") > 0) row("host_adam", kinds.host_adam, op("host_adam"));
  row("compute (sum of the above)", compute_predicted, compute_measured);
  for (auto part : {TimePart::tp_comm, TimePart::pp_comm, TimePart::cp_comm, TimePart::ulysses_comm, TimePart::dp_comm,
                    TimePart::zero3_gather, TimePart::bubble, TimePart::offload_stall, TimePart::overhead})
    if (p.time.part(part) > 0)
      std::printf("  %-26s %14.4f %14s\n", kTimePartNames[static_cast<std::size_t>(part)], p.time.part(part), "");
  for (const auto& [group, g] : record.collectives_rank0)
    for (const auto& [kind, v] : g.collectives)
      std::printf("  %-26s %14s %14.4f  (%lld calls, %.2f GB/s busbw, launch to completion)\n",
                  (group + " " + kind).c_str(), "", v.time_s / steps, static_cast<long long>(v.count), v.busbw_gbps);
}

}  // namespace

int run_best_plan(const Plan& plan, const Transformer& m, const Cluster& catalog_cluster, const Cluster& c,
                  const HardwareProfile& hw,
                  const AutorunOptions& o, std::optional<ResultsDb>& db) {
  namespace fs = std::filesystem;
  std::string dir;
  if (o.plan_out.empty()) {
    char tmpl[] = "/tmp/ztune-autorun-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw InputError("cannot create a temporary directory in /tmp");
    dir = tmpl;
  } else {
    dir = fs::path(o.plan_out).parent_path().string();
    if (dir.empty()) dir = ".";
  }
  // A temporary directory of its own is removed when the run ends, however it
  // ends (a dry run keeps it: the launch command it prints names its plan file).
  struct RemoveAtExit {
    std::string dir;
    ~RemoveAtExit() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{o.plan_out.empty() && !o.dry_run ? dir : std::string()};
  const std::string plan_path = o.plan_out.empty() ? dir + "/plan.json" : o.plan_out;
  const std::string record_path = dir + "/record.json";
  const PlanFile pf{plan, m, c, std::nullopt, false};  // ztune's executor runs it, whatever the search priced
  if (auto why = write_file_durably(plan_path, plan_file_to_json(pf).dump(2) + "\n"))
    throw InputError("--out " + plan_path + ": cannot write the plan file: " + *why);
  const int np = plan.gpus();
  WorkerJob job{plan_path, record_path, dir + "/checkpoints", to_string(executor_backend_for(c)),
                o.steps, o.threads, o.data, o.nvme_dir, std::nullopt};
  job.progress = dir + "/progress.jsonl";  // what a run stopped part-way did, stored with it
  const auto cmd = launch_command(np, o.hosts, worker_args(job));
  std::string cmd_text;
  for (const auto& a : cmd) cmd_text += (cmd_text.empty() ? "" : " ") + a;

  std::printf("\n== Run: %s (%d %s)\nplan file: %s\n", plan.summary().c_str(), np,
              c.device_kind == DeviceKind::cpu ? "CPU ranks" : "GPUs", plan_path.c_str());
  if (o.dry_run) {
    std::printf("launch: %s\n\nplan:\n%s\n", cmd_text.c_str(), plan_file_to_json(pf).at("plan").dump(2).c_str());
    print_exports(pf, plan_path);
    std::printf("\n(dry run: nothing was launched)\n");
    return kExitOk;
  }
  const Availability avail = available_devices(c, o.hosts);
  if (np > avail.devices) {
    std::fprintf(stderr,
                 "ztune: refused to run: the plan needs %d %s, %s has %d. Nothing was launched; "
                 "--dry-run prints the launch command, the plan and the DeepSpeed/Megatron configs.\n",
                 np, c.device_kind == DeviceKind::cpu ? "ranks" : "GPUs", avail.where.c_str(), avail.devices);
    return kExitInfeasible;
  }
  if (c.device_kind == DeviceKind::gpu)
    std::fprintf(stderr, "ztune: note: launching on GPUs; the worker refuses (exit 2) if this build has no CUDA "
                         "backend for the plan\n");
  std::printf("launch: %s\n", cmd_text.c_str());
  std::fflush(stdout);
  int interrupted = 0, killed_by = 0;
  // The machine around the run: other work sharing it slows the run by a
  // contention the cost model does not price (said, stored, and kept out of fits).
  const calibration::MachineSample machine_before = calibration::sample_machine();
  const int rc = run_process(cmd, true, &interrupted, &killed_by);
  const calibration::RunContention contention =
      calibration::run_contention(machine_before, calibration::sample_machine());
  const std::optional<RunProgress> done = rc != 0 || interrupted != 0 ? read_progress(job.progress) : std::nullopt;
  if (interrupted != 0) {
    std::fprintf(stderr, "ztune: --run: interrupted (%s)%s: the job was stopped and its processes ended\n",
                 signal_name(interrupted).c_str(), done ? (" after " + progress_summary(*done)).c_str() : "");
    if (db)
      store_unfinished_run(*db, c, m, plan, "interrupted", std::string("interrupted by ") + signal_name(interrupted), "",
                           done);
    return 128 + interrupted;
  }
  if (rc != 0) {
    const std::string why = launch_failure(cmd.front(), rc, killed_by);
    std::fprintf(stderr, "ztune: --run: %s%s\n", why.c_str(),
                 done ? ("; it had finished " + progress_summary(*done)).c_str() : "");
    if (db) store_unfinished_run(*db, c, m, plan, "failed", why, "", done);
    return rc == kExitUsage ? kExitUsage : kExitInfeasible;
  }
  const RunRecord record = read_run_record(record_path);
  note_contention(contention);
  const Prediction p = predict(m, plan, c, hw);
  // Each rank beside its own stage's prediction (one per stage, not per rank).
  std::vector<double> per_stage;
  for (int s = 0; s < plan.pp; ++s) per_stage.push_back(stage_gpu_bytes(m, plan, c, hw, s, MemoryOptions{}));
  std::vector<double> stage_bytes;
  for (std::size_t r = 0; r < record.peak_memory_bytes.size(); ++r)
    stage_bytes.push_back(per_stage[static_cast<std::size_t>(plan.stage_of_rank(static_cast<int>(r)))]);
  print_comparison(record, p, stage_bytes, compute_by_kind_rank0(m, plan, c, hw));

  if (db) {
    RunToStore r{c, m, plan, p, record.document, record.step_time_s, {}, "ok"};
    const auto& peaks = record.peak_memory_bytes;
    for (std::size_t i = 0; i < peaks.size(); ++i)
      r.measurements.push_back({"peak_memory_bytes.rank" + std::to_string(i), peaks[i], "bytes"});
    r.measurements.push_back({"tokens_per_s", record.tokens_per_s, "tokens/s"});
    add_contention(r.measurements, contention);
    r.measurements.push_back({"predicted_peak_memory_bytes", p.memory.gpu_total_bytes, "bytes"});
    for (const auto& [kind, v] : record.ops_rank0)
      r.measurements.push_back({"op_time_s." + kind, record.op_seconds_per_step(kind), "s/step"});
    const ComputeByKind k = compute_by_kind_rank0(m, plan, c, hw);
    for (const auto& [kind, v] : {std::pair{"gemm", k.gemm}, std::pair{"attention", k.attention},
                                  std::pair{"memory_bound", k.memory_bound}, std::pair{"host_adam", k.host_adam}})
      r.measurements.push_back({std::string("predicted_op_time_s.") + kind, v, "s/step"});
    const auto id = db->store_run(r);
    std::printf("\nstored as run %lld in %s (predicted and measured side by side)\n", static_cast<long long>(id),
                db->path().c_str());
  }
  if (!o.refine) return kExitOk;

  // Refine: fit the profile to every stored run of this cluster (or this one),
  // and keep the fit only if it predicts the runs it did not see better than
  // the profile in place (calibration/, calibrate_session.hpp).
  std::vector<std::string> notes;
  std::vector<RunObservation> runs;
  if (db) runs = runs_from_db(*db, c.name, notes);
  if (runs.empty()) {
    RunObservation own = run_observation_from_record(record);
    if (own.oversubscribed) {
      std::printf("\nnot refined: %s; the ranks time-shared cores, which the cost model does not price\n",
                  own.oversubscribed->c_str());
      for (const auto& n : notes) std::printf("  note: %s\n", n.c_str());
      return kExitOk;
    }
    // The run just measured is held to the stored runs' rule: one slowed by
    // other work on the machine teaches the profile that work (a search
    // --run under a 58 % busy machine had fitted it, and each later search
    // ranked its plans slower).
    if (const auto why = calibration::contention_problem(contention)) {
      std::printf("\nnot refined: %s; its time includes that work, which the cost model does not price\n",
                  why->c_str());
      for (const auto& n : notes) std::printf("  note: %s\n", n.c_str());
      return kExitOk;
    }
    runs.push_back(std::move(own));
  }
  std::string name = c.name;
  if (!name.ends_with("-calibrated")) name += "-calibrated";
  calibration::SessionInputs in;
  in.catalog_cluster = catalog_cluster;
  in.prior = hw;
  in.name = name;
  in.runs = runs;
  const calibration::SessionResult r = calibration::run_session(in);
  HardwareProfile refined = r.profile;
  refined.source = hw.source + "; refined by ztune --run on " + std::to_string(runs.size()) + " run(s)";
  const double before = calibration::mean_abs_error(r.rows, false, 0);
  const double after = calibration::mean_abs_error(r.rows, false, 2);
  std::printf("\nrefit on %zu run(s): mean |iteration error| %.1f%% with the profile in place -> %.1f%% fitted "
              "(learned-from, in-sample)",
              runs.size(), 100 * before, 100 * after);
  if (r.cv.runs_judged)
    std::printf("; held out (leave-one-run-out): %.1f%% in place -> %.1f%% fitted", 100 * r.cv.previous_run_error,
                100 * r.cv.candidate_run_error);
  std::printf("\n  parameters refined: %zu (%s)\n", r.run_fit.refined.size(),
              r.run_fit.refined.empty() ? "none: the runs determine none beyond the prior" : [&] {
                std::string list;
                for (const auto& name_refined : r.run_fit.refined) list += (list.empty() ? "" : ", ") + name_refined;
                return list;
              }().c_str());
  for (const auto& n : notes) std::printf("  note: %s\n", n.c_str());
  for (const auto& n : r.notes) std::printf("  note: %s\n", n.c_str());
  for (const auto& n : r.verdict.notes) std::printf("  judged: %s\n", n.c_str());
  if (!r.verdict.accept) {
    std::printf("profile kept (%s):\n", hw.name.c_str());
    for (const auto& why : r.verdict.reasons) std::printf("  - %s\n", why.c_str());
    return kExitOk;  // the run itself succeeded
  }
  Cluster refined_cluster = r.cluster;
  refined_cluster.name = name;
  // Written to the user's directory (the catalog is never written to), each
  // file replaced atomically.
  const fs::path profiles = fs::path(user_data_dir()) / "profiles";
  const std::string profile_path = (profiles / (name + ".json")).string();
  const std::string cluster_path = (profiles / "calibrated-clusters" / (name + ".json")).string();
  write_file_atomically(profile_path, profile_to_json(refined).dump(2) + "\n", "refined profile");
  write_file_atomically(cluster_path, cluster_to_json(refined_cluster).dump(2) + "\n", "calibrated cluster");
  if (db) db->store_profile(refined);
  std::printf("profile: %s\ncalibrated cluster: %s\n", profile_path.c_str(), cluster_path.c_str());
  return kExitOk;
}

}  // namespace ztune::cli
