// ztune run: launches the executor's ranks on a plan (a plan file, or the cluster,
// model and plan flags of `ztune predict`), reads the run record rank 0 wrote,
// prints its summary beside the cost model's prediction, and stores both in the
// results database through the tuner's API (the executor never opens it).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "db_runs.hpp"
#include "memory_comparison.hpp"
#include "plan_flags.hpp"
#include "run_launch.hpp"
#include "ztune/calibration/profile_fit.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/checkpoint_layout.hpp"
#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/flag_values.hpp"
#include "ztune/vocab/executor_support.hpp"
#include "ztune/model/finite_check.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/vocab/run_record.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/tuner/results_db.hpp"

namespace ztune::cli {
namespace {

struct RunFlags {
  std::string plan_json;  // positional
  InputFlags input;
  PlanFlags plan;
  int np = 0;
  std::string hosts;
  int steps = 10;
  long long seed = 1234;
  bool json = false;
  std::string data = "synthetic";
  std::string record;
  int threads = 1;
  std::string db;
  bool no_db = false;
  std::string profile;
  std::string nvme_dir;
  bool keep = false;              // keep the ztune-run-* temporary directory
  bool force = false;             // launch even a plan predicted over this machine's memory
  int checkpoint_every = 0;       // ztune-worker --checkpoint-every
  int keep_checkpoints = 0;       // ztune-worker --keep-checkpoints
  std::optional<int> collective_timeout_s;  // ztune-worker --collective-timeout
  std::string checkpoint_dir;     // default: the temporary directory
  std::string resume;             // a checkpoint directory to continue from
  bool dry_run = false;           // check and print the launch, launch nothing
};


// Ranks started on this machine whose predicted memory together exceeds what
// the machine has would not fail cleanly: the kernel's out-of-memory killer
// ends one of them (or any other process on a shared machine) with SIGKILL,
// after mpirun started them all. Refused unless --force. On CPU ranks each
// rank's "GPU" memory is this machine's; offloaded states are the nodes' host
// memory either way (the ranks of every node the plan spans run here).
void refuse_over_machine_memory(const MemoryPrediction& m, const Cluster& c, int np, ExecBackend backend,
                                const RunFlags& f) {
  if (f.force || !ranks_run_here(f.hosts)) return;
  const auto have = machine_memory_bytes();
  if (!have) return;
  const int nodes = (np + c.node.gpus - 1) / c.node.gpus;
  const double ranks_bytes = backend == ExecBackend::cpu ? np * m.gpu_total_bytes : 0.0;
  const double need = ranks_bytes + nodes * m.host_bytes_per_node;
  if (need <= *have) return;
  char buf[160];
  std::string what;
  if (backend == ExecBackend::cpu) {
    std::snprintf(buf, sizeof buf, "%d ranks × %.2f GiB", np, m.gpu_total_bytes / kBytesPerGiB);
    what = buf;
  }
  if (m.host_bytes_per_node > 0) {
    std::snprintf(buf, sizeof buf, "%s%d node%s × %.2f GiB of offloaded states", what.empty() ? "" : " + ", nodes,
                  nodes == 1 ? "" : "s", m.host_bytes_per_node / kBytesPerGiB);
    what += buf;
  }
  char head[160];
  std::snprintf(head, sizeof head, "%.2f GiB together (%s), more than its %.2f GiB", need / kBytesPerGiB, what.c_str(),
                *have / kBytesPerGiB);
  throw InputError(std::string("the memory model puts the ranks this machine would run at ") + head +
                   ": the kernel's out-of-memory killer would end a rank, or another process, partway through; run a "
                   "smaller plan, pass --hosts to spread the ranks, or --force to launch it anyway");
}

// The directory a file will be written into must exist and be writable (the
// worker writes the record with a plain stream); a --record that fails only
// after training loses the run. And the record is read back after the run
// (compared, stored): a FIFO would block the worker's write until someone
// reads it, /dev/null or another stream would lose the run after it ran.
void check_writable_file(const std::string& flag, const std::string& file) {
  if (auto why = output_file_problem(file, false)) throw InputError(flag + " " + file + ": " + *why);
  if (is_stream_target(file))
    throw InputError(flag + " " + file + ": not a regular file (a FIFO, device or stream); ztune run reads the record "
                     "back after the run: give a file");
}

void check_writable_dir(const std::string& flag, const std::string& dir, bool must_exist) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) || must_exist) {
    if (!fs::is_directory(dir, ec))
      throw InputError(flag + " " + dir + (fs::exists(dir, ec) ? ": not a directory" : ": no such directory"));
    if (::access(dir.c_str(), W_OK) != 0)
      throw InputError(flag + " " + dir + ": directory is not writable" +
                       // A resumed run locks, commits and prunes in the directory
                       // it resumes from: an archived (read-only) one is copied first.
                       (flag == "--resume" ? std::string("; a run resumes in the directory it reads (its lock, its "
                                                         "next checkpoints): copy it (cp -a " + dir + " NEW) and "
                                                         "--resume NEW")
                                           : std::string()));
    return;
  }
  fs::path parent = fs::path(dir).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec) || ::access(parent.c_str(), W_OK) != 0)
    throw InputError(flag + " " + dir + ": cannot be created (" + parent.string() +
                     " is not a writable directory)");
}

// The plan file to run: the positional file, or one built from the flags.
PlanFile resolve(const RunFlags& f) {
  auto inputs = f.input.files();
  inputs.insert(inputs.end(), {{"the plan", f.plan_json}, {"--plan", f.plan.plan_file}, {"--data", f.data},
                                {"--profile", f.profile}});
  for (auto& d : database_files(f.db, f.no_db)) inputs.push_back(std::move(d));
  // The checkpoint directory's own files (a record over its latest had broken the next --resume).
  for (const auto& [flag, dir] : {std::pair<const char*, const std::string&>{"--resume", f.resume},
                                  {"--checkpoint-dir", f.checkpoint_dir}})
    if (!dir.empty())
      for (const auto& file : {checkpoint_latest_path(dir), checkpoint_plan_path(dir), checkpoint_data_path(dir)})
        inputs.emplace_back(flag, file);
  refuse_output_over_input("--record", f.record, inputs);
  PlanFile pf;
  if (!f.plan_json.empty() && !f.plan.plan_file.empty())
    throw InputError("--plan: the plan file is given twice (" + f.plan_json + " and --plan " + f.plan.plan_file +
                     "); give one");
  if (!f.plan_json.empty()) {
    f.plan.refuse_beside(f.plan_json);
    pf = load_plan_file(f.plan_json);
    // What the file embeds it gives, as it gives the plan: a flag beside it
    // would be ignored (run ptiny.json --model tiny-llama had trained tiny).
    auto refuse = [&](const char* flag, bool given, bool embedded, const char* what) {
      if (given && embedded)
        throw InputError(std::string(flag) + ": the plan file " + f.plan_json + " embeds its " + what + "; drop " +
                         flag + " (a flag beside it would be ignored), or write the plan without it");
    };
    refuse("--model", !f.input.model.empty(), pf.model.has_value(), "model");
    refuse("--seq", f.input.seq > 0, pf.model.has_value(), "model (and its sequence length)");
    refuse("--cluster", !f.input.cluster.empty(), pf.cluster.has_value(), "cluster");
    refuse("--nodes", f.input.nodes > 0, pf.cluster.has_value(), "cluster (and its node count)");
    if (!pf.model && !f.input.model.empty()) pf.model = f.input.load_model_or_throw();
    if (!pf.cluster && !f.input.cluster.empty()) pf.cluster = f.input.load_cluster_or_throw();
    if (!pf.model) throw InputError(f.plan_json + ": $.model: missing; embed the model or pass --model");
    if (auto why = pf.cluster ? check_plan(pf.plan, *pf.model, *pf.cluster) : check_plan_shape(pf.plan, *pf.model))
      throw InputError(f.plan_json + ": " + in_plan_file(*why));
    return pf;
  }
  InputFlags in = f.input;
  if (in.cluster.empty()) in.cluster = "local-cpu";
  pf.cluster = in.load_cluster_or_throw();
  pf.model = in.load_model_or_throw();
  pf.plan = f.plan.resolve(*pf.model, *pf.cluster);
  // A CPU cluster trains fp32 unless asked otherwise (--precision bf16/fp16: 16-bit storage, fp32 arithmetic).
  if (pf.cluster->device_kind == DeviceKind::cpu && f.plan.precision.empty())
    pf.plan.precision = default_precision(*pf.cluster);
  return pf;
}

// Checkpoints of another plan, model or cluster are refused before the launch,
// naming what differs and how to resume them: the worker refuses them too (by
// the plan file's digest in every shard), but from each rank, amid mpirun's
// report. The plan that wrote them is kept beside them (checkpoint.cpp,
// keep_plan); checkpoints of older builds have none, and the worker decides.
void refuse_other_plan(const std::string& dir, const PlanFile& pf) {
  const std::string kept = checkpoint_plan_path(dir);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(kept, ec)) return;
  const PlanFile wrote = load_plan_file(kept);
  if (plan_file_to_json(wrote) == plan_file_to_json(pf)) return;
  auto name = [](const auto& part) { return part ? part->name : std::string("none"); };
  std::string what;
  if (name(wrote.model) != name(pf.model)) what = "model " + name(wrote.model) + ", this run's " + name(pf.model);
  else if (name(wrote.cluster) != name(pf.cluster))
    what = "cluster " + name(wrote.cluster) + ", this run's " + name(pf.cluster);
  else if (wrote.plan.summary() != pf.plan.summary())
    what = "plan " + wrote.plan.summary() + ", this run's " + pf.plan.summary();
  else
    what = "plan file, which differs from this run's beyond the plan's summary";
  throw InputError("--resume " + dir + ": its checkpoints were written by another " + what + "; resume them with "
                   "`ztune run " + kept + " --resume " + dir + "`, or start without --resume");
}

/// `arg` as a POSIX shell reads it back: as it is where it holds only
/// characters the shell leaves alone, else in single quotes.
std::string shell_quoted(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](unsigned char ch) {
    return std::isalnum(ch) != 0 || std::string_view("_./:=,@%+-").find(static_cast<char>(ch)) != std::string_view::npos;
  });
  if (plain) return arg;
  std::string out = "'";
  for (const char ch : arg) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// --dry-run: what a launch would start, and the cost model's figures for it;
// the plan file stays where the launch command names it.
int print_dry_run(const RunFlags& f, const PlanFile& pf, const std::vector<std::string>& cmd,
                  const std::string& plan_path, const Cluster* priced, const HardwareProfile* hw,
                  const MemoryPrediction* memory, const std::vector<std::string>& warnings) {
  std::optional<TimePrediction> time;
  if (priced != nullptr && hw != nullptr && memory != nullptr) {
    TimePrediction t = predict_time(*pf.model, pf.plan, *priced, *hw);
    if (non_finite_time(t).empty()) time = t;
  }
  if (f.json) {
    nlohmann::json out{{"dry_run", true},
                       {"plan", pf.plan.summary()},
                       {"plan_file", plan_path},
                       {"launch", cmd},
                       {"ranks", f.np > 0 ? f.np : pf.plan.gpus()},
                       {"predicted_iteration_s", time ? nlohmann::json(time->iteration_s) : nlohmann::json(nullptr)},
                       {"predicted_peak_memory_bytes",
                        memory != nullptr ? nlohmann::json(memory->gpu_total_bytes) : nlohmann::json(nullptr)},
                       {"profile", time ? nlohmann::json(hw->name) : nlohmann::json(nullptr)},
                       {"warnings", warnings}};
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::string launch;
  for (const auto& a : cmd) launch += (launch.empty() ? "" : " ") + shell_quoted(a);
  std::printf("plan %s on %d ranks, %d steps\nplan file: %s\nlaunch: %s\n", pf.plan.summary().c_str(),
              f.np > 0 ? f.np : pf.plan.gpus(), f.steps, plan_path.c_str(), launch.c_str());
  if (time)
    std::printf("predicted (profile %s): iteration %.4f s, %.0f tokens/s, peak memory (most loaded rank) %.1f MiB\n",
                hw->name.c_str(), time->iteration_s, time->tokens_per_s, memory->gpu_total_bytes / 1048576.0);
  else if (memory != nullptr)
    std::printf("predicted peak memory (most loaded rank): %.1f MiB\n", memory->gpu_total_bytes / 1048576.0);
  for (const auto& w : warnings) std::printf("warning: %s\n", w.c_str());
  std::printf("(dry run: nothing was launched; the plan file is kept)\n");
  return kExitOk;
}

// A measured time this far from the prediction (in %) points at the profile.
constexpr double kFarOffPct = 25;

int run(const RunFlags& f) {
  PlanFile pf = resolve(f);
  const int np = f.np > 0 ? f.np : pf.plan.gpus();
  // What the worker will read back is checked here, so that a refusal names the
  // plan or the flag, not a temporary file (an overridden --seq, --nodes).
  const std::string plan_name = f.plan_json.empty() ? std::string("the plan") : f.plan_json;
  try {
    (void)plan_file_from_json(plan_file_to_json(pf), plan_name);
  } catch (const InputError& e) {
    throw InputError(std::string(e.what()) + " (the plan file ztune-worker would run)");
  }
  // Where the run writes, checked before it starts.
  if (!f.record.empty()) check_writable_file("--record", f.record);
  // The database too: a directory, a damaged file or a read-only place had
  // been found only after the training, its run then kept as a record that
  // only calibrate --records reads.
  if (!f.no_db) {
    const std::string path = f.db.empty() ? default_db_path() : f.db;
    try {
      // A dry run reads an existing database and creates none: a missing one
      // is checked as the place the run would create it.
      std::error_code ec;
      if (!f.dry_run) (void)ResultsDb::open(path);
      else if (std::filesystem::exists(path, ec)) (void)ResultsDb::open(path, DbAccess::read);
      else if (auto why = output_file_problem(path)) throw InputError("--db " + path + ": " + *why);
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) + " (the run would be stored there: give another --db, or --no-db; "
                       "nothing was launched)");
    }
  }
  if (!f.resume.empty() && !f.checkpoint_dir.empty() && f.resume != f.checkpoint_dir)
    throw InputError("--resume " + f.resume + ": continues in its own directory; --checkpoint-dir " +
                     f.checkpoint_dir + " differs (give one of them)");
  // Another run writing or resuming the same directory: refused here, not by
  // the worker after the launch (which had stored a run that never began as
  // failed, and pointed at the other run's directory to resume).
  if (const std::string& locked = !f.resume.empty() ? f.resume : f.checkpoint_dir;
      !locked.empty() && (f.checkpoint_every > 0 || !f.resume.empty()))
    if (auto held = checkpoint_dir_held(locked)) throw InputError(*held + "; nothing was launched");
  if (!f.resume.empty()) {
    check_writable_dir("--resume", f.resume, true);
    if (!std::filesystem::exists(checkpoint_latest_path(f.resume))) {
      // Step directories without `latest` (it was removed): the ones there
      // are named, and how to commit one, as a damaged latest's error does.
      const std::vector<int> present = checkpoint_steps_present(f.resume);
      std::string steps;
      for (int n : present) steps += (steps.empty() ? "" : ", ") + std::to_string(n);
      throw InputError("--resume " + f.resume + ": no committed checkpoint in it (expected " +
                       checkpoint_latest_path(f.resume) + ", written by --checkpoint-every)" +
                       (present.empty()       ? std::string()
                        : present.size() == 1 ? "; it holds the step directory of step " + steps + ": to resume from it"
                                              : "; it holds the step directories of steps " + steps +
                                                    ": to resume from one") +
                       (present.empty() ? "" : ", write its step count into " + checkpoint_latest_path(f.resume)));
    }
    std::string why;
    const auto latest = latest_checkpoint(f.resume, why);
    if (!latest) throw InputError("--resume " + f.resume + ": " + why);
    if (*latest >= f.steps)
      throw InputError("--steps " + std::to_string(f.steps) + ": the checkpoint in " + f.resume + " is after step " +
                       std::to_string(*latest) + " already; ask for more steps to continue it");
    refuse_other_plan(f.resume, pf);
    if (auto missing = missing_data_identity(f.resume)) throw InputError("--resume " + f.resume + ": " + *missing);
    // The learning rate warms up and decays over --steps: another count
    // continues the run on another schedule (a 17-step resume of a 60-step
    // run had trained step 17 at another rate without a word).
    if (const auto was = checkpoint_schedule_steps(f.resume); was && *was != f.steps)
      std::fprintf(stderr,
                   "ztune run: note: --steps %d: the checkpoints in %s were written on a learning-rate schedule over "
                   "%d steps (warm-up, then cosine decay to the last step); from step %d on this run follows one "
                   "over %d%s\n",
                   f.steps, f.resume.c_str(), *was, *latest + 1, f.steps,
                   *latest < *was ? (", so its steps differ from the original run's (--steps " + std::to_string(*was) +
                                     " continues it as it was)").c_str()
                                  : ", which puts its rate back above the decayed one the original run ended on");
  }
  if (!f.checkpoint_dir.empty()) {
    check_writable_dir("--checkpoint-dir", f.checkpoint_dir, false);
    // Another run's committed checkpoints would be overwritten step by step.
    if (f.checkpoint_every > 0 && f.resume.empty() && std::filesystem::exists(checkpoint_latest_path(f.checkpoint_dir)))
      throw InputError("--checkpoint-dir " + f.checkpoint_dir + ": already holds a run's committed checkpoints; "
                       "continue it with --resume " + f.checkpoint_dir + ", or choose another directory");
  }
  if (f.checkpoint_every > 0 && f.checkpoint_dir.empty() && f.resume.empty() && !f.keep)
    throw InputError("--checkpoint-every: the checkpoints would go to the temporary directory, which is removed "
                     "after the run; give --checkpoint-dir DIR (or --keep)");
  if (f.keep_checkpoints > 0 && f.checkpoint_every == 0)
    throw InputError("--keep-checkpoints: no checkpoints are written without --checkpoint-every N");
  // The profile of the prediction shown beside the measurement, read before the
  // job so that a bad --profile costs no run: the one the user names (a
  // calibrated one carries its measured figures, applied to the cluster as
  // predict and search do), else the GPU's default.
  std::optional<HardwareProfile> hw;
  if (pf.cluster) hw = f.profile.empty() ? default_profile_for(*pf.cluster) : load_profile(f.profile);
  else if (!f.profile.empty()) throw InputError("--profile: the plan has no cluster to predict on; pass --cluster");
  // What the executor cannot run is refused here, before any process starts
  // (the worker would refuse it too, from every rank, amid mpirun's noise).
  const ExecBackend backend = pf.cluster ? executor_backend_for(*pf.cluster) : ExecBackend::cpu;
  if (auto why = unsupported_reason(pf.plan, *pf.model, np, backend))
    throw InputError(plan_name + ": " + *why);
  // A GPU plan on a machine without NVIDIA devices (the driver's /dev/nvidia0,
  // /dev/nvidia1, ...) would start every rank only for each to find none: said
  // here. With --hosts the ranks run elsewhere, and that machine decides.
  // A dry run is the check made before taking the plan to the GPU machine:
  // said among its warnings.
  std::vector<std::string> dry_run_warnings;
  if (backend == ExecBackend::cuda && f.hosts.empty() && !has_nvidia_device()) {
    if (!f.dry_run)
      throw InputError(plan_name + ": the plan is for " + pf.cluster->name + "'s GPUs (the CUDA backend), and this "
                       "machine has no NVIDIA device (no /dev/nvidia0); run it on the GPU machine, pass --hosts, or "
                       "plan for --cluster local-cpu");
    dry_run_warnings.push_back("this machine has no NVIDIA device (no /dev/nvidia0): run the launch on the GPU "
                               "machine, or pass --hosts");
  }
  // The cost model's memory for the plan, when the plan fits the cluster's
  // rules (hw is there only with a cluster): shown beside the measurement after
  // the run. A plan it says does not fit is still run (the model may be
  // pessimistic, the cluster file's capacity smaller than the machine), with a
  // warning first: a rank that runs out says so (ztune-worker's out of memory).
  std::optional<Cluster> priced;  // the cluster with the profile's measured figures
  std::optional<MemoryPrediction> predicted_memory;
  if (hw && !check_plan(pf.plan, *pf.model, *pf.cluster)) {
    priced = with_measured_figures(*pf.cluster, *hw);
    predicted_memory = predict_memory(*pf.model, pf.plan, *priced, *hw);
    if (!predicted_memory->fits_gpu) {
      const std::string over = "the memory model puts this plan at " +
                               formatted("%.2f", predicted_memory->gpu_total_bytes / kBytesPerGiB) +
                               " GiB per rank, more than " + priced->name + "'s " +
                               formatted("%.2f", predicted_memory->gpu_capacity_bytes / kBytesPerGiB) +
                               " GiB; the run may fail for lack of memory";
      if (f.dry_run) dry_run_warnings.push_back(over);
      else std::fprintf(stderr, "ztune: warning: %s\n", over.c_str());
    }
    refuse_over_machine_memory(*predicted_memory, *priced, np, backend, f);
  }
  // A dry run keeps the directory: the launch command it prints reads its plan file.
  TempDir tmp(f.keep || f.dry_run, "ztune-run");  // the plan file, the default record and checkpoints
  const std::string& dir = tmp.path();
  const std::string plan_path = dir + "/plan.json";
  if (auto why = write_file_durably(plan_path, plan_file_to_json(pf).dump(2) + "\n"))
    throw InputError(plan_path + ": cannot write the plan file: " + *why);
  const std::string record_path = f.record.empty() ? dir + "/record.json" : f.record;
  const std::string checkpoint_dir = !f.resume.empty()           ? f.resume
                                     : !f.checkpoint_dir.empty() ? f.checkpoint_dir
                                                                 : dir + "/checkpoints";
  WorkerJob job{plan_path, record_path, checkpoint_dir,
                to_string(backend), f.steps, f.threads, f.data,
                f.nvme_dir, static_cast<std::uint64_t>(f.seed), f.checkpoint_every, f.keep_checkpoints,
                f.collective_timeout_s, !f.resume.empty()};
  // A --record the worker cannot write at the end (a full disk) goes here
  // instead: the run's measurements are kept and stored, and the error said.
  if (!f.record.empty()) job.record_fallback = dir + "/record.json";
  // The steps as they finish: what a run stopped part-way did is said and stored.
  job.progress = dir + "/progress.jsonl";
  // The schedule the checkpoints are written on, beside them (read by a later
  // --resume); a dry run says what its launch line leaves out.
  if (f.checkpoint_every > 0 && f.dry_run)
    dry_run_warnings.push_back("a launch by hand: `ztune run` writes \"steps " + std::to_string(f.steps) + "\" to " +
                               checkpoint_schedule_path(checkpoint_dir) + " before it launches; without it a later "
                               "--resume cannot check its --steps against this run's learning-rate schedule");
  if (f.checkpoint_every > 0 && !f.dry_run) {
    std::error_code ec;
    std::filesystem::create_directories(checkpoint_dir, ec);
    if (auto why = write_file_durably(checkpoint_schedule_path(checkpoint_dir), "steps " + std::to_string(f.steps) + "\n"))
      std::fprintf(stderr, "ztune run: note: %s: not written (%s); a later --resume cannot check its --steps\n",
                   checkpoint_schedule_path(checkpoint_dir).c_str(), why->c_str());
  }
  if (!f.resume.empty() && f.checkpoint_every == 0)
    std::fprintf(stderr, "note: --resume %s without --checkpoint-every writes no further checkpoints: an interrupted "
                 "run resumes from the same one again (add --checkpoint-every N to keep writing them)\n",
                 f.resume.c_str());
  // Ranks × threads beyond this machine's hardware threads time-share cores:
  // the run works, but its time is contention the cost model does not price
  // (it shares a node's cores among single-threaded ranks, oversubscribed_view,
  // not among a rank's threads), and calibrate leaves such a run out of fits.
  if (const auto over = oversubscription(np, f.threads, std::thread::hardware_concurrency()); over && f.hosts.empty())
    std::fprintf(stderr, "ztune: note: %s: the ranks time-share cores, so the measured time is not the plan's and "
                 "calibrate will not fit it\n", over->c_str());
  int interrupted = 0, killed_by = 0;
  const auto cmd = launch_command(np, f.hosts, worker_args(job));
  if (f.dry_run) return print_dry_run(f, pf, cmd, plan_path, priced ? &*priced : nullptr, hw ? &*hw : nullptr,
                                      predicted_memory ? &*predicted_memory : nullptr, dry_run_warnings);
  // The machine around the run: other work sharing it slows the run by a
  // contention the cost model does not price (said, stored, and kept out of fits).
  const calibration::MachineSample machine_before = calibration::sample_machine();
  const int rc = run_process(cmd, f.json, &interrupted, &killed_by);
  const calibration::RunContention contention =
      calibration::run_contention(machine_before, calibration::sample_machine());
  const bool resumable = f.checkpoint_every > 0 || !f.resume.empty();
  // A run that did not finish is stored too (status and reason, no measured
  // time): history had shown nothing of a job killed at step 51 of 60.
  const std::optional<RunProgress> done = rc != 0 || interrupted != 0 ? read_progress(job.progress) : std::nullopt;
  const std::string after = done ? " after " + progress_summary(*done) : "";
  auto store_unfinished = [&](const std::string& status, const std::string& why) {
    if (f.no_db) return;
    try {
      auto db = ResultsDb::open(f.db.empty() ? default_db_path() : f.db);
      store_unfinished_run(db, pf.cluster, pf.model, pf.plan, status, why, resumable ? checkpoint_dir : "", done);
    } catch (const InputError& e) {
      std::fprintf(stderr, "ztune run: the %s run was not stored: %s\n", status.c_str(), e.what());
    }
  };
  if (interrupted != 0) {
    std::fprintf(stderr, "ztune run: interrupted (%s)%s: the job was stopped and its processes ended%s\n",
                 signal_name(interrupted).c_str(), after.c_str(),
                 resumable ? ("; continue with --resume " + checkpoint_dir).c_str() : "");
    store_unfinished("interrupted", std::string("interrupted by ") + signal_name(interrupted));
    return 128 + interrupted;
  }
  if (rc != 0) {
    std::string why = launch_failure(cmd.front(), rc, killed_by);
    // A rank ended by SIGKILL (mpirun's 137) on a plan near its memory is
    // most often the kernel's out-of-memory killer: say what the model expected.
    if ((rc == 128 + 9 || killed_by == 9) && predicted_memory &&
        predicted_memory->gpu_total_bytes > 0.8 * predicted_memory->gpu_capacity_bytes)
      why += "; a rank or the launcher ended by SIGKILL is most often the kernel's out-of-memory killer: the memory "
             "model put this plan at " + formatted("%.2f", predicted_memory->gpu_total_bytes / kBytesPerGiB) +
             " GiB per rank against " + formatted("%.2f", predicted_memory->gpu_capacity_bytes / kBytesPerGiB) + " GiB";
    std::fprintf(stderr, "ztune run: %s%s%s\n", why.c_str(), done ? ("; it had finished " + progress_summary(*done)).c_str() : "",
                 resumable ? ("; after a fix, continue with --resume " + checkpoint_dir).c_str() : "");
    store_unfinished("failed", why);
    return rc == kExitUsage ? kExitUsage : kExitInfeasible;
  }
  // The worker wrote the record to the fallback when --record failed.
  std::optional<std::string> record_not_written;
  std::string record_read = record_path;
  if (std::error_code ec; !job.record_fallback.empty() && std::filesystem::exists(job.record_fallback, ec)) {
    record_read = job.record_fallback;
    record_not_written = "--record " + f.record + " could not be written (the worker's warning above)";
    tmp.keep();
  }
  const RunRecord record = read_run_record(record_read);
  note_contention(contention);

  // The cost model's prediction for the same plan: the memory above, and the time.
  std::optional<Prediction> prediction;
  std::optional<MemoryPrediction> memory_only;  // the time could not be predicted; the memory can
  if (predicted_memory) {
    const Cluster& c = *priced;
    prediction = Prediction{*predicted_memory, predict_time(*pf.model, pf.plan, c, *hw)};
    // The run happened: a prediction that is not finite is left out (and said),
    // rather than stored as Inf or thrown away with the run.
    if (const std::string bad = non_finite_time(prediction->time); !bad.empty()) {
      if (const std::string why = unpriced_precision(c, pf.plan.precision); !why.empty())
        std::fprintf(stderr, "ztune: note: no time prediction: %s; the memory is compared\n", why.c_str());
      else
        std::fprintf(stderr, "ztune: note: no prediction stored: the predicted time is not finite (%s)\n",
                     bad.c_str());
      memory_only = prediction->memory;
      prediction.reset();
    }
  }
  const std::string profile_name = hw ? hw->name : "";
  nlohmann::json summary{{"losses", record.losses},
                         {"step_time_s", record.step_time_s},
                         {"tokens_per_s", record.tokens_per_s},
                         {"peak_memory_bytes", record.peak_memory_bytes},
                         {"record", nullptr},  // set once the store is known (a failed one keeps it)
                         {"plan", pf.plan.summary()}};
  if (prediction) {
    summary["predicted_iteration_s"] = prediction->time.iteration_s;
    summary["profile"] = profile_name;
    summary["memory_vs_prediction"] = memory_vs_prediction(record, prediction->memory);
  } else if (memory_only) {
    summary["memory_vs_prediction"] = memory_vs_prediction(record, *memory_only);
  }
  // What else ran on the machine meanwhile (null where /proc/stat was not
  // read): a script judging the time (tests/calibration) skips a contended run.
  summary["contention"] =
      contention.valid
          ? nlohmann::json{{"others_cpu_fraction", contention.others_fraction},
                           {"steal_fraction", contention.steal_fraction},
                           {"problem", calibration::contention_problem(contention).value_or("")}}
          : nlohmann::json(nullptr);
  summary["run_id"] = nullptr;
  // A run the database cannot take (locked, read-only, a full disk) keeps its
  // record on disk and fails: the measurement is never thrown away.
  std::optional<std::string> not_stored;
  if (!f.no_db) {
    try {
      auto db = ResultsDb::open(f.db.empty() ? default_db_path() : f.db);
      RunToStore r{pf.cluster, pf.model, pf.plan, prediction, record.document, record.step_time_s, {}, "ok"};
      const auto& peaks = record.peak_memory_bytes;
      for (std::size_t i = 0; i < peaks.size(); ++i)
        r.measurements.push_back({"peak_memory_bytes.rank" + std::to_string(i), peaks[i], "bytes"});
      r.measurements.push_back({"tokens_per_s", record.tokens_per_s, "tokens/s"});
      add_contention(r.measurements, contention);
      summary["run_id"] = db.store_run(r);
    } catch (const InputError& e) {
      not_stored = e.what();
      if (f.record.empty()) tmp.keep();
    }
  }
  const bool record_kept = !f.record.empty() || tmp.kept();
  summary["record"] = record_kept ? nlohmann::json(record_read) : nlohmann::json(nullptr);
  auto finish = [&]() {
    if (record_not_written)
      std::fprintf(stderr, "ztune run: error: %s; the record is kept at %s%s\n", record_not_written->c_str(),
                   record_read.c_str(),
                   summary["run_id"].is_null() ? "" : (", and the run is stored as run " + summary["run_id"].dump()).c_str());
    if (not_stored)
      std::fprintf(stderr,
                   "ztune run: error: the run was not stored in the results database: %s; its record is kept at %s "
                   "(calibrate --records reads it)\n",
                   not_stored->c_str(), record_read.c_str());
    return not_stored || record_not_written ? kExitInfeasible : kExitOk;
  };
  if (f.json) {
    summary["not_stored_why"] = not_stored ? nlohmann::json(*not_stored)
                                : f.no_db  ? nlohmann::json("--no-db")
                                           : nlohmann::json(nullptr);
    summary["record_not_written_why"] = record_not_written ? nlohmann::json(*record_not_written) : nlohmann::json(nullptr);
    std::printf("%s\n", summary.dump(2).c_str());
    return finish();
  }
  std::printf("plan %s on %d ranks: %zu steps, median step %.3f s, %.0f tokens/s\n", pf.plan.summary().c_str(), np,
              record.losses.size(), record.step_time_s, record.tokens_per_s);
  std::printf("losses:");
  for (const double l : record.losses) std::printf(" %.4f", l);
  std::printf("\npeak memory per rank (MiB):");
  for (const double b : record.peak_memory_bytes) std::printf(" %.1f", b / 1048576.0);
  std::printf("\n");
  // The error against the cost model, as `ztune --run` shows it (predicted − measured) / measured.
  // The memory model predicts the most loaded stage's GPU (with uneven
  // stages not necessarily rank 0's): compare with the largest rank's peak.
  const double measured_peak = record.memory.empty() ? 0.0 : record.memory.at(record.peak_rank()).peak_bytes;
  auto err = [](double predicted, double measured) { return measured > 0 ? 100.0 * (predicted - measured) / measured : 0.0; };
  if (prediction) {
    std::printf("predicted (profile %s): iteration %.4f s (%+.1f%% vs measured), peak memory (most loaded rank) %.1f MiB "
                "(%+.1f%%)\n",
                profile_name.c_str(), prediction->time.iteration_s, err(prediction->time.iteration_s, record.step_time_s),
                prediction->memory.gpu_total_bytes / 1048576.0, err(prediction->memory.gpu_total_bytes, measured_peak));
  } else if (memory_only) {
    std::printf("predicted peak memory (most loaded rank): %.1f MiB (%+.1f%%)\n", memory_only->gpu_total_bytes / 1048576.0,
                err(memory_only->gpu_total_bytes, measured_peak));
  }
  // A time far off on a quiet machine is most often a profile measured on
  // another machine (the shipped CPU profile is one VM's): say how to measure
  // this one. A contended run was said above, and is no evidence either way.
  if (prediction && std::fabs(err(prediction->time.iteration_s, record.step_time_s)) > kFarOffPct &&
      !calibration::contention_problem(contention) && pf.cluster)
    std::printf("note: the time is %.0f%% off: the profile %s was measured %s; `ztune calibrate --cluster %s` "
                "measures this machine (and fits the runs stored for it), and --profile %s-calibrated then uses "
                "it\n",
                std::fabs(err(prediction->time.iteration_s, record.step_time_s)), profile_name.c_str(),
                profile_name.ends_with("-calibrated") ? "here before, by runs unlike this one or on a different load"
                                                      : "on another machine (its source says which)",
                pf.cluster->name.c_str(), pf.cluster->name.c_str());
  // Which line a memory error sits on.
  if (prediction) std::fputs(memory_at_peak_table(record, prediction->memory).c_str(), stdout);
  else if (memory_only) std::fputs(memory_at_peak_table(record, *memory_only).c_str(), stdout);
  const std::string stored = summary["run_id"].is_null() ? "" : "stored as run " + summary["run_id"].dump();
  if (record_kept)
    std::printf("run record: %s%s\n", record_read.c_str(), stored.empty() ? "" : (", " + stored).c_str());
  else
    std::printf("run record: %s (not kept on disk: pass --record FILE or --keep)\n",
                stored.empty() ? "not stored" : stored.c_str());
  return finish();
}

}  // namespace

Command add_run(CLI::App& root) {
  auto f = std::make_shared<RunFlags>();
  auto* app = root.add_subcommand("run", "Train a plan with the executor (mpirun, or srun under Slurm)");
  // Named as export's positional is ("plan: expected a path"), not by its variable.
  app->add_option("plan", f->plan_json, "Plan file (ztune.planfile/1); else the cluster, model and plan flags")
      ->check(GivenPath);
  f->input.add_to(*app, false);
  f->plan.add_to(*app);
  app->add_option("--np", f->np, "Ranks (default: the plan's dp×tp×cp×pp)")
      ->check(integer_in(1, 1 << 20, "a rank count"));
  app->add_option("--hosts", f->hosts, "Open MPI host list (host1:slots,host2:slots)")
      ->check(CLI::Validator(
          [](const std::string& v) -> std::string {
            // Open MPI's --host syntax: name[:slots], comma-separated; anything
            // else would reach mpirun and fail there with network noise.
            std::size_t start = 0;
            while (start <= v.size()) {
              const std::size_t end = std::min(v.find(',', start), v.size());
              const std::string entry = v.substr(start, end - start);
              const std::size_t colon = entry.find(':');
              const std::string name = entry.substr(0, colon);
              const bool name_ok = !name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM"
                                                                         "NOPQRSTUVWXYZ0123456789.-_") == std::string::npos;
              const std::string slots = colon == std::string::npos ? "1" : entry.substr(colon + 1);
              if (!name_ok || integer_complaint(slots, 1, 1 << 20, "").size() > 0)
                return "expected host[:slots],... (host names of letters, digits, '.', '-', '_'; slots from 1), got "
                       "\"" + entry + "\" in \"" + v + "\"";
              start = end + 1;
            }
            return "";
          },
          "HOST[:SLOTS],..."));
  app->add_option("--steps", f->steps, "Optimizer steps")
      ->check(integer_in(1, std::numeric_limits<int>::max(), "a step count"))
      ->capture_default_str();
  app->add_option("--seed", f->seed, "Initialisation seed")
      ->check(integer_in(0, std::numeric_limits<long long>::max(), "a seed"));
  app->add_option("--data", f->data, "uint16 token file (e.g. data/corpus/kjv.train.bin) or \"synthetic\"")
      ->check(GivenPath);
  app->add_option("--record", f->record, "Where to keep the run record (default: the temporary directory, removed after the run)")
      ->check(GivenPath);
  app->add_option("--threads", f->threads, "Compute threads per rank")->check(ThreadCount);
  app->add_option("--db", f->db, kDbHelp)->check(DatabasePath);
  app->add_flag("--no-db", f->no_db, "Do not store the run in the results database");
  app->add_option("--nvme-dir", f->nvme_dir,
                  "Directory for the per-rank files of NVMe offload (optimizer states, parameter partitions); "
                  "default: the temporary directory. Use a directory on the NVMe drive")
      ->check(ExistingDirectory);
  app->add_option("--profile", f->profile,
                  "Hardware profile of the prediction shown beside the measurement: a file, or a name in "
                  "~/.local/share/ztune/profiles/ or data/profiles/ (default: data/profiles/<gpu>.json)")
      ->check(GivenPath);
  app->add_option("--checkpoint-every", f->checkpoint_every,
                  "Write a sharded checkpoint every N steps (into --checkpoint-dir, or --resume's directory)")
      ->check(integer_in(1, std::numeric_limits<int>::max(), "a step count"));
  app->add_option("--checkpoint-dir", f->checkpoint_dir,
                  "Directory of the checkpoints (default: the temporary directory, removed after the run)")
      ->check(GivenPath);
  app->add_option("--collective-timeout", f->collective_timeout_s,
                  "Seconds a rank waits in one collective for its peers before it ends the job, naming the "
                  "operation (default 600; 0 waits forever); raise it for steps or checkpoints that take longer")
      ->check(integer_in(0, 7 * 24 * 3600, "seconds"));
  app->add_option("--keep-checkpoints", f->keep_checkpoints,
                  "Keep only the newest N committed checkpoints (default: every one; each holds every rank's "
                  "parameters and optimizer states)")
      ->check(integer_in(1, std::numeric_limits<int>::max(), "a checkpoint count"));
  app->add_option("--resume", f->resume,
                  "Continue from the latest checkpoint in DIR (same plan, ranks and seed; with the same --steps "
                  "bit-identical to an uninterrupted run of them: the learning rate's cosine decay spans --steps, "
                  "so another --steps continues on another schedule), writing further checkpoints there with "
                  "--checkpoint-every N (without it, none: an interrupted run then resumes from DIR's latest again)")
      ->check(GivenPath);
  app->add_flag("--keep", f->keep,
                "Keep the temporary directory ($TMPDIR/ztune-run-*: plan file, record, checkpoints); removed by "
                "default, also when the run fails or is interrupted");
  app->add_flag("--force", f->force,
                "Launch even a plan the memory model puts over this machine's memory (its ranks' total with "
                "offloaded states, against MemTotal or the cgroup's limit); refused by default");
  app->add_flag("--json", f->json, "Print the summary as JSON (losses, step_time_s, peak_memory_bytes, ...)");
  app->add_flag("--dry-run", f->dry_run,
                "Check the plan, the flags and the paths as a run would, then print the launch command, the plan file "
                "(kept) and the cost model's prediction; launch nothing, store nothing");
  return {app, [f] { return run(*f); }};
}

}  // namespace ztune::cli
