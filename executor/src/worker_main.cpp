// ztune-worker: one rank of a training job.
//   mpirun -np N ztune-worker plan.json [--steps N] [--seed S] [--record FILE]
//          [--resume] [--checkpoint-every N] [--data FILE|synthetic] ...
// The plan file (schema ztune.planfile/1) must embed its model. Rank 0 reports
// every refusal (plan, data, checkpoint) with its reason; all ranks then exit 2.
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "rank_agreement.hpp"
#include "ztune/executor/checkpoint.hpp"
#include "ztune/executor/cpu_backend.hpp"
#include "ztune/executor/mpi_communicator.hpp"
#include "ztune/executor/run_record.hpp"
#include "ztune/executor/trainer.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/executor_support.hpp"
#include "ztune/vocab/flag_values.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/run_progress.hpp"
#ifdef ZTUNE_HAVE_CUDA
#include "ztune/executor/cuda/gpu_rank.hpp"
#endif

namespace ztune::executor {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
// Steps are counted in int (and in a checkpoint's 32-bit header).
constexpr long long kMaxSteps = std::numeric_limits<int>::max();

CLI::Validator integer(long long lo, long long hi, const std::string& what) {
  return CLI::Validator([=](const std::string& v) { return integer_complaint(v, lo, hi, what); },
                        "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator fp32_at_least_zero(const std::string& expect) {
  return CLI::Validator(
      [=](const std::string& v) {
        return finite_number_complaint(v, 0.0, true, std::numeric_limits<float>::max(), expect);
      },
      "NUMBER >= 0");
}

// A file the run writes at its end (--save, --dump-grads, --record): refused
// before training when it cannot be written there, not after the work.
std::optional<std::string> output_file_flag_problem(const char* flag, const std::string& path,
                                                    bool creates_directories) {
  if (path.empty()) return std::nullopt;
  if (auto why = output_file_problem(path, creates_directories)) return std::string(flag) + " " + path + ": " + *why;
  return std::nullopt;
}

// Ranks sharing this rank's node: --ranks-per-node, else as Open MPI reports
// them; without either the job is taken to be on one node.
int ranks_on_this_node(const Communicator& world, int flag) {
  if (flag > 0) return flag;
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int n = local != nullptr ? std::atoi(local) : 0;
  return n > 0 ? n : world.size();
}

// The rank's backend and the communicator its training collectives use: CPU
// ranks with MPI, or one GPU per rank (local rank modulo the node's devices)
// with NCCL, bootstrapped over MPI. MPI stays the control plane (errors).
struct RankRuntime {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Communicator> training_comm;  // null: the MPI world
};

RankRuntime make_runtime(const std::string& backend, const Plan& plan, MpiCommunicator& world, int threads,
                         std::optional<std::string>& error) {
  RankRuntime rt;
  if (backend == "cpu") {
    rt.backend = std::make_unique<CpuBackend>(threads);
    return rt;
  }
#ifdef ZTUNE_HAVE_CUDA
  try {
    cuda::GpuRank gpu = cuda::make_gpu_rank(world, cuda::gemm_precision_for(plan.precision));
    rt.backend = std::move(gpu.backend);
    rt.training_comm = std::move(gpu.comm);
  } catch (const std::runtime_error& e) {
    error = std::string("--backend cuda: ") + e.what();
  }
#else
  (void)plan;
  (void)world;
  error = "--backend cuda: this ztune-worker was built without CUDA (configure where the CUDA toolkit and NCCL are "
          "installed: the GPU backend builds with them)";
#endif
  return rt;
}

// What every rank must have the same of (rank_agreement.hpp): the plan file,
// the token stream and each flag that shapes the training or its collectives.
// --threads, --nvme-dir, --checkpoint-dir and the paths may differ by host.
std::vector<LaunchField> launch_fields(const std::string& plan_path, const nlohmann::json& plan_json,
                                       const TrainOptions& opt, const TokenSource& data, const std::string& backend) {
  const std::string digest = json_fnv1a_hex(plan_json);
  auto number = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.9g", v);
    return std::string(b);
  };
  auto given = [](const std::string& path) { return path.empty() ? std::string("not given") : path; };
  auto presence = [](const std::string& path) { return std::string(path.empty() ? "no" : "yes"); };
  return {{"the plan file", digest, plan_path + " (digest " + digest + ")"},
          {"--data", data.identity(), data.describe()},
          {"--steps", std::to_string(opt.steps)},
          {"--seed", std::to_string(opt.seed)},
          {"--lr", number(opt.lr)},
          {"--warmup-steps", std::to_string(opt.warmup_steps)},
          {"--weight-decay", number(opt.weight_decay)},
          {"--grad-clip", number(opt.grad_clip)},
          {"--checkpoint-every", std::to_string(opt.checkpoint_every)},
          {"--resume", opt.resume ? "yes" : "no", opt.resume ? "given" : "not given"},
          {"--kill-after-step", std::to_string(opt.kill_after_step)},
          {"--init-from", presence(opt.init_from), given(opt.init_from)},
          {"--save", presence(opt.save), given(opt.save)},
          {"--dump-grads", presence(opt.dump_grads), given(opt.dump_grads)},
          {"--backend", backend},
          {"--ranks-per-node", std::to_string(opt.ranks_per_node)}};
}

// This rank's shard of `steps` into the trainer; the error names the shard.
std::optional<std::string> resume_from(const std::string& dir, int steps, const CheckpointId& id, Trainer& trainer) {
  CheckpointPayload payload;
  auto error = read_checkpoint_shard(
      dir, steps, id, [&](std::uint32_t version) { return trainer.checkpoint_state_bytes(version); }, payload);
  if (error) return error;
  if (auto why = trainer.restore_checkpoint_state(payload.bytes, payload.version))
    return checkpoint_step_dir(dir, steps) + ": " + *why;
  return std::nullopt;
}

int run(int argc, char** argv) {
  auto world = MpiCommunicator::world();
  TrainOptions opt;
  std::string plan_path;
  std::string backend_name = "cpu";
  CLI::App app{"ztune-worker: one rank of a ztune training job (launch with mpirun or ztune run)"};
  app.add_option("plan", plan_path, "Plan file (schema ztune.planfile/1, with its model)")->required();
  app.add_option("--steps", opt.steps, "Optimizer steps")->check(integer(1, kMaxSteps, "a step count"));
  app.add_option("--seed", opt.seed, "Initialisation seed")
      ->check(integer(0, std::numeric_limits<long long>::max(), "a seed"));
  app.add_option("--record", opt.record, "Run record JSON written by rank 0");
  app.add_option("--progress", opt.progress,
                 "Rank 0 appends each finished step here as a JSON line (step, loss, time_s), flushed as it goes: "
                 "what a run stopped part-way had done (ztune run stores it with the unfinished run)");
  app.add_option("--record-fallback", opt.record_fallback,
                 "Where rank 0 writes the run record when --record cannot be written (ztune run passes its "
                 "temporary directory): the measurements are kept, the error said");
  app.add_flag("--resume", opt.resume, "Continue from the latest committed checkpoint");
  app.add_option("--checkpoint-every", opt.checkpoint_every, "Write a sharded checkpoint every N steps")
      ->check(integer(0, kMaxSteps, "a step count"));
  app.add_option("--checkpoint-dir", opt.checkpoint_dir, "Checkpoint directory");
  app.add_option("--keep-checkpoints", opt.keep_checkpoints,
                 "Keep only the newest N committed checkpoints, removing older steps after each commit (default: "
                 "keep every one)")
      ->check(integer(1, kMaxSteps, "a checkpoint count"));
  app.add_option("--data", opt.data, "uint16 token file, or \"synthetic\"");
  app.add_option("--init-from", opt.init_from, "Initial weights (safetensors in F32, BF16, F16 or F64; Hugging Face GPT-2 names and layout for every model shape; docs/formats.md)");
  app.add_option("--save", opt.save, "Write the trained weights (safetensors) at the end");
  app.add_option("--dump-grads", opt.dump_grads, "Write step 1's gradients (safetensors; ZeRO stage < 2)");
  // The optimizer's numbers are fp32 in the kernels: finite, non-negative and
  // within fp32's range, else the first step is NaN.
  app.add_option("--lr", opt.lr, "Peak learning rate")->check(fp32_at_least_zero("a learning rate >= 0 in fp32's range"));
  app.add_option("--warmup-steps", opt.warmup_steps, "Linear warm-up steps")
      ->check(integer(0, kMaxSteps, "a step count"));
  app.add_option("--weight-decay", opt.weight_decay, "AdamW decoupled weight decay")
      ->check(fp32_at_least_zero("a weight decay >= 0 in fp32's range"));
  app.add_option("--grad-clip", opt.grad_clip, "Clip the global gradient norm (0: off)")
      ->check(fp32_at_least_zero("a gradient norm >= 0 in fp32's range (0: off)"));
  app.add_option("--threads", opt.threads, "Compute threads per rank")
      ->check(integer(1, kMaxThreads, "a thread count"));
  app.add_option("--nvme-dir", opt.nvme_dir,
                 "Directory of the optimizer-state and parameter files of plans offloading to NVMe (default: the "
                 "temporary directory; use a directory on the NVMe drive)");
  app.add_option("--backend", backend_name, "cpu (MPI ranks), or cuda (one GPU per rank, NCCL collectives)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--kill-after-step", opt.kill_after_step, "Test hook: SIGKILL after committing that checkpoint");
  int collective_timeout_s = kDefaultCollectiveTimeoutS;
  app.add_option("--collective-timeout", collective_timeout_s,
                 "Seconds a rank waits in one collective or message for its peers before it ends the job with exit "
                 "3, naming the operation and group (a rank stopped, hung or died; the CPU ranks' counterpart of "
                 "the NCCL watchdog); 0 waits forever")
      ->check(integer(0, 7 * 24 * 3600, "seconds"))
      ->capture_default_str();
  app.add_option("--ranks-per-node", opt.ranks_per_node,
                 "Consecutive ranks per node (default: Open MPI's local size); a smaller value makes one machine "
                 "act as several nodes")
      ->check(integer(1, std::numeric_limits<int>::max(), "a rank count"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help on every rank; a flag refused on some ranks only (ranks started
    // with different flags) must not leave the others waiting in a collective.
    if (e.get_exit_code() == 0) {
      if (world->rank() == 0) app.exit(e);
      return 0;
    }
    if (any_error(*world, std::string(e.what()))) return kExitUsage;
  }
  if (any_error(*world, std::nullopt)) return kExitUsage;
  set_collective_timeout(std::chrono::seconds(collective_timeout_s));
  if (opt.warmup_steps == 0) opt.warmup_steps = 1;

  const int per_node = ranks_on_this_node(*world, opt.ranks_per_node);
  // Validation: every rank reads the same file and reaches the same verdict; rank 0 says it.
  PlanFile pf;
  std::optional<std::string> error;
  try {
    pf = load_plan_file(plan_path);
    if (!pf.model) error = plan_path + ": $.model: the plan file must embed its model for ztune-worker";
    // The plan's own rules first (as `ztune run` and the search apply them),
    // then what this executor implements.
    if (!error)
      if (auto why = pf.cluster ? check_plan(pf.plan, *pf.model, *pf.cluster) : check_plan_shape(pf.plan, *pf.model))
        error = plan_path + ": " + in_plan_file(*why);
    if (!error)
      if (auto why = unsupported_reason(pf.plan, *pf.model, world->size(),
                                        backend_name == "cuda" ? ExecBackend::cuda : ExecBackend::cpu,
                                        per_node))
        error = plan_path + ": " + *why;
  } catch (const InputError& e) {
    error = e.what();
  }
  if (!error && !opt.dump_grads.empty() && pf.plan.zero_stage >= 2)
    error = "--dump-grads: needs ZeRO stage 0 or 1 (stages 2 and 3 keep only gradient shards)";
  // write_safetensors creates its directory; the record's plain stream does not.
  if (!error) error = output_file_flag_problem("--save", opt.save, true);
  if (!error) error = output_file_flag_problem("--dump-grads", opt.dump_grads, true);
  if (!error) error = output_file_flag_problem("--record", opt.record, false);
  if (!error) error = output_file_flag_problem("--record-fallback", opt.record_fallback, false);
  if (!error) error = output_file_flag_problem("--progress", opt.progress, false);
  if (!error && opt.keep_checkpoints > 0 && opt.checkpoint_every == 0)
    error = "--keep-checkpoints: no checkpoints are written without --checkpoint-every N";
  // One run at a time in a checkpoint directory (rank 0 holds it until it exits).
  CheckpointDirLock checkpoint_lock;
  if (!error && world->rank() == 0 && (opt.checkpoint_every > 0 || opt.resume))
    error = checkpoint_lock.take(opt.checkpoint_dir);
  // A fresh run writing checkpoints where another run's are committed would
  // mix two runs' steps in one directory (and end the other's resume).
  if (!error && opt.checkpoint_every > 0 && !opt.resume && std::filesystem::exists(checkpoint_latest_path(opt.checkpoint_dir)))
    error = "--checkpoint-dir " + opt.checkpoint_dir + ": already holds a run's committed checkpoints; continue it "
            "with --resume, or choose another directory";
  if (!error && !opt.nvme_dir.empty() && !std::filesystem::is_directory(opt.nvme_dir))
    error = "--nvme-dir " + opt.nvme_dir + ": not a directory (the per-rank offload files are created in it)";
  if (any_error(*world, error)) return kExitUsage;
  // Node boundaries matter to ZeRO++'s two-level gradient reduction only.
  opt.ranks_per_node = pf.plan.zeropp && per_node < world->size() ? per_node : 0;
  const Plan& plan = pf.plan;
  const Transformer& model = *pf.model;

  std::unique_ptr<TokenSource> data;
  try {
    data = opt.data == "synthetic" ? synthetic_tokens(opt.seed, model.vocab)
                                   : open_token_file(opt.data, model.vocab, model.seq_len);
  } catch (const InputError& e) {
    error = std::string("--data: ") + e.what();
  }
  if (any_error(*world, error)) return kExitUsage;
  // The plan as the checkpoints, the record and the rank check digest it.
  const nlohmann::json plan_json = plan_file_to_json(pf);
  error = launch_mismatch(*world, launch_fields(plan_path, plan_json, opt, *data, backend_name));
  if (any_error(*world, error)) return kExitUsage;

  RankRuntime rt = make_runtime(backend_name, plan, *world, opt.threads, error);
  if (any_error(*world, error)) return kExitUsage;
  Backend& backend = *rt.backend;
  Trainer trainer(model, plan, opt, rt.training_comm ? *rt.training_comm : *world, backend, *data);
  try {
    trainer.initialise();
  } catch (const InputError& e) {
    error = std::string("--init-from: ") + e.what();
  }
  if (any_error(*world, error)) return kExitUsage;
  // NVMe offload on a file system that refuses O_DIRECT runs through the page
  // cache: the run works, but its offload times are not the drive's. Say so.
  std::optional<bool> nvme_direct = trainer.store().nvme_direct_io();
  if (nvme_direct) {
    double buffered = *nvme_direct ? 0.0 : 1.0;
    world->all_reduce_doubles(&buffered, 1, ReduceOp::sum);
    nvme_direct = buffered == 0.0;
    if (buffered > 0 && world->rank() == 0)
      std::fprintf(stderr,
                   "ztune-worker: warning: --nvme-dir %s: the file system refuses direct I/O (O_DIRECT) on %.0f "
                   "rank(s); NVMe offload goes through the page cache, so its measured times are not the drive's\n",
                   (opt.nvme_dir.empty() ? std::filesystem::temp_directory_path().string() : opt.nvme_dir).c_str(),
                   buffered);
  }

  CheckpointId ckpt{json_fnv1a(plan_json), world->size(), world->rank()};
  int first_step = 0;
  if (opt.resume) {
    std::string why;
    auto steps = latest_checkpoint(opt.checkpoint_dir, why);
    if (!steps) {
      error = why;
    } else {
      first_step = *steps;
      if (auto other = check_data_identity(opt.checkpoint_dir, data->identity()))
        error = *other;
      else if (first_step >= opt.steps)
        error = "--steps " + std::to_string(opt.steps) + ": the checkpoint in " + opt.checkpoint_dir +
                " is after step " + std::to_string(first_step) + " already; ask for more steps to continue it";
      else if ((error = resume_from(opt.checkpoint_dir, first_step, ckpt, trainer))) {
        // A damaged latest checkpoint: the step directories kept before it are
        // what the run can go back to (their shards are checked when resumed).
        std::string earlier;
        for (int n : checkpoint_steps_present(opt.checkpoint_dir))
          if (n < first_step) earlier += (earlier.empty() ? "" : ", ") + std::to_string(n);
        if (!earlier.empty()) {
          const bool one = earlier.find(',') == std::string::npos;
          *error += "; " + opt.checkpoint_dir + " also keeps " +
                    (one ? "the checkpoint after step " + earlier + ": to go back to it"
                         : "the checkpoints after steps " + earlier + ": to go back to one") +
                    ", write its step count into " + checkpoint_latest_path(opt.checkpoint_dir) + " and resume";
        }
      }
    }
    if (any_error(*world, error)) return kExitUsage;
    if (world->rank() == 0) std::fprintf(stderr, "ztune-worker: resumed after step %d\n", first_step);
    // Every rank has read its shard. A run that stopped on a full disk is
    // resumed to free space before its next checkpoint, not after it: the
    // superseded ones beyond --keep-checkpoints and the failed partial write.
    if (world->rank() == 0 && opt.checkpoint_every > 0) {
      remove_uncommitted_steps(opt.checkpoint_dir, first_step, world->size());
      if (opt.keep_checkpoints > 0) prune_checkpoints(opt.checkpoint_dir, first_step, opt.keep_checkpoints);
    }
  }

  // The steps as they finish, for a caller whose run is stopped part-way
  // (the record is written only at the end). Best effort: a line that cannot
  // be written costs the caller that summary, not the run.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> progress(nullptr, &std::fclose);
  if (world->rank() == 0 && !opt.progress.empty()) progress.reset(std::fopen(opt.progress.c_str(), "we"));
  std::vector<StepRecord> records;
  for (int s = first_step; s < opt.steps; ++s) {
    StepResult r;
    try {
      r = trainer.step(s);
    } catch (const LossScaleAtMinimum& e) {
      // Every rank sees the same all-reduced overflow, so all stop here.
      if (world->rank() == 0) std::fprintf(stderr, "ztune-worker: error: step %d: %s\n", s + 1, e.what());
      return kExitFailed;
    } catch (const std::runtime_error& e) {
      // One rank's own failure mid-step (its token file changed under it):
      // the others wait in a collective, so the job ends here, said by this rank.
      std::fprintf(stderr, "ztune-worker: error: rank %d: step %d: %s\n", world->rank(), s + 1, e.what());
      std::fflush(stderr);
      abort_job(kExitFailed);
    }
    // A loss that is not finite (and not an fp16 overflow the scaler skips)
    // means the run diverged: every later step is NaN too, so stop and say so
    // rather than record a run of NaNs. The loss is all-reduced: every rank
    // stops here.
    if (!std::isfinite(r.loss) && !r.skipped) {
      if (world->rank() == 0)
        std::fprintf(stderr,
                     "ztune-worker: error: step %d: the loss is %s: training diverged (learning rate %g; lower "
                     "--lr, or check the --init-from weights)\n",
                     s + 1, std::isnan(r.loss) ? "NaN" : "infinite", r.lr);
      return kExitFailed;
    }
    records.push_back({s + 1, r});
    // Before the step's line: a caller that reads both never finds fewer steps here.
    if (progress) {
      std::fputs(progress_line(s + 1, r.loss, r.seconds).c_str(), progress.get());
      std::fflush(progress.get());
    }
    if (world->rank() == 0) {
      std::printf("step %d loss %.6f grad_norm %.4f lr %.3e time %.3fs", s + 1, r.loss, r.grad_norm, r.lr, r.seconds);
      if (plan.precision == Precision::fp16)
        std::printf(" loss_scale %g%s", r.loss_scale, r.skipped ? " skipped (gradient overflow)" : "");
      std::printf("\n");
    }
    std::fflush(stdout);
    if (opt.checkpoint_every > 0 && (s + 1) % opt.checkpoint_every == 0) {
      error = write_checkpoint_shard(opt.checkpoint_dir, s + 1, ckpt, trainer.checkpoint_state());
      if (any_error(*world, error)) return kExitFailed;
      // A commit that fails (a full disk) stops the run: latest still names the step before.
      if (world->rank() == 0) {
        error = write_data_identity(opt.checkpoint_dir, data->identity());
        if (!error) error = keep_plan(opt.checkpoint_dir, plan_json.dump(2));
        if (!error) error = commit_checkpoint(opt.checkpoint_dir, s + 1);
        if (!error && opt.keep_checkpoints > 0) prune_checkpoints(opt.checkpoint_dir, s + 1, opt.keep_checkpoints);
      }
      if (any_error(*world, error)) return kExitFailed;
      if (opt.kill_after_step == s + 1) std::raise(SIGKILL);
    }
  }

  if (!opt.save.empty()) {
    auto tensors = trainer.collect_full(false);
    if (world->rank() == 0) {
      try {
        write_safetensors(opt.save, tensors, {{"format", "pt"}});
      } catch (const std::exception& e) {  // checked up front; the disk may still fill
        std::fprintf(stderr, "ztune-worker: error: --save: %s\n", e.what());
        return kExitFailed;
      }
    }
  }
  // Peak memory of every rank, by category, to rank 0: each category's own
  // peak, the device and host totals' peaks, and what each category held at
  // the device peak.
  const std::size_t cats = static_cast<std::size_t>(MemCategory::count);
  const std::size_t row = 2 * cats + 2;
  const auto n = static_cast<std::size_t>(world->size());
  std::vector<double> mem(n * row, 0.0);
  const auto me = static_cast<std::size_t>(world->rank());
  for (std::size_t k = 0; k < cats; ++k) {
    mem[me * row + k] = static_cast<double>(backend.memory().peak(static_cast<MemCategory>(k)));
    mem[me * row + cats + 2 + k] = static_cast<double>(backend.memory().at_device_peak(static_cast<MemCategory>(k)));
  }
  mem[me * row + cats] = static_cast<double>(backend.memory().peak_device_total());
  mem[me * row + cats + 1] = static_cast<double>(backend.memory().peak_host_total());
  world->all_reduce_doubles(mem.data(), mem.size(), ReduceOp::sum);
  if (world->rank() == 0 && !opt.record.empty()) {
    RunRecordInput in;
    in.plan_file = plan_json;
    in.steps = records;
    in.tokens_per_step = static_cast<int>(plan.global_batch * model.seq_len);
    in.backend = &backend;
    auto& g = trainer.groups();
    // Every group's traffic (vocab/run_record.hpp kRunRecordGroups): the
    // sequence slot's ring exchanges or all-to-alls and the replicas'
    // all-reduce were missing from the record.
    in.comms = {g.world,          g.dp.get(),       g.tp.get(), g.pp.get(),     g.embed.get(),
                g.dp_intra.get(), g.dp_inter.get(), g.cp.get(), g.replica.get()};
    for (std::size_t r = 0; r < n; ++r) {
      const auto at = mem.begin() + static_cast<long>(r * row);
      in.memory.emplace_back(at, at + static_cast<long>(cats));
      in.peak_total.push_back(mem[r * row + cats]);
      in.peak_host_total.push_back(mem[r * row + cats + 1]);
      in.at_peak.emplace_back(at + static_cast<long>(cats + 2), at + static_cast<long>(row));
    }
    in.threads = opt.threads;
    in.data = data->describe();
    in.nvme_direct_io = nvme_direct;
    // Every step ran: a record that cannot be written where asked (a full
    // disk) goes to the fallback, and the run's caller says so, rather than
    // the measurements being thrown away.
    const FallbackWrite w = write_file_or_fallback(opt.record, opt.record_fallback, make_run_record(in).dump(2) + "\n");
    if (!w.written()) {
      std::fprintf(stderr, "ztune-worker: error: %s: cannot write the run record: %s%s\n", opt.record.c_str(),
                   w.error->c_str(),
                   opt.record_fallback.empty() ? "" : ("; nor " + opt.record_fallback + ": " + *w.fallback_error).c_str());
      return kExitFailed;
    }
    if (w.error)
      std::fprintf(stderr, "ztune-worker: warning: %s: cannot write the run record: %s; written to %s instead\n",
                   opt.record.c_str(), w.error->c_str(), opt.record_fallback.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace ztune::executor

int main(int argc, char** argv) {
  ztune::report_file_size_limit_as_error();
  ztune::executor::MpiSession mpi(&argc, &argv);
  try {
    return ztune::executor::run(argc, argv);
  } catch (const std::bad_alloc&) {
    // A plan larger than this machine's memory (ztune run warns before the
    // launch when the memory model says so): said, not an abort's backtrace.
    std::fprintf(stderr,
                 "ztune-worker: error: out of memory: an allocation failed on this rank; the plan needs more memory "
                 "than the machine has (ztune predict shows what it needs per rank)\n");
    return 1;
  }
}
