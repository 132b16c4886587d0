// ztune export: a plan file as a DeepSpeed ds_config.json plus launch command,
// as Megatron-LM arguments, or as a torchtitan job TOML plus torchrun launch. A plan the engine cannot run is refused (exit 2).
#include <filesystem>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "plan_flags.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/tuner/engine.hpp"
#include "ztune/tuner/export.hpp"

namespace ztune::cli {

namespace {

struct ExportFlags {
  std::string format;
  std::string plan_file;
  std::string out;
};

/// Writes `text` to `path` through DurableFile: a full disk (`--out /dev/full`)
/// or a crash leaves the previous export whole.
void write_file(const std::string& path, const std::string& text) {
  if (auto why = write_file_durably(path, text)) throw InputError("--out " + path + ": cannot write the file: " + *why);
}

/// The launch's placeholders, on `os` ("Before launching, set:" and one line each).
void print_lines(std::ostream& os, const std::vector<std::string>& lines) {
  if (lines.empty()) return;
  os << "Before launching, set:\n";
  for (const auto& l : lines) os << "  " << l << "\n";
}

void print_placeholders(std::ostream& os, const PlanFile& pf, Engine e, const std::string& file) {
  print_lines(os, launch_placeholders(pf, e, file));
}

/// The same launch under Slurm, one line ("Under Slurm: srun …").
void print_srun(std::ostream& os, const PlanFile& pf, const std::string& torchrun_launch, const std::string& file) {
  os << "Under Slurm: " << srun_launch(pf, torchrun_launch, file) << "\n";
}

// Each engine's export format, by name: the fsdp engine exports to
// torchtitan, the others to their own (ztune's executor has none).
std::string format_of_engine(const std::string& engine) { return engine == "fsdp" ? "torchtitan" : engine; }
std::string engine_of_format(const std::string& format) { return format == "torchtitan" ? "fsdp" : format; }

int run_export(const ExportFlags& f) {
  refuse_output_over_input("--out", f.out, {{"the plan", f.plan_file}});
  const PlanFile pf = load_plan_file(f.plan_file);
  // The format: --format, else the one of the engine the plan was searched for.
  const std::string format = !f.format.empty() ? f.format
                             : pf.engine && *pf.engine != "ztune"
                                 ? format_of_engine(*pf.engine)
                                 : throw InputError("--format: required: " + f.plan_file +
                                                    (pf.engine ? " was searched for ztune's own executor"
                                                               : " names no engine it was searched for") +
                                                    "; give deepspeed, megatron or torchtitan");
  if (pf.engine && *pf.engine != "ztune" && format != format_of_engine(*pf.engine))
    std::fprintf(stderr, "ztune: note: %s was searched for the %s engine (its rules and memory); exported to %s\n",
                 f.plan_file.c_str(), pf.engine->c_str(), format.c_str());
  // The engines exported to train on GPUs: a plan for CPU ranks (ztune's own
  // executor) would come out as a GPU job of as many devices.
  if (pf.cluster && pf.cluster->device_kind == DeviceKind::cpu)
    throw InputError(f.plan_file + ": $.cluster: the plan is for " + pf.cluster->name + "'s CPU ranks; " + format +
                     " trains on GPUs (plan for a GPU cluster, or run it with `ztune run " + f.plan_file + "`)");
  // A plan the memory model says does not fit is exported (the model may be
  // pessimistic), with a warning: the engine would run out of memory. Counted
  // as the engine exported to keeps its memory (its profile and its state
  // accounting), not as ztune's executor would.
  if (pf.cluster && pf.model && !check_plan(pf.plan, *pf.model, *pf.cluster)) {
    const std::string engine = engine_of_format(format);
    const HardwareProfile hw = priced_profile(*pf.cluster, "", engine, false);
    MemoryOptions options;
    options.accounting = state_accounting_of(*engine_from_string(engine));
    // torchtitan reduces (and under a pipeline accumulates) its gradients in fp32 whatever the plan says.
    const Plan exported = format == "torchtitan" ? as_torchtitan_runs(pf.plan) : pf.plan;
    const MemoryPrediction mem =
        predict_memory(*pf.model, exported, with_measured_figures(*pf.cluster, hw), hw, options);
    if (!mem.fits_gpu)
      std::cerr << "ztune: warning: " << f.plan_file << ": the memory model puts this plan at "
                << mem.gpu_total_bytes / kBytesPerGiB << " GiB per GPU, more than " << pf.cluster->name << "'s "
                << mem.gpu_capacity_bytes / kBytesPerGiB << " GiB"
                << (format == "torchtitan" && !pf.plan.grad_reduce_dtype
                        ? " (as torchtitan runs it, its gradients reduced in fp32)"
                        : "")
                << ": the engine may run out of memory\n";
  }
  if (format == "deepspeed") {
    const auto config = deepspeed_config(pf, f.plan_file);
    const std::string config_path = f.out.empty() ? "ds_config.json" : f.out;
    const std::string launch = deepspeed_launch(pf, config_path, f.plan_file);
    for (const auto& n : deepspeed_version_notes(pf.plan)) std::cerr << "ztune: note: " << n << "\n";
    // A plan DeepSpeed runs but Megatron-DeepSpeed's launch would not: the
    // config, and instead of the launch why not and what runs it.
    const auto refused = deepspeed_launch_refusal(pf.plan);
    if (f.out.empty()) {
      // The config on stdout (pipe it to a file); the launch command on stderr.
      std::cout << config.dump(2) << "\n";
      if (refused) {
        std::cerr << "ztune: note: no launch command: " << *refused << "\n";
        return kExitOk;
      }
      std::cerr << "launch: " << launch << "\n";
      print_srun(std::cerr, pf, deepspeed_torchrun_launch(pf, config_path, f.plan_file), f.plan_file);
      print_placeholders(std::cerr, pf, Engine::deepspeed, f.plan_file);
    } else {
      write_file(f.out, config.dump(2) + "\n");
      if (refused) {
        std::cout << "Wrote " << f.out << ". No launch command: " << *refused << "\n";
        return kExitOk;
      }
      std::cout << "Wrote " << f.out << ". Launch with:\n" << launch << "\n";
      print_srun(std::cout, pf, deepspeed_torchrun_launch(pf, config_path, f.plan_file), f.plan_file);
      print_placeholders(std::cout, pf, Engine::deepspeed, f.plan_file);
    }
    return kExitOk;
  }
  if (format == "torchtitan") {
    const std::string config = torchtitan_config(pf, f.plan_file);
    const std::string config_path = f.out.empty() ? "job.toml" : f.out;
    const std::string launch = torchtitan_launch(pf, config_path, f.plan_file);
    if (f.out.empty()) {
      std::cout << config;  // the TOML on stdout (pipe it to a file); the launch on stderr
      std::cerr << "launch: " << launch << "\n";
      print_srun(std::cerr, pf, launch, f.plan_file);
      print_lines(std::cerr, torchtitan_placeholders(pf, f.plan_file));
    } else {
      write_file(f.out, config);
      std::cout << "Wrote " << f.out << ". Launch with:\n" << launch << "\n";
      print_srun(std::cout, pf, launch, f.plan_file);
      print_lines(std::cout, torchtitan_placeholders(pf, f.plan_file));
    }
    return kExitOk;
  }
  const std::string launch = megatron_launch(pf, f.plan_file);
  if (f.out.empty()) {
    std::cout << launch << "\n";
    print_srun(std::cerr, pf, launch, f.plan_file);  // stdout stays the command alone
    print_placeholders(std::cerr, pf, Engine::megatron, f.plan_file);
  } else {
    // A script to run: executable, and the flags still to set (tokenizer, data)
    // given on its command line ("$@": `./launch.sh --data-path ...`).
    write_file(f.out, "#!/bin/sh\n# Megatron-LM launch for " + pf.plan.summary() +
                          " (ztune export); the arguments given to this script follow ztune's\n" + launch +
                          " \"$@\"\n");
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_regular_file(f.out, ec)) {
      const auto perms = fs::status(f.out, ec).permissions();
      fs::perms exec = fs::perms::none;
      if ((perms & fs::perms::owner_read) != fs::perms::none) exec |= fs::perms::owner_exec;
      if ((perms & fs::perms::group_read) != fs::perms::none) exec |= fs::perms::group_exec;
      if ((perms & fs::perms::others_read) != fs::perms::none) exec |= fs::perms::others_exec;
      fs::permissions(f.out, exec, fs::perm_options::add, ec);
    }
    std::cout << "Wrote " << f.out << " (run it with the flags left to set, below, as its arguments):\n" << launch
              << "\n";
    print_srun(std::cout, pf, launch, f.plan_file);
    print_placeholders(std::cout, pf, Engine::megatron, f.plan_file);
  }
  return kExitOk;
}

}  // namespace

Command add_export(CLI::App& root) {
  auto* app = root.add_subcommand("export",
                                  "Turn a plan file into a DeepSpeed config, Megatron-LM arguments or a torchtitan config");
  auto f = std::make_shared<ExportFlags>();
  app->add_option("--format", f->format,
                  "deepspeed (ds_config.json + launch command), megatron (arguments) or torchtitan (job TOML + "
                  "torchrun launch; the fsdp engine); default: the engine the plan file was searched for")
      ->check(CLI::IsMember({"deepspeed", "megatron", "torchtitan"}));
  app->add_option("plan", f->plan_file, "Plan file (ztune search --out)")->required()->check(GivenPath);
  app->add_option("--out", f->out,
                  "Write the ds_config.json (deepspeed), a launch script (megatron) or the job TOML (torchtitan) here")
      ->check(WritableFile);
  return {app, [f] { return run_export(*f); }};
}

}  // namespace ztune::cli
