// ztune history: the searches and runs kept in the results database, newest
// first; `ztune history show ID` prints one (s12 = search 12, r3 = run 3,
// p2 = stored profile 2).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "db_runs.hpp"
#include "memory_comparison.hpp"
#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/tuner/results_db.hpp"
#include "ztune/vocab/text.hpp"

namespace ztune::cli {

namespace {

struct HistoryFlags {
  std::string db;
  int limit = 20;
  bool json = false;
  std::string id;
  CLI::App* show = nullptr;
};

// The loop shown (issue 21): per cluster with calibrated profiles stored, the
// sequence of its profiles and the error of each on the runs measured since.
std::vector<calibration::ClusterProfileHistory> profile_histories(const ResultsDb& db, std::vector<std::string>& notes) {
  return calibration::profile_histories_of(db, [](const std::string& name) { return load_cluster(name); }, notes);
}

nlohmann::json optional_number(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

int list(const ResultsDb& db, const HistoryFlags& f) {
  const auto searches = db.searches(f.limit);
  const auto runs = db.runs(f.limit);
  // A list cut at --limit says so: 20 of 301 searches had read as all of them.
  const std::int64_t searches_stored = db.search_count(), runs_stored = db.run_count();
  auto heading = [&](const char* what, std::size_t shown, std::int64_t stored) {
    std::string h = std::string(what) + " (newest first";
    if (stored > static_cast<std::int64_t>(shown))
      h += ", " + std::to_string(shown) + " of " + std::to_string(stored) + "; --limit " + std::to_string(stored) +
           " lists them all";
    return h + "):\n";
  };
  const auto damaged = std::count_if(searches.begin(), searches.end(), [](const auto& s) { return !s.damaged.empty(); }) +
                       std::count_if(runs.begin(), runs.end(), [](const auto& r) { return !r.damaged.empty(); });
  // Said after the list (on stderr, so a --json reader still parses stdout).
  auto warn_damaged = [&] {
    std::cout << std::flush;
    if (damaged > 0)
      std::fprintf(stderr, "ztune: warning: %s: %ld row(s) cannot be read whole; listed as damaged, with the reason\n",
                   db.path().c_str(), static_cast<long>(damaged));
  };
  std::vector<std::string> notes;
  const auto histories = profile_histories(db, notes);
  if (f.json) {
    nlohmann::json j{{"searches", nlohmann::json::array()}, {"runs", nlohmann::json::array()},
                     {"searches_stored", searches_stored}, {"runs_stored", runs_stored}};
    for (const auto& s : searches) {
      if (!s.damaged.empty()) {
        j["searches"].push_back({{"id", "s" + std::to_string(s.id)}, {"damaged", s.damaged}});
        continue;
      }
      j["searches"].push_back({{"id", "s" + std::to_string(s.id)}, {"created_at", s.created_at},
                               {"cluster", s.cluster}, {"model", s.model},
                               {"engine", s.engine.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.engine)},
                               {"space", s.space},
                               {"feasible", s.feasible}, {"elapsed_s", s.elapsed_s}, {"best", s.best},
                               {"best_tokens_per_s", s.best_tokens_per_s ? nlohmann::json(*s.best_tokens_per_s)
                                                                         : nlohmann::json(nullptr)}});
    }
    for (const auto& r : runs)
      j["runs"].push_back(r.damaged.empty()
                              ? nlohmann::json{{"id", "r" + std::to_string(r.id)}, {"created_at", r.created_at},
                                               {"cluster", r.cluster}, {"model", r.model}, {"plan", r.plan},
                                               {"status", r.status},
                                               // what the text list shows beside each run
                                               {"measured_iteration_s", optional_number(r.measured_iteration_s)},
                                               {"predicted_iteration_s", optional_number(r.predicted_iteration_s)}}
                              : nlohmann::json{{"id", "r" + std::to_string(r.id)}, {"damaged", r.damaged}});
    j["profiles"] = nlohmann::json::array();
    for (const auto& h : histories) j["profiles"].push_back(calibration::profile_history_json(h.cluster, h.rows));
    j["notes"] = notes;
    std::cout << j.dump(2) << "\n";
    warn_damaged();
    return kExitOk;
  }
  std::cout << "Results database " << db.path() << "\n\n" << heading("Searches", searches.size(), searches_stored);
  if (searches.empty()) std::cout << "  none\n";
  // A row the database cannot give whole is listed by its id and what is wrong
  // with it, the others as usual.
  for (const auto& s : searches) {
    if (!s.damaged.empty()) {
      std::cout << "  s" << s.id << "  damaged: " << s.damaged << "\n";
      continue;
    }
    std::cout << "  s" << s.id << "  " << s.created_at << "  " << s.model << " on " << s.cluster
              << (s.engine.empty() ? "" : " (" + s.engine + ")") << "  "
              << s.feasible << "/" << s.space << " plans fit  " << formatted("%.3f s", s.elapsed_s)
              << (s.interrupted ? "  (interrupted)" : "") << "\n      best: "
              << (s.best.empty() ? std::string("none") : s.best)
              << (s.best_tokens_per_s ? "  " + formatted("%.0f tokens/s", *s.best_tokens_per_s) : "") << "\n";
  }
  std::cout << "\n" << heading("Runs", runs.size(), runs_stored);
  if (runs.empty()) std::cout << "  none\n";
  for (const auto& r : runs) {
    if (!r.damaged.empty()) {
      std::cout << "  r" << r.id << "  damaged: " << r.damaged << "\n";
      continue;
    }
    std::cout << "  r" << r.id << "  " << r.created_at << "  " << (r.model.empty() ? "?" : r.model) << " on "
              << (r.cluster.empty() ? "?" : r.cluster) << "  " << r.plan << "  " << r.status;
    if (r.measured_iteration_s) std::cout << "  measured " << formatted("%.3f s", *r.measured_iteration_s);
    if (r.predicted_iteration_s) std::cout << "  predicted " << formatted("%.3f s", *r.predicted_iteration_s);
    std::cout << "\n";
  }
  std::cout << std::flush;
  for (const auto& h : histories) calibration::print_profile_history(stdout, h.cluster, h.rows);
  for (const auto& n : notes) std::printf("  note: %s\n", n.c_str());
  std::fflush(stdout);
  warn_damaged();
  return kExitOk;
}

// The user's own database before any command wrote it: nothing is stored
// yet, which is an answer, not an error (a named --db that is not there is).
int list_nothing_yet(const std::string& path, bool json) {
  if (json) {
    const nlohmann::json j{{"searches", nlohmann::json::array()}, {"runs", nlohmann::json::array()},
                           {"searches_stored", 0}, {"runs_stored", 0}, {"profiles", nlohmann::json::array()},
                           {"notes", nlohmann::json::array({path + " does not exist yet (search, run and calibrate "
                                                            "create it)"})}};
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "Results database " << path << " (not there yet: search, run and calibrate create it)\n\n"
            << "Searches (newest first):\n  none\n\nRuns (newest first):\n  none\n";
  return kExitOk;
}

std::string render_search(const nlohmann::json& d);
std::string render_run(const nlohmann::json& d);
std::string render_profile(const ProfileSummary& p, const HardwareProfile& hw);

int show_profile(const ResultsDb& db, const HistoryFlags& f, std::int64_t n) {
  const auto stored = db.profile(n);
  if (!stored) throw InputError("history show " + f.id + ": no profile " + std::to_string(n) + " in " + db.path());
  if (f.json) {
    // As stored: a file --profile reads back.
    std::cout << stored->doc.dump(2) << "\n";
    return kExitOk;
  }
  const HardwareProfile hw = profile_from_json(stored->doc, db.path() + ": profile " + std::to_string(n));
  std::cout << render_profile(*stored, hw);
  return kExitOk;
}

int show(const ResultsDb& db, const HistoryFlags& f) {
  std::string id = f.id;
  bool is_run = false, is_profile = false;
  if (!id.empty() && (id[0] == 's' || id[0] == 'r' || id[0] == 'p')) {
    is_run = id[0] == 'r';
    is_profile = id[0] == 'p';
    id = id.substr(1);
  }
  std::int64_t n = 0;
  try {
    std::size_t used = 0;
    // Digits only: stoll would skip leading blanks (" 1") and take "+1".
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) throw std::invalid_argument(id);
    n = std::stoll(id, &used);
    if (used != id.size() || n <= 0) throw std::invalid_argument(id);
  } catch (const std::exception&) {
    throw InputError("history show " + f.id + ": expected a search id (12 or s12), a run id (r3) or a profile id (p2)");
  }
  if (is_profile) return show_profile(db, f, n);
  const auto doc = is_run ? db.run(n) : db.search(n);
  if (!doc)
    throw InputError("history show " + f.id + ": no " + (is_run ? "run " : "search ") + std::to_string(n) + " in " +
                     db.path());
  if (f.json) {
    std::cout << doc->dump(2) << "\n";
    return kExitOk;
  }
  // A row edited outside ztune can be valid JSON of the wrong shape: .at() and
  // get<>() throw instead of const operator[]'s undefined behaviour, and the
  // throw becomes an InputError naming the row.
  std::string text;
  const char* what = is_run ? "run" : "search";
  try {
    text = is_run ? render_run(*doc) : render_search(*doc);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(db.path() + ": " + what + " " + std::to_string(n) + ": the stored " + what +
                     " has an unexpected shape (" + e.what() + "); --json prints it as stored");
  }
  std::cout << text;
  return kExitOk;
}

/// The search as `history show` prints it (all or nothing: a bad row prints no half).
std::string render_search(const nlohmann::json& d) {
  std::ostringstream out;
  out << "Search s" << d.at("id").get<long long>() << " at " << d.at("created_at").get<std::string>() << ": "
      << d.at("model").at("name").get<std::string>() << " on " << d.at("cluster").at("name").get<std::string>()
      << "\n  space " << d.at("space") << ", evaluated " << d.at("evaluated") << ", fit " << d.at("feasible") << ", "
      << formatted("%.3f s", d.at("elapsed_s").get<double>()) << " on " << d.at("threads") << " threads"
      << (d.at("interrupted").get<bool>() ? " (interrupted)" : "") << "\n";
  // The best plan's band as it stood when searched (cmd_search stores it with the options).
  nlohmann::json options = d.at("options");
  nlohmann::json accuracy;
  if (options.is_object() && options.contains("accuracy")) {
    accuracy = options.at("accuracy");
    options.erase("accuracy");
  }
  out << "  options " << options.dump() << "\n  pruned by " << d.at("pruned_by").dump() << "\n";
  if (accuracy.is_object() && accuracy.contains("band") && accuracy.contains("cross_validated")) {
    const auto& band = accuracy.at("band").at("tokens_per_s");
    const auto& time = accuracy.at("band").at("iteration_s");
    out << "  best plan's band when searched: " << grouped(band.at(0).get<double>()) << "-"
        << grouped(band.at(1).get<double>()) << " tokens/s (iteration " << formatted("%.3g", time.at(0).get<double>())
        << "-" << formatted("%.3g s", time.at(1).get<double>()) << "), 80% likely (cross-validated on "
        << accuracy.at("cross_validated").at("cell").get<std::string>();
    // Searches stored before session 53 carry no widening: theirs was 1.
    const auto& cv = accuracy.at("cross_validated");
    if (const auto w = cv.find("band_widening"); w != cv.end() && w->is_number() && w->get<double>() != 1)
      out << formatted("; widened %gx beyond the runs it was checked on", w->get<double>());
    out << ")\n";
  }
  if (accuracy.is_object() && accuracy.contains("extrapolation")) {
    const auto& x = accuracy.at("extrapolation");
    std::string beyond;
    for (const auto& q : x.at("beyond")) beyond += (beyond.empty() ? "" : ", ") + q.at("quantity").get<std::string>();
    if (x.value("no_run_on_gpu", false)) out << "  extrapolated: no published run on its GPU\n";
    else if (!beyond.empty()) out << "  extrapolated beyond the runs it was checked on: " << beyond << "\n";
  }
  bool any_simulated = false;
  for (const auto& c : d.at("candidates")) {
    const auto& pred = c.at("prediction");
    const nlohmann::json t = pred.is_object() && pred.contains("time") ? pred.at("time") : nlohmann::json();
    out << "  " << c.at("rank") << ". " << c.at("summary").get<std::string>();
    // The throughput it was ranked by: simulated (*) where the simulator
    // re-timed it, as the search's table and the list above show it.
    // (ResultsDb::search gives every candidate these, from its own columns.)
    const auto& simulated_s = c.at("simulated_iteration_s");
    any_simulated |= !simulated_s.is_null();
    if (!t.is_null() && !c.at("ranked_tokens_per_s").is_null())
      out << "  " << formatted("%.3f s/iter", (simulated_s.is_null() ? t.at("iteration_s") : simulated_s).get<double>())
          << "  " << formatted("%.0f tokens/s", c.at("ranked_tokens_per_s").get<double>())
          << (simulated_s.is_null() ? "" : "*") << "  " << formatted("MFU %.1f%%", 100 * c.at("ranked_mfu").get<double>());
    out << "\n";
  }
  if (any_simulated) out << "  (* = simulated: ranked by the simulator's time, the rest by the analytical model's)\n";
  return out.str();
}

/// A run as `history show rN` prints it: what ran where, predicted against
/// measured, and the measurements (--json prints the stored document whole).
std::string render_run(const nlohmann::json& d) {
  std::ostringstream out;
  auto name_of = [](const nlohmann::json& doc) {
    return doc.is_object() && doc.contains("name") ? doc.at("name").get<std::string>() : std::string("?");
  };
  out << "Run r" << d.at("id").get<long long>() << " at " << d.at("created_at").get<std::string>() << ": "
      << name_of(d.at("model")) << " on " << name_of(d.at("cluster")) << ", " << d.at("status").get<std::string>()
      << "\n  plan " << d.at("summary").get<std::string>() << "\n";
  // The steps the run trained: a resumed run's first is after its checkpoint.
  if (const auto& rec = d.at("record"); rec.is_object() && rec.contains("steps") && rec.at("steps").is_array() &&
                                        !rec.at("steps").empty()) {
    const auto& steps = rec.at("steps");
    const auto first = steps.front().value("step", 0), last = steps.back().value("step", 0);
    if (first > 0 && last >= first)
      out << "  steps " << first << "-" << last << (first > 1 ? " (resumed after step " + std::to_string(first - 1) + ")" : "")
          << "\n";
  }
  // A run that did not finish keeps why, and where its checkpoints are.
  if (const auto& rec = d.at("record"); rec.is_object() && rec.contains("failure") && rec.at("failure").is_string()) {
    out << "  why: " << rec.at("failure").get<std::string>() << "\n";
    // The steps it finished before it stopped (ztune-worker --progress).
    if (const auto done = progress_from_json(rec.contains("completed_steps") ? rec.at("completed_steps") : nlohmann::json()))
      out << "  finished before it stopped: " << progress_summary(*done) << "\n";
    if (rec.contains("checkpoint_dir") && rec.at("checkpoint_dir").is_string())
      out << "  checkpoints: " << rec.at("checkpoint_dir").get<std::string>() << " (continue with ztune run --resume)\n";
  }
  const auto& predicted = d.at("predicted_iteration_s");
  const auto& measured = d.at("measured_iteration_s");
  out << "  iteration: predicted "
      << (predicted.is_null() ? std::string("-") : formatted("%.4g s", predicted.get<double>())) << ", measured "
      << (measured.is_null() ? std::string("-") : formatted("%.4g s", measured.get<double>()));
  if (!predicted.is_null() && !measured.is_null() && measured.get<double>() > 0)
    out << " (" << formatted("%+.1f%%", 100 * (predicted.get<double>() / measured.get<double>() - 1))
        << " predicted against measured)";
  out << "\n";
  const auto& list = d.at("measurements");
  if (!list.empty()) {
    out << "  measurements:\n";
    for (const auto& m : list)
      out << "    " << m.at("name").get<std::string>() << " " << formatted("%.6g", m.at("value").get<double>()) << " "
          << m.at("unit").get<std::string>() << "\n";
  }
  // The stored prediction's memory lines beside what each held at the run's
  // peak, where the stored record keeps the peak's composition.
  const auto& prediction = d.at("prediction");
  if (prediction.is_object() && prediction.contains("memory") && d.at("record").is_object()) {
    MemoryPrediction mp;
    const auto& gpu = prediction.at("memory").at("gpu");
    for (std::size_t i = 0; i < kMemLineNames.size(); ++i)
      if (gpu.contains(kMemLineNames[i])) mp.gpu[i] = gpu.at(kMemLineNames[i]).get<double>();
    try {
      const std::string table =
          memory_at_peak_table(run_record_from_json(d.at("record"), "run r" + d.at("id").dump()), mp);
      std::istringstream lines(table);
      for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
    } catch (const InputError& e) {
      out << "  (its record does not read as a run record: " << e.what() << ")\n";
    }
  }
  return out.str();
}

/// A stored profile as `history show pN` prints it: the figures a prediction
/// with it uses (--json prints the document, which --profile reads).
std::string render_profile(const ProfileSummary& p, const HardwareProfile& hw) {
  std::ostringstream out;
  out << "Profile p" << p.id << " stored " << p.created_at << ": " << hw.name << " (" << hw.gpu << ")\n"
      << "  source: " << hw.source << "\n  GEMM efficiency, full waves:";
  for (const auto& row : hw.gemm_efficiency)
    out << " " << formatted("%.2f", row.efficiency) << " at " << formatted("%.0e", row.size) << " FLOPs;";
  out << "\n  attention GEMMs " << formatted("%.2f", hw.attention_gemm_factor) << " of the table (cuDNN "
      << formatted("%.2f", hw.cudnn_attention_factor) << "), memory-bound kernels "
      << formatted("%.0f%%", 100 * hw.memory_bandwidth_efficiency) << " of HBM, "
      << formatted("%.1f us", hw.kernel_launch_s * 1e6) << " between kernels\n";
  auto fabric = [&](const char* level, const FabricProfile& fp) {
    out << "  " << level << ": bus bandwidth " << formatted("%.0f%%", 100 * fp.busbw_efficiency) << " of the links, "
        << formatted("%.1f us", fp.latency_s * 1e6) << " a step, " << formatted("%.1f us", fp.base_latency_s * 1e6)
        << " a call\n";
  };
  fabric("intra-node", hw.intra_node);
  fabric("inter-node", hw.inter_node);
  out << "  PCIe " << formatted("%.0f%%", 100 * hw.pcie_efficiency) << ", NVMe " << formatted("%.0f%%", 100 * hw.nvme_efficiency)
      << " of the datasheet\n";
  if (!hw.measured.empty()) out << "  measured on " << hw.measured.cluster << ": " << profile_to_json(hw).at("measured").dump() << "\n";
  out << "  To predict with it: ztune history show p" << p.id << " --json > p" << p.id << ".json, then --profile p"
      << p.id << ".json\n";
  return out.str();
}

}  // namespace

Command add_history(CLI::App& root) {
  auto* app = root.add_subcommand("history", "List the searches, runs and calibrated profiles (with their error on later runs) in the results database");
  auto f = std::make_shared<HistoryFlags>();
  app->add_option("--db", f->db, kDbHelp)->check(DatabasePath);
  app->add_option("--limit", f->limit, "How many of each to list")->check(integer_in(1, std::numeric_limits<int>::max(), "a whole number"));
  app->add_flag("--json", f->json, "Print JSON");
  f->show = app->add_subcommand("show", "Show one search (ID or sID), run (rID) or stored profile (pID)");
  f->show->add_option("id", f->id, "s12, 12, r3 or p2")->required();
  f->show->add_option("--db", f->db, kDbHelp)->check(DatabasePath);
  f->show->add_flag("--json", f->json, "Print JSON");
  return {app, [f] {
            // History reads: a missing or empty --db is said, not created.
            const std::string path = f->db.empty() ? default_db_path() : f->db;
            std::error_code ec;
            if (f->db.empty() && !f->show->parsed() && !std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
              return list_nothing_yet(path, f->json);
            const auto db = ResultsDb::open(path, DbAccess::read);
            return f->show->parsed() ? show(db, *f) : list(db, *f);
          }};
}

}  // namespace ztune::cli
