// ztune validate: predict every published run of data/validation/ and print
// Published / Predicted / Δ% per case with its source, MAPE per source and
// overall (STYLE.md #13). Exit 1 when a case exceeds its stated tolerance or a
// source's MAPE exceeds its target; 2 on bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/tuner/planning.hpp"

namespace ztune::cli {

namespace {

struct ValidateFlags {
  std::string dir;
  std::string profile;
  std::string source;
  std::string engine;
  bool json = false;
  bool all = false;
  bool simulate = false;
  int worst = 10;
};

// --simulate: the simulator predicts every iteration time; the analytical
// report is kept beside it so both errors are shown.
void add_analytical(nlohmann::json& j, const ValidationReport& simulated, const ValidationReport& ana) {
  for (std::size_t i = 0; i < simulated.cases.size() && i < ana.cases.size(); ++i) {
    j["cases"][i]["predicted_analytical"] = ana.cases[i].predicted;
    j["cases"][i]["error_analytical_pct"] = ana.cases[i].error_pct();
  }
  for (std::size_t i = 0; i < simulated.sources.size() && i < ana.sources.size(); ++i) {
    j["sources"][i]["mape_analytical_pct"] = ana.sources[i].mape;
    j["sources"][i]["max_abs_error_analytical_pct"] = ana.sources[i].max_abs_pct;
  }
  j["overall_mape_analytical_pct"] = ana.overall_mape;
  j["predictor"] = "simulator";
}

// Column widths of the tables: the longest source name and case id of the
// report (issue 23: fixed widths broke the columns on long names).
struct Widths {
  int source = 6;  // "source"
  int id = 4;      // "case"
};
Widths widths_of(const ValidationReport& r) {
  Widths w;
  auto grow = [](int& width, const std::string& s) { width = std::max(width, static_cast<int>(s.size())); };
  for (const auto& s : r.sources) grow(w.source, s.name);
  for (const auto& c : r.cases) {
    grow(w.source, c.source);
    grow(w.id, c.id);
  }
  for (const auto& k : r.skipped) {
    grow(w.source, k.source);
    grow(w.id, k.id);
  }
  return w;
}

void print_comparison(const ValidationReport& simulated, const ValidationReport& ana) {
  const int sw = widths_of(simulated).source;
  std::printf("\n%-*s %6s %14s %14s %16s %16s\n", sw, "source", "cases", "analytical %", "simulated %",
              "analytical max%", "simulated max%");
  for (std::size_t i = 0; i < simulated.sources.size() && i < ana.sources.size(); ++i)
    std::printf("%-*s %6d %14.2f %14.2f %16.2f %16.2f\n", sw, simulated.sources[i].name.c_str(), simulated.sources[i].cases,
                ana.sources[i].mape, simulated.sources[i].mape, ana.sources[i].max_abs_pct, simulated.sources[i].max_abs_pct);
  std::printf("(MAPE per source: the analytical estimate vs the discrete-event simulator; the table above is the "
              "simulator's)\n");
}

// The shipped leave-one-source-out figures (data/validation/loso.json) belong
// to data/validation's runs: with --dir naming another set they are not shown
// (`stale` says why), where they had been printed as that set's.
nlohmann::json loso_of(const std::string& dir, std::string* stale) {
  std::error_code ec;
  if (dir.empty() || std::filesystem::equivalent(dir, default_validation_dir(), ec)) return read_loso(stale);
  *stale = "the leave-one-source-out figures (data/validation/loso.json) are data/validation's runs', not --dir " +
           dir + "'s: not shown";
  return nlohmann::json::object();
}

nlohmann::json report_json(const ValidationReport& r, const std::string& dir) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& c : r.cases)
    cases.push_back({{"source", c.source}, {"id", c.id}, {"metric", c.metric}, {"detail", c.detail},
                     {"assumed", c.assumed},
                     {"gpu", c.gpu}, {"engine", c.engine}, {"published", c.published}, {"predicted", c.predicted},
                     {"error_pct", c.error_pct()}, {"optimism_pct", c.optimism_pct()},
                     {"tolerance_pct", c.tolerance_pct}, {"ok", c.ok()}});
  for (std::size_t i = 0; i < r.cases.size(); ++i)
    if (r.cases[i].memory_fraction > 0) cases[i]["memory_fraction"] = r.cases[i].memory_fraction;
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& s : r.sources)
    sources.push_back({{"name", s.name}, {"description", s.description}, {"kind", s.kind}, {"engine", s.engine},
                       {"cases", s.cases}, {"failed", s.failed}, {"mape_pct", s.mape},
                       {"mean_signed_pct", s.mean_signed_pct}, {"max_abs_error_pct", s.max_abs_pct},
                       {"mape_tolerance_pct", s.mape_tolerance_pct}, {"ok", s.ok()}});
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& k : r.skipped) skipped.push_back({{"source", k.source}, {"id", k.id}, {"reason", k.reason}});
  std::string stale;
  const nlohmann::json loso = loso_of(dir, &stale);
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& c : cell_summaries(r, loso))
    cells.push_back({{"gpu_family", c.family}, {"engine", c.engine}, {"sources", c.sources}, {"runs", c.runs},
                     {"in_sample_mape_pct", c.in_sample_mape}, {"in_sample_mean_speed_error_pct", c.in_sample_signed},
                     {"loso_runs", c.loso_runs}, {"loso_mape_pct", c.loso_mape},
                     {"loso_mean_speed_error_pct", c.loso_signed}});
  nlohmann::json j{{"cases", cases},     {"sources", sources},         {"overall_mape_pct", r.overall_mape},
                   {"ok", r.ok()},       {"not_expressible", skipped}, {"cells", cells}};
  if (const BandCoverage b = band_coverage(r, loso); b.sources > 0) {
    auto part = [](const BandCoverage::Part& p) {
      return nlohmann::json{{"sources", p.sources}, {"runs", p.runs}, {"covered", p.covered},
                            {"mean_width_pct", p.mean_width}};
    };
    j["band_coverage"] = {{"sources", b.sources},      {"runs", b.runs},
                          {"covered", b.covered},      {"mean_width_pct", b.mean_width},
                          {"inside_runs", part(b.inside)}, {"beyond_runs", part(b.beyond)},
                          {"beyond_widening", kBandBeyondWidening}, {"beyond_runs_bare_band", part(b.beyond_bare)}};
    nlohmann::json per = nlohmann::json::array();
    for (const auto& s : b.per_source) per.push_back({{"source", s.source}, {"runs", s.runs}, {"covered", s.covered}});
    j["band_coverage"]["per_source"] = per;
  }
  if (!stale.empty()) j["loso_stale"] = stale;
  return j;
}

// The memory model against the runs that ran: each fitted on its GPUs, so a
// plan the model puts above the capacity is a memory-model error (or a misread
// row), whatever its time error.
void print_memory_check(const ValidationReport& r, const Widths& w) {
  std::map<std::string, const ValidationCase*> runs;  // one per run (a run's time and MFU are two cases)
  for (const auto& c : r.cases)
    if (c.memory_fraction > 0) runs.emplace(c.source + "|" + c.id, &c);
  if (runs.empty()) return;
  std::vector<const ValidationCase*> over;
  for (const auto& [key, c] : runs)
    if (c->memory_fraction > 1.0) over.push_back(c);
  std::printf("memory: %zu of %zu runs that ran are predicted above their GPU's capacity%s\n", over.size(),
              runs.size(), over.empty() ? "" : " (the memory model, or ztune's reading of the row, is wrong there):");
  for (const auto* c : over) {
    const std::string plan = c->detail.substr(0, c->detail.find(" ["));  // the assumptions are listed above
    std::printf("  %-*s %-*s %5.0f%% of the GPU  %s\n", w.source, c->source.c_str(), w.id, c->id.c_str(),
                100.0 * c->memory_fraction, plan.c_str());
  }
}

// Source-balanced figures over the time sources: every source counts once.
void print_balance(const ValidationReport& r, const std::string& dir) {
  const Widths w = widths_of(r);
  std::string stale;
  const nlohmann::json loso = loso_of(dir, &stale);
  std::printf("\n%-6s %-10s %7s %6s %12s %12s %12s %12s\n", "GPU", "engine", "sources", "runs", "in-sample %",
              "speed err %", "LOSO MAPE %", "speed err %");
  for (const auto& c : cell_summaries(r, loso)) {
    std::printf("%-6s %-10s %7d %6d %12.2f %+12.2f ", c.family.c_str(), c.engine.c_str(), c.sources, c.runs,
                c.in_sample_mape, c.in_sample_signed);
    if (c.loso_runs > 0)
      std::printf("%12.2f %+12.2f\n", c.loso_mape, c.loso_signed);
    else
      std::printf("%12s %12s\n", "-", "-");
  }
  double mape = 0, sgn = 0;
  int n = 0;
  for (const auto& s : r.sources) {
    if (s.cases == 0 || s.engine.empty() || s.name.find("Fig") != std::string::npos) continue;
    mape += s.mape;
    sgn += s.mean_signed_pct;
    ++n;
  }
  if (n > 0)
    std::printf("time sources with runs: %d; source-balanced in-sample MAPE %.2f%%, mean speed error %+.2f%% (> 0: "
                "ztune too fast)\n",
                n, mape / n, sgn / n);
  if (loso.contains("sources") && loso["sources"].is_object()) {
    double lm = 0, ls = 0, worst = 0;
    std::string worst_name;
    int ln = 0;
    for (const auto& [name, v] : loso["sources"].items()) {
      if (!v.is_object() || !v.contains("loso_mape_pct") || !v["loso_mape_pct"].is_number()) continue;
      const double m = v["loso_mape_pct"].get<double>();
      lm += m;
      ls += v.value("loso_mean_signed_pct", 0.0);
      if (m > worst) worst = m, worst_name = name;
      ++ln;
    }
    if (ln > 0)
      std::printf("leave-one-source-out (data/validation/loso.json): source-balanced MAPE %.2f%%, mean speed error "
                  "%+.2f%%, worst source %s %.1f%%\n",
                  lm / ln, ls / ln, worst_name.c_str(), worst);
  }
  // The "80% likely" band predict prints, judged as it is used: on a source
  // it has not seen.
  if (const BandCoverage b = band_coverage(r, loso); b.sources > 0) {
    std::printf("error band (\"80%% likely\"), each source left out of it: %.1f%% of the source's runs inside its "
                "cell's band (source-balanced over %d sources, %d runs; mean width %.1f points of the predicted time)\n",
                100 * b.covered, b.sources, b.runs, b.mean_width);
    // Runs beyond the span of their cell's other sources' runs are an
    // extrapolation for that band: predict and search widen it there.
    std::printf("  inside the span of the cell's other runs: %.1f%% (%d sources, %d runs); beyond it: %.1f%% with "
                "the band widened %gx (%.1f%% without; %d sources, %d runs)\n",
                100 * b.inside.covered, b.inside.sources, b.inside.runs, 100 * b.beyond.covered, kBandBeyondWidening,
                100 * b.beyond_bare.covered, b.beyond.sources, b.beyond.runs);
    // Where it misses: the sources with less than half their runs inside,
    // whose setups (an engine's mechanism the others lack) a plan like them
    // should not trust the band for.
    std::string missed;
    for (const auto& s : b.per_source)
      if (s.covered < 0.5)
        missed += (missed.empty() ? "" : ", ") + s.source + " " + std::to_string(std::lround(100 * s.covered)) + "% of " +
                  std::to_string(s.runs);
    if (!missed.empty()) std::printf("  sources the band held less than half of, left out: %s\n", missed.c_str());
  }
  if (!stale.empty()) std::printf("note: %s\n", stale.c_str());
  if (!r.skipped.empty()) {
    std::printf("\n%zu published runs ztune cannot express (not predicted):\n", r.skipped.size());
    for (const auto& k : r.skipped)
      std::printf("  %-*s %-*s %s\n", w.source, k.source.c_str(), w.id, k.id.c_str(), k.reason.c_str());
  }
  std::size_t predicted = 0, assumed = 0;
  for (const auto& c : r.cases) predicted += c.metric == "tokens_per_s_per_gpu" ? 1 : 0;
  for (const auto& c : r.cases) assumed += c.assumed.empty() ? 0 : 1;
  if (assumed > 0) {
    std::printf("\n%zu runs predicted with what the row does not publish assumed:\n", assumed);
    for (const auto& c : r.cases)
      if (!c.assumed.empty())
        std::printf("  %-*s %-*s %s\n", w.source, c.source.c_str(), w.id, c.id.c_str(), c.assumed.c_str());
  }
  std::printf("coverage of engine_runs.json: %zu runs predicted, %zu not expressible\n", predicted, r.skipped.size());
  print_memory_check(r, w);
}

void print_case(const ValidationCase& c, const Widths& w) {
  std::printf("%-*s %-*s %-26s %12.5g %12.5g %+8.2f %7.2f %s\n", w.source, c.source.c_str(), w.id, c.id.c_str(),
              c.metric.c_str(),
              c.published, c.predicted, c.error_pct(), c.tolerance_pct, c.ok() ? "" : "FAIL");
}

void print_report(const ValidationReport& r, const ValidateFlags& f) {
  const Widths w = widths_of(r);
  std::printf("%-*s %-*s %-26s %12s %12s %8s %7s\n", w.source, "source", w.id, "case", "metric", "published",
              "predicted", "Δ%", "tol%");
  for (const auto& s : r.sources) {
    std::vector<const ValidationCase*> rows;
    for (const auto& c : r.cases)
      if (c.source == s.name) rows.push_back(&c);
    const bool long_source = rows.size() > 40 && !f.all;
    if (long_source) {
      // Print the worst cases only (by |Δ%|), and every failing one.
      std::sort(rows.begin(), rows.end(),
                [](const ValidationCase* a, const ValidationCase* b) { return std::abs(a->error_pct()) > std::abs(b->error_pct()); });
      std::size_t shown = 0;
      for (const auto* c : rows) {
        if (shown >= static_cast<std::size_t>(f.worst) && c->ok()) break;
        print_case(*c, w);
        ++shown;
      }
      std::printf("%-*s (%zu worst of %zu cases shown; --all prints every case)\n", w.source, s.name.c_str(), shown,
                  rows.size());
    } else {
      for (const auto* c : rows) print_case(*c, w);
    }
  }
  std::printf("\n%-*s %6s %7s %10s %10s %10s  %s\n", w.source, "source", "cases", "failed", "MAPE %", "max|Δ|%",
              "target %", "description");
  for (const auto& s : r.sources)
    std::printf("%-*s %6d %7d %10.2f %10.2f %10.2f  %s%s\n", w.source, s.name.c_str(), s.cases, s.failed, s.mape,
                s.max_abs_pct, s.mape_tolerance_pct, s.ok() ? "" : "[FAIL] ", s.description.c_str());
  std::printf("%-*s %6zu %7s %10.2f\n", w.source, "overall", r.cases.size(), "", r.overall_mape);
  print_balance(r, f.dir);
  std::printf("%s\n", r.ok() ? "validation: every case within its tolerance"
                             : "validation: FAILED (a case or a source MAPE exceeds its stated tolerance)");
}

}  // namespace

Command add_validate(CLI::App& root) {
  auto f = std::make_shared<ValidateFlags>();
  auto* app = root.add_subcommand("validate",
                                  "Predict the published runs of data/validation/ and report the errors, and the "
                                  "runs the memory model says could not have fitted");
  app->add_option("--dir", f->dir, "Validation directory (default: <data>/validation)")
      ->check(GivenPath)
      ->check(ExistingDirectory);
  app->add_option("--profile", f->profile, "Hardware profile file used for every case instead of the defaults")
      ->check(GivenPath);
  app->add_option("--source", f->source, "Only sources whose name contains this");
  app->add_option("--engine", f->engine,
                  "Only the published runs of this engine (megatron, deepspeed, fsdp); ztune's own executor has "
                  "no published GPU runs yet")
      ->check(CLI::IsMember({"megatron", "deepspeed", "fsdp", "ztune"}));
  app->add_option("--worst", f->worst, "Cases shown per long source (worst first)")
      ->check(integer_in(0, std::numeric_limits<int>::max(), "a case count"));
  app->add_flag("--all", f->all, "Print every case of every source");
  app->add_flag("--json", f->json, "Print one JSON object");
  app->add_flag("--simulate", f->simulate,
                "Predict iteration times with the discrete-event simulator; also report the analytical errors");
  return {app, [f]() {
            ValidationOptions opt;
            std::optional<HardwareProfile> profile;
            if (!f->profile.empty()) {
              profile = load_profile(f->profile);
              opt.profile = &*profile;
            }
            opt.only = f->source;
            if (f->engine == "ztune")
              throw InputError("--engine ztune: no published run of ztune's own executor on a GPU exists yet (its "
                               "profile, data/engines/ztune.json, borrows DeepSpeed's host and overlap figures "
                               "and prices its kernels on the 16-bit values it stores); validate --engine deepspeed checks the figures "
                               "it borrows");
            opt.engine = f->engine;
            const std::string dir = f->dir.empty() ? default_validation_dir() : f->dir;
            const PublishedRunsReport runs = validate_published_runs(dir, opt, f->simulate);
            const ValidationReport& r = runs.report;
            const std::optional<ValidationReport>& analytical = runs.analytical;
            // A validation that checked nothing has not passed: a --source or
            // --engine that matches no source, or a directory whose sources
            // select no run, is said, not called "within tolerance".
            if (r.cases.empty())
              throw InputError(std::string("no published run was checked: ") +
                               (!f->source.empty() ? "--source \"" + f->source + "\" matches no case"
                                : !f->engine.empty() ? "--engine " + f->engine + " matches no case"
                                                     : "the sources of " + dir + "/validation.json select no run"));
            if (f->json) {
              nlohmann::json j = report_json(r, f->dir);
              if (analytical) add_analytical(j, r, *analytical);
              std::cout << j.dump(2) << "\n";
            } else {
              print_report(r, *f);
              if (analytical) print_comparison(r, *analytical);
            }
            return r.ok() ? kExitOk : kExitInfeasible;
          }};
}

}  // namespace ztune::cli
