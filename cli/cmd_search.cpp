// ztune search (the default command): search the plan space of a model on a
// cluster, rank it, print the best plans, store the search in the results
// database, and write the best plan with --out.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "autorun.hpp"
#include "command.hpp"
#include "plan_flags.hpp"
#include "search_output.hpp"
#include "search_progress.hpp"
#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/executor_support.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/tuner/pinned_degrees.hpp"
#include "ztune/tuner/planning.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/tuner/engine.hpp"
#include "ztune/tuner/export.hpp"
#include "ztune/tuner/explain.hpp"
#include "ztune/tuner/objective.hpp"
#include "ztune/tuner/result_json.hpp"
#include "ztune/tuner/results_db.hpp"
#include "ztune/tuner/search.hpp"
#include "ztune/tuner/search_space.hpp"
#include "ztune/tuner/stored_search_options.hpp"

namespace ztune::cli {

namespace {

// Plans the simulate pass finished before it stopped (0 when it did not run).
std::int64_t sim_done(const SearchResult& r) {
  const PassStats* sim = r.pass("simulate");
  return sim != nullptr && sim->enabled ? sim->out : 0;
}

struct SearchFlags {
  InputFlags input;
  int gpus = 0, min_gpus = 0, max_gpus = 0;
  bool allow_tp_across_nodes = false;
  std::string engine = "ztune";
  bool compile = false;  // the engine runs under a graph compiler (torch.compile, XLA)
  long long global_batch = 0;
  std::string precision;
  std::string grad_reduce_dtype;  // empty: the engine's
  std::string master_dtype = "fp32", moments_dtype = "fp32";
  bool param_remainders = false;
  std::string fp8 = "none";
  bool fp8_param_gather = false;
  int max_micro_batch = 0;
  int tp = 0, pp = 0, zero = -1;  // pins; 0 (tp, pp) or -1 (zero): not pinned
  int cp = 0, max_cp = 0;          // context parallelism: pin (0: not pinned) and bound (0: the default)
  int ulysses = 0, max_ulysses = 0;  // DeepSpeed-Ulysses: likewise
  int dp_shard = 0;                // hybrid sharding pin (0: not pinned)
  std::string recompute = "any";   // recomputation pin ("any": every mode)
  bool no_sequence_parallel = false, no_tp_comm_overlap = false;
  bool onebit_adam = false, zeropp = false;
  int freeze_step = -1;  // -1: kOnebitWarmupFraction of the run
  std::string sparse_attention = "none";
  int sparse_block = 64;
  std::string attention = "any";
  std::string objective = "throughput";
  double tokens = 0, gpu_hour_price = 0;
  int top = 10, simulate_top = kSimulateTopDefault, threads = 0;
  long long max_plans = kDefaultMaxPlans;
  double memory_headroom_pct = 0;  // % of each GPU's memory kept free
  std::string accounting = "engine";  // how fits count model states (plan_flags.hpp add_accounting)
  bool no_prune = false, no_rank = false, no_simulate = false;
  bool json = false, explain = false, no_db = false;
  std::string out, profile, db;
  bool run = false;  // --run (cli/autorun.cpp)
  AutorunOptions autorun;
};

SearchRequest request_of(const SearchFlags& f) {
  return {"ztune search", f.input.cluster, f.input.model, f.input.nodes, f.input.seq, f.compile, f.profile};
}

SearchOptions to_options(const SearchFlags& f) {
  SearchOptions o;
  o.space.gpus = f.gpus;
  o.space.min_gpus = f.min_gpus;
  o.space.max_gpus = f.max_gpus;
  o.space.allow_tp_across_nodes = f.allow_tp_across_nodes;
  o.space.engine = *engine_from_string(f.engine);
  o.memory.accounting = accounting_named(f.accounting, o.space.engine);  // fit as the engine keeps its states
  o.accounting_stated = f.accounting != "engine";
  o.space.global_batch = f.global_batch;
  if (!f.precision.empty()) o.space.precision = precision_of(f.precision);  // CLI11 checked the name
  if (!f.grad_reduce_dtype.empty()) o.space.grad_reduce_dtype = precision_of(f.grad_reduce_dtype);  // likewise
  o.space.master_dtype = *precision_of(f.master_dtype);  // likewise
  o.space.moments_dtype = *precision_of(f.moments_dtype);
  o.space.param_remainders = f.param_remainders;
  o.space.fp8 = *fp8_recipe_of(f.fp8);  // likewise
  o.space.fp8_param_gather = f.fp8_param_gather;
  o.space.max_micro_batch = f.max_micro_batch;
  if (f.tp > 0) o.space.tp = f.tp;
  if (f.pp > 0) o.space.pp = f.pp;
  if (f.cp > 0) o.space.cp = f.cp;
  o.space.max_cp = f.max_cp;
  if (f.ulysses > 0) o.space.ulysses = f.ulysses;
  o.space.max_ulysses = f.max_ulysses;
  if (f.dp_shard > 0) o.space.dp_shard = f.dp_shard;
  if (f.zero >= 0) o.space.zero_stage = f.zero;
  if (f.recompute != "any") o.space.recompute = recompute_of(f.recompute);  // CLI::IsMember admitted only its names
  o.space.sequence_parallel = !f.no_sequence_parallel;
  o.space.tp_comm_overlap = !f.no_tp_comm_overlap;
  o.space.max_plans = f.max_plans;
  o.space.include_onebit_adam = f.onebit_adam;
  o.space.include_zeropp = f.zeropp;
  o.space.onebit_freeze_step = f.freeze_step;
  o.space.sparse_attention = *sparse_layout_of(f.sparse_attention);  // CLI::IsMember admitted only its names
  o.space.sparse_block = f.sparse_block;
  if (f.attention != "any")
    o.space.attention = *attention_kernel_of(f.attention);  // CLI::IsMember admitted only its names
  o.objective = *objective_from_string(f.objective);
  o.tokens = f.tokens;
  o.gpu_hour_price = f.gpu_hour_price;
  o.top = f.top;
  o.simulate_top = f.simulate_top;
  o.threads = f.threads;
  o.prune_enabled = !f.no_prune;
  o.rank_enabled = !f.no_rank;
  o.simulate_enabled = !f.no_simulate;
  o.memory.gpu_headroom = f.memory_headroom_pct / 100.0;
  return o;
}

void write_plan_file(const std::string& path, const Candidate& best, const Transformer& m, const Cluster& c,
                     const std::string& engine, bool compile) {
  // The engine and its compiler: predict --plan prices it as that engine runs it
  // (without "compile" it had read 12 % slower than the search's table).
  PlanFile pf{best.plan, m, c, engine, compile};
  if (auto why = write_file_durably(path, plan_file_to_json(pf).dump(2) + "\n"))
    throw InputError("--out " + path + ": cannot write the file: " + *why);
}

// A database file this process cannot write (chmod 444, or a read-only
// directory, which its -wal and -shm files need): no reason to lose the search.
bool read_only_database(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return false;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  return ::access(path.c_str(), W_OK) != 0 || ::access(dir.c_str(), W_OK) != 0;
}

int run_search_command(const SearchFlags& f) {
  auto inputs = f.input.files();
  inputs.emplace_back("--profile", f.profile);
  for (auto& d : database_files(f.db, f.no_db)) inputs.push_back(std::move(d));
  refuse_output_over_input("--out", f.out, inputs);
  const Cluster catalog_cluster = f.input.load_cluster_or_throw();
  const Transformer model = f.input.load_model_or_throw();
  if (auto why = pinned_degree_refusal(to_options(f).space, model)) throw InputError(*why);
  // The loop closes (issue 21): `--run` without --profile predicts with the
  // profile earlier runs and calibrations refined for this cluster, where one
  // is in the user's directory, and says so.
  std::string profile_file = f.profile;
  if (f.run && profile_file.empty()) {
    try {
      const auto mine = std::filesystem::path(user_data_dir()) / "profiles" / (catalog_cluster.name + "-calibrated.json");
      std::error_code ec;
      if (std::filesystem::is_regular_file(mine, ec)) {
        profile_file = mine.string();
        std::cerr << "ztune: --run: predicting with the calibrated profile " << profile_file
                  << " (what earlier runs and calibrations of " << catalog_cluster.name
                  << " refined; --profile chooses another)\n";
      }
    } catch (const InputError&) {
      // No user directory (neither XDG_DATA_HOME nor HOME): the catalog's profile.
    }
  }
  const HardwareProfile hw = priced_profile(catalog_cluster, profile_file, f.engine, f.compile);
  const Cluster cluster = with_measured_figures(catalog_cluster, hw);  // a calibrated profile's figures
  if (const std::string note = measured_elsewhere_note(cluster, hw); !note.empty())
    std::cerr << "ztune: note: " << note << "\n";
  if (f.objective == "cost" && f.gpu_hour_price <= 0)
    std::cerr << "ztune: note: no --gpu-hour-price; cost is ranked and shown in GPU-hours\n";
  if (f.objective != "cost" && f.gpu_hour_price > 0)
    std::cerr << "ztune: note: --gpu-hour-price prices the cost objective only; the plans rank by " << f.objective
              << " (--objective cost ranks and shows them by cost)\n";
  // Open the database first: a broken file is reported before any work is done.
  // One this process may not write is said after the result is out (below).
  std::optional<ResultsDb> db;
  std::string store_error;
  if (!f.no_db) {
    const std::string path = f.db.empty() ? default_db_path() : f.db;
    try {
      db = ResultsDb::open(path);
    } catch (const InputError& e) {
      if (!read_only_database(path)) throw;
      store_error = e.what();
    }
  }

  SearchOptions o = to_options(f);
  if (auto why = engine_model_violation(model, o.space.engine))
    throw InputError(f.input.model + ": --engine " + f.engine + " cannot train this model: " + *why);
  InterruptGuard interrupt;
  o.stop = interrupt.flag();
  SearchResult r;
  {
    ProgressBar bar;
    r = run_search(model, cluster, hw, o, [&bar](const SearchProgress& p) { bar.update(p); });
  }
  std::optional<std::int64_t> search_id;

  const bool nothing = r.plans.empty() || (o.prune_enabled && r.feasible == 0);
  std::vector<FitHint> hints;
  if (nothing && !r.interrupted) hints = explain_infeasible(model, cluster, hw, o, r);
  // A best plan at the edge of its GPUs' memory: what a margin would cost (a
  // second search, memory prune and analytical rank only).
  std::optional<HeadroomAlternative> tight;
  if (!nothing && !r.interrupted) {
    ProgressBar bar;
    tight = tight_memory_alternative(model, cluster, hw, o, r.plans.front(), 5.0,
                                     [&bar](const SearchProgress& p) { bar.update(p); });
  }
  // A Ctrl-C after the search itself, while it is explained (what would make
  // a plan fit, the memory margin's second search): the search stands as
  // finished and is stored so, what was being worked out is not shown, and the
  // command stops as interrupted (exit 130, no --run). It had exited 0 with the
  // margin's note silently missing.
  const bool stopped_after = !r.interrupted && o.stop->load();
  if (stopped_after) {
    hints.clear();
    tight.reset();
    std::cerr << "ztune: interrupted (Ctrl-C) after the search, while " << after_search_work(nothing) << ": that is not shown; the search itself is complete; exit " << kExitInterrupted << "\n";
  }

  if (const std::int64_t simulated = sim_done(r); r.interrupted)
    std::cerr << "ztune: search interrupted (Ctrl-C) after " << std::fixed << std::setprecision(1) << r.elapsed_s
              << std::defaultfloat << " s: "
              << (r.evaluated == 0 ? "stopped while enumerating the space, before any plan was ranked"
                                   : "the best of the " + grouped(static_cast<double>(r.evaluated)) +
                                         " plans evaluated so far (of " + grouped(static_cast<double>(r.space)) +
                                         ") is shown, " +
                                         (simulated > 0 ? "the first " + grouped(static_cast<double>(simulated)) +
                                                              " simulated before the interrupt"
                                                        : std::string("not simulated")))
              << "; exit " << kExitInterrupted << "\n";
  // --json: issue 5's shape (search_result_to_json, as stored) and what the
  // text says beside the table: what was searched, on what, how far to trust
  // the best plan's figures, and, when nothing fits, the closest plans and the
  // changes that would make one fit. Printed once the search is stored, so
  // that it carries its id.
  // What the fits counted (states_counted_as): the executor's own layout and
  // fp32 plans take no accounting.
  const Precision searched = searched_precisions(o.space, cluster).front();  // the default, or the pinned one
  const std::string counted = states_counted_as(o.memory.accounting, searched, cluster, hw);
  // How far to trust the best plan's figures (ztune validate's runs, ~0.1 s):
  // computed once for the text, --json and the stored search.
  std::optional<Accuracy> best_accuracy;
  auto best_accuracy_of = [&]() -> const Accuracy& {
    if (!best_accuracy) best_accuracy = accuracy_for(cluster, f.engine);
    return *best_accuracy;
  };
  // The best plan's accuracy as --json carries it, with its extrapolation.
  auto best_accuracy_json = [&]() {
    const auto& best = r.plans.front().time();
    const Accuracy& a0 = best_accuracy_of();
    nlohmann::json a =
        accuracy_json(a0, best.iteration_s, best.tokens_per_s, band_widening(a0, model, r.plans.front().plan));
    if (!a0.envelope.empty() || !a0.cv.empty()) a["extrapolation"] = extrapolation_json(a0, model, r.plans.front().plan);
    a["your_runs"] = runs_fit_json(hw);
    return a;
  };
  auto json_result = [&]() {
    nlohmann::json j = search_result_to_json(r);
    j["cluster"] = {{"name", cluster.name},    {"gpu", cluster.node.gpu.name},
                    {"gpus", cluster.total_devices()}, {"nodes", cluster.nodes}};
    j["model"] = {{"name", model.name}, {"params", model.total_params()}, {"seq_len", model.seq_len}};
    j["engine"] = f.engine;
    j["memory_accounting"] = counted;
    j["profile"] = hw.name;
    j["interrupted"] = r.interrupted;
    j["search_id"] = search_id ? nlohmann::json(*search_id) : nlohmann::json(nullptr);
    if (nothing) {
      nlohmann::json closest = nlohmann::json::array();
      for (const auto& c : r.closest) closest.push_back(candidate_to_json(c, r));
      nlohmann::json advice = nlohmann::json::array();
      for (const auto& h : hints)
        advice.push_back({{"change", h.change},
                          {"fits", h.fits},
                          {"detail", h.detail},
                          // A hint over a search (more GPUs, another engine) fits without one
                          // plan's throughput: null, not 0 tokens/s.
                          {"tokens_per_s", h.fits && h.tokens_per_s > 0 ? nlohmann::json(h.tokens_per_s)
                                                                        : nlohmann::json(nullptr)}});
      j["closest"] = closest;
      j["fit_hints"] = advice;
      j["accuracy"] = nullptr;
    } else {
      j["accuracy"] = best_accuracy_json();
      j["tight_memory"] = nullptr;
      if (tight)
        j["tight_memory"] = {{"best_gpu_fraction", tight->best_fraction},
                             {"threshold", kTightMemoryFraction},
                             {"headroom_pct", tight->headroom_pct},
                             {"alternative", candidate_to_json(tight->alternative, r)},
                             {"tokens_per_s_ratio", tight->tokens_per_s_ratio}};
    }
    return j;
  };
  if (!f.json) {
    std::cout << "ztune search: " << model.name << " (" << model.seq_len << "-token sequences) on " << cluster.name
              << " (" << cluster.total_devices() << " × " << cluster.node.gpu.name << ", " << cluster.nodes
              << (cluster.nodes == 1 ? " node" : " nodes") << "), engine " << f.engine
              << (counted == "executor"
                      ? std::string(" (model states counted as ztune's executor allocates them") +
                            (f.accounting == "engine" ? ")" : "; --accounting applies to the other engines)")
                  : counted == "fp32"       ? std::string(" (fp32 model states: 4 + 4 + 8 bytes a parameter)")
                  : f.accounting == "engine" ? " (model states counted as " + f.engine + " keeps them)"
                                             : " (model states as --accounting " + f.accounting + " counts them)")
              << "\n";
    if (f.master_dtype != "fp32" || f.moments_dtype != "fp32" || f.param_remainders)
      std::cout << "adam     "
                << adam_states_text({*precision_of(f.master_dtype), *precision_of(f.moments_dtype), f.param_remainders})
                << " in every plan (--master-dtype, --moments-dtype, --param-remainders)\n";
    if (f.fp8 != "none")
      std::cout << "fp8      every plan's linear GEMMs in FP8, " << f.fp8
                << " scaling (--fp8; no published FP8 run is among the ones ztune is judged on)"
                << (f.fp8_param_gather ? "; FP8 parameters gathered in FP8 (--fp8-param-gather)" : "") << "\n";
    if (const std::string note = sequence_note(model); !note.empty()) std::cout << note << "\n";
    if (const std::string note = dropout_note(model, cluster, hw); !note.empty()) std::cout << "note: " << note << "\n";
    if (nothing && r.interrupted) {
      std::cout << "Interrupted before a plan that fits was found: " << grouped(static_cast<double>(r.evaluated))
                << " of " << grouped(static_cast<double>(r.space)) << " plans evaluated.\n";
    } else if (nothing) {
      print_infeasible(std::cout, r, hints);
    } else {
      std::cout << "\n";
      print_plan_table(std::cout, r, r.plans);
      if (const auto* sim = r.pass("simulate"); sim != nullptr && sim->out > 0)
        std::cout << "(* = simulated: the first " << sim->out << " are ranked by their simulated "
                  << (r.objective == Objective::throughput ? "throughput"
                      : r.objective == Objective::time ? "time to train " + grouped(r.tokens) + " tokens"
                                                       : "cost of " + grouped(r.tokens) + " tokens")
                  << ", the rest by the analytical model's; the time to train" << (r.objective == Objective::cost ? " and cost" : "")
                  << " from the throughput each was ranked by)\n";
      std::cout << "\nBest plan: " << r.plans.front().plan.summary() << "\n";
      print_breakdowns(std::cout, r.plans.front());
      // The error of the same cost model against published runs on this GPU (ztune validate).
      const Accuracy& accuracy = best_accuracy_of();
      std::cout << "\n" << accuracy_line(accuracy, hw.name, catalog_profile_for(cluster)) << "\n";
      if (const std::string mine = runs_fit_line(hw); !mine.empty()) std::cout << mine << "\n";
      const auto& best = r.plans.front().time();
      const double widening = band_widening(accuracy, model, r.plans.front().plan);
      if (const std::string band = error_band_line(accuracy, best.iteration_s, best.tokens_per_s, widening);
          !band.empty())
        std::cout << "best plan's " << band << "\n";
      // Plans the band cannot tell from the best: their order is within the
      // cost model's error, which a user choosing among them should know.
      if (!accuracy.cv.empty() && r.objective == Objective::throughput && best.tokens_per_s > 0) {
        const double floor = best.tokens_per_s / widened_factors(accuracy.cv.time_factors(), widening).second;
        std::size_t within = 0;
        while (within + 1 < r.plans.size() && r.plans[within + 1].time().tokens_per_s >= floor) ++within;
        if (within > 0)
          std::cout << "note: plan" << (within == 1 ? " 2 is" : "s 2-" + std::to_string(within + 1) + " are")
                    << " inside the best plan's band (from " << grouped(floor)
                    << " tokens/s): which is fastest is within the cost model's error\n";
      }
      if (const std::string beyond =
              extrapolation_line(accuracy, model, r.plans.front().plan);
          !beyond.empty())
        std::cout << "best plan " << beyond << "\n";
      if (tight) print_tight_memory(std::cout, *tight);
      // torchtitan, the fsdp engine's export, trains its Llama 3 model only.
      if (o.space.engine == Engine::fsdp)
        if (const std::string why = torchtitan_model_refusal(model); !why.empty())
          std::cout << "note: these plans are for PyTorch FSDP wrapped around " << model.name
                    << " by hand: ztune export --format torchtitan refuses the model (" << why << ")\n";
      if (!o.space.attention &&
          fused_attention_unpriced(o.space, model, cluster, searched))
        std::cout << "note: FlashAttention plans were not searched: in fp32 ztune's own CUDA fused kernel does not "
                     "run at FlashAttention-2's speed; --attention flash searches them for ztune's executor, "
                     "16-bit plans run cuDNN's fused attention, --engine megatron or deepspeed ranks them at "
                     "FlashAttention-2's speed\n";
    }
    std::cout << "\n";
    print_pass_summary(std::cout, r);
    // Nothing reached the memory prune: the rules that refused the plans are
    // the whole story, so they are printed without --explain too.
    const bool refused_by_rules = nothing && !r.interrupted && r.closest.empty() && r.pruned.total() > 0;
    if (f.explain || refused_by_rules) print_rule_counts(std::cout, r);
    // An opt-in that adds nothing (--zeropp beside a pinned --dp-shard, which
    // it does not combine with) is said without --explain: it had been
    // dropped without a word.
    // Each count lays the space out again: without --explain only where a
    // pinned mode (hybrid sharding, cp, Ulysses) may have left an opt-in nothing.
    const bool mode_pinned = o.space.dp_shard || (o.space.cp && *o.space.cp > 1) ||
                             (o.space.ulysses && *o.space.ulysses > 1);
    if (!r.interrupted && (f.explain || mode_pinned)) {
      for (const auto& [flag, added] : plans_added_by_options(model, cluster, o.space)) {
        if (f.explain) std::cout << "  " << flag << " added " << added << " plans to the space of " << r.space << "\n";
        else if (added == 0)
          std::cout << "note: " << flag << " added no plan to the space: no plan the pins and the engine leave "
                    << "takes it (--explain counts each option's plans)\n";
      }
    }
  }
  // The result is printed and --out written before the search is stored, so
  // that a database that refuses it (a read-only file or directory) loses
  // neither: the refusal is said, and the exit is 2.
  auto store = [&]() -> int {
    if (db && store_error.empty()) {
      try {
        nlohmann::json options = search_options_to_json(request_of(f), o);
        // How far the best plan's figure was to be trusted when it was
        // searched (the validation data and profiles may change later): its
        // band and what it extrapolated, for history show.
        if (!r.plans.empty()) {
          nlohmann::json stored = best_accuracy_json();
          stored.erase("time_sources");
          options["accuracy"] = std::move(stored);
        }
        search_id = db->store_search({cluster, model, &hw, options, r});
      } catch (const InputError& e) {
        store_error = e.what();
      }
    }
    if (f.json) std::cout << json_result().dump(2) << "\n";
    if (!store_error.empty()) {
      std::cout << std::flush;
      std::cerr << "ztune: error: the search was not stored in the results database: " << store_error
                << (nothing || f.out.empty() ? std::string() : "; the best plan is in " + f.out) << "\n";
      return kExitUsage;
    }
    if (search_id && !f.json)
      std::cout << "Stored as search " << *search_id << " in " << db->path() << " (ztune history show " << *search_id
                << ").\n";
    return kExitOk;
  };
  if (nothing) {
    if (const int rc = store(); rc != kExitOk) return rc;
    // Said, so that a script does not read an old file as this search's plan.
    if (!f.out.empty()) std::cerr << "ztune: no plan fits: " << f.out << " was not written\n";
    return r.interrupted || stopped_after ? kExitInterrupted : kExitInfeasible;
  }
  if (!f.out.empty()) {
    write_plan_file(f.out, r.plans.front(), model, cluster, f.engine, f.compile);
    if (!f.json)
      std::cout << "Wrote the best plan" << (r.interrupted ? " found before the interrupt" : "") << " to " << f.out
                << ".\n";
  }
  if (const int rc = store(); rc != kExitOk) return rc;
  if (r.interrupted || stopped_after) {
    if (f.run || f.autorun.dry_run) std::cerr << "ztune: --run: not run: the search was interrupted\n";
    return kExitInterrupted;
  }
  if (f.run || f.autorun.dry_run) {
    std::cout << std::flush;
    AutorunOptions ro = f.autorun;
    if (ro.plan_out.empty()) ro.plan_out = f.out;
    // The best plan ztune's executor can run: better-ranked ones it cannot
    // (a LayerNorm model without biases, K/V heads tp does not divide, layouts it cannot place) are counted
    // and skipped, the first reason shown. Beyond the table's top
    // plans, every feasible plan is ranked again to find one.
    const ExecBackend backend = executor_backend_for(cluster);
    auto first_runnable = [&](const SearchResult& res, int& skipped, std::string& reason) -> const Candidate* {
      skipped = 0;
      for (const auto& cand : res.plans) {
        const auto why = unsupported_reason(cand.plan, model, cand.plan.gpus(), backend, cluster.node.gpus);
        if (!why) return &cand;
        if (skipped++ == 0) reason = cand.plan.summary() + ": " + *why;
      }
      return nullptr;
    };
    int skipped = 0;
    std::string reason;
    const Candidate* pick = first_runnable(r, skipped, reason);
    SearchResult all;
    if (pick == nullptr) {
      SearchOptions every = o;
      every.top = static_cast<int>(std::min<std::int64_t>(r.feasible, std::numeric_limits<int>::max()));
      every.simulate_top = 0;
      all = run_search(model, cluster, hw, every);
      pick = first_runnable(all, skipped, reason);
    }
    if (skipped > 0)
      std::cout << "--run: skipped " << skipped << " better-ranked plan(s) the executor cannot run (first: " << reason
                << ")\n";
    if (pick == nullptr) {
      std::cerr << "ztune: --run: no feasible plan can run on ztune's executor (first reason: " << reason << ")\n";
      return kExitInfeasible;
    }
    return run_best_plan(pick->plan, model, catalog_cluster, cluster, hw, ro, db);
  }
  return kExitOk;
}

}  // namespace

Command add_search(CLI::App& root) {
  auto* app = root.add_subcommand("search", "Search the plan space and rank the plans that fit (the default command)");
  auto f = std::make_shared<SearchFlags>();
  f->input.add_to(*app, true);
  const CLI::Validator whole = integer_in(kWholeNumberFlag);
  app->add_option("--gpus", f->gpus, "Use exactly N devices (default: all)")->check(whole);
  app->add_option("--min-gpus", f->min_gpus, "Search every device count from N ...")->check(whole);
  app->add_option("--max-gpus", f->max_gpus, "... up to N")->check(whole);
  app->add_flag("--allow-tp-across-nodes", f->allow_tp_across_nodes, "Let tensor-parallel groups span nodes");
  add_engine_flags(*app, f->engine, f->compile,
                   "The engine that runs the plan: its space (what it can run) and its engine profile "
                   "(data/engines/: host costs, fusion, overlap) price every plan");
  app->add_option("--global-batch", f->global_batch, "Sequences per step (default: the model file's)")
      ->check(integer_in(kGlobalBatchFlag));
  app->add_option("--precision", f->precision, "Pin the precision (default: every 16-bit one the GPU has)")
      ->check(CLI::IsMember(names_of(kPrecisionNames)));
  add_grad_reduce_dtype(*app, f->grad_reduce_dtype);  // every plan of the space states it
  add_optimizer_dtypes(*app, f->master_dtype, f->moments_dtype, f->param_remainders);  // likewise
  add_fp8(*app, f->fp8, &f->fp8_param_gather);  // likewise: FP8 plans only when pinned
  app->add_option("--max-micro-batch", f->max_micro_batch, "Largest micro-batch to try")->check(whole);
  app->add_option("--tp", f->tp, "Search only plans with this tensor-parallel degree")
      ->check(integer_in(1, 1 << 20, "a tensor-parallel degree"));
  app->add_option("--pp", f->pp, "Search only plans with this pipeline depth")
      ->check(integer_in(1, 1 << 20, "a pipeline depth"));
  app->add_option("--cp", f->cp, "Search only plans with this context-parallel degree")
      ->check(integer_in(kCpFlag));
  app->add_option("--max-cp", f->max_cp,
                  "Largest context-parallel degree searched (default: up to 8 for sequences of 8192 tokens or "
                  "more, else none; 1: none)")
      ->check(integer_in(kCpFlag));
  app->add_option("--ulysses", f->ulysses, "Search only plans with this DeepSpeed-Ulysses degree")
      ->check(integer_in(kUlyssesFlag));
  app->add_option("--max-ulysses", f->max_ulysses,
                  "Largest DeepSpeed-Ulysses degree searched (deepspeed and ztune engines; default: up to 8 for "
                  "sequences of 8192 tokens or more, else none; 1: none)")
      ->check(integer_in(kUlyssesFlag));
  app->add_option("--zero", f->zero, "Search only plans with this ZeRO stage")->check(integer_in(0, 3, "a ZeRO stage"));
  app->add_option("--recompute", f->recompute,
                  "Search only plans with this activation recomputation: none, selective (the engine's: the "
                  "attention core; torchtitan's op-level SAC under fsdp) or full (every layer: not turned into "
                  "Megatron's block method, as an engine of 2019-2021 or a recipe that fixes it runs); any (the "
                  "default): all three")
      ->check(choices_after("any", names_of(kRecomputeNames)));
  app->add_flag("--no-sequence-parallel", f->no_sequence_parallel,
                "Search no Megatron-style sequence parallelism (an engine before it: Megatron-LM until 2022)");
  app->add_flag("--no-tp-comm-overlap", f->no_tp_comm_overlap,
                "Search no TP communication overlapped with the GEMMs (--engine megatron: Transformer Engine's "
                "--tp-comm-overlap, otherwise given to its sequence-parallel plans on Ampere or newer)");
  app->add_option("--dp-shard", f->dp_shard,
                  "Search only hybrid-sharded ZeRO-3 plans with shard groups of this many data-parallel ranks "
                  "(default: the space tries one node's ranks and 2, 4, 8 nodes' where dp spans nodes)")
      ->check(integer_in(kDpShardFlag));
  app->add_flag("--onebit-adam", f->onebit_adam, "Also search 1-bit Adam (compressed gradients)");
  app->add_flag("--zeropp", f->zeropp, "Also search ZeRO++ (quantized ZeRO-3 communication)");
  app->add_option("--freeze-step", f->freeze_step,
                  "1-bit Adam warm-up steps (default: 15% of the run's steps, the 1-bit Adam tutorial's share)")
      ->check(integer_in(0, kMaxFreezeStep, "a step count"));  // as a plan file holds it
  app->add_option("--sparse-attention", f->sparse_attention, "Also search this block-sparse attention layout")
      ->check(CLI::IsMember(names_of(kSparseLayoutNames)));
  app->add_option("--sparse-block", f->sparse_block, "Block size of --sparse-attention (16..128)")
      ->check(integer_in(16, 128, "a block size"));
  app->add_option("--attention", f->attention,
                  "Attention kernel to search: any (standard, plus on Ampere or newer the fused kernel the profile "
                  "prices faster: cudnn on H100, flash elsewhere), standard, flash, cudnn or eager (never searched "
                  "unless pinned: it is standard with more memory traffic)")
      ->check(CLI::IsMember([] {
        std::vector<std::string> names{"any"};
        names.insert(names.end(), std::begin(kAttentionKernelNames), std::end(kAttentionKernelNames));
        return names;
      }()));
  app->add_option("--objective", f->objective, "Rank by throughput, time (days for --tokens) or cost")
      ->check(CLI::IsMember({"throughput", "time", "cost"}));
  // Bounded so that days and cost stay finite numbers to rank by (flag_ranges.hpp).
  app->add_option("--tokens", f->tokens, "Token budget for days and cost (default: the model file's)")
      ->check(number_in(kTokensFlag));
  app->add_option("--gpu-hour-price", f->gpu_hour_price, "Price of one GPU-hour (objective cost)")
      ->check(number_in(kGpuHourPriceFlag));
  app->add_option("--top", f->top, "Plans to show")->check(whole)->capture_default_str();
  app->add_option("--simulate-top", f->simulate_top, "Plans to re-time with the simulator")
      ->capture_default_str()
      ->check(integer_in(0, std::numeric_limits<int>::max(), "a whole number"));
  app->add_option("--threads", f->threads, "Worker threads (default: all cores)")->check(ThreadCount);
  app->add_option("--max-plans", f->max_plans,
                  "Refuse a plan space of more plans than this (default 100,000,000: about a minute of ranking on "
                  "two cores); Ctrl-C stops a running search with the best plans so far (exit 130)")
      ->check(integer_in(1, std::numeric_limits<long long>::max(), "a plan count"));
  add_memory_headroom(*app, f->memory_headroom_pct);
  add_accounting(*app, f->accounting);
  app->add_flag("--no-prune", f->no_prune, "Switch off the memory prune pass (rank plans that do not fit too)");
  app->add_flag("--no-rank", f->no_rank, "Switch off the analytical rank pass (plans in enumeration order)");
  app->add_flag("--no-simulate", f->no_simulate, "Switch off the simulate pass");
  app->add_flag("--json", f->json, "Print the result as JSON");
  app->add_flag("--explain", f->explain, "Show how many plans each rule removed");
  app->add_option("--out", f->out, "Write the best plan to this plan file")->check(WritableFile);
  app->add_option("--profile", f->profile,
                  "Hardware profile: a file, or a name in ~/.local/share/ztune/profiles/ or data/profiles/ "
                  "(default: the GPU's in data/profiles/)")
      ->check(GivenPath);
  app->add_option("--db", f->db, kDbHelp)->check(DatabasePath);
  app->add_flag("--no-db", f->no_db, "Do not store the search");
  app->add_flag("--run", f->run, "Run the best plan, compare measured with predicted, store both, refine the profile");
  app->add_option("--steps", f->autorun.steps, "--run: optimizer steps")
      ->check(integer_in(1, std::numeric_limits<int>::max(), "a step count"))
      ->capture_default_str();
  app->add_flag("--dry-run", f->autorun.dry_run, "--run: print the launch command, the plan and the exported configs only");
  app->add_flag("--no-refine", [f](std::int64_t) { f->autorun.refine = false; }, "--run: do not refit the profile");
  app->add_option("--hosts", f->autorun.hosts, "--run: Open MPI host list (host1:slots,host2:slots)");
  app->add_option("--run-threads", f->autorun.threads, "--run: compute threads per rank")->check(ThreadCount);
  app->add_option("--data", f->autorun.data, "--run: uint16 token file or \"synthetic\"")->check(GivenPath);
  app->add_option("--nvme-dir", f->autorun.nvme_dir,
                  "--run: directory for NVMe offload's per-rank files (default: the temporary directory)");
  return {app, [f] { return run_search_command(*f); }};
}

}  // namespace ztune::cli
