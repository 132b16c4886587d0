// ztune validate: predict every published run of data/validation/ and print
// Published / Predicted / Δ% per case with its source, MAPE per source and
// overall (STYLE.md #13). Exit 1 when a case exceeds its stated tolerance or a
// source's MAPE exceeds its target; 2 on bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "ztune/model/hardware_profile.hpp"
#include "ztune/model/validation.hpp"
#include "ztune/simulator/simulate.hpp"

namespace ztune::cli {

namespace {

struct ValidateFlags {
  std::string dir;
  std::string profile;
  std::string source;
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

void print_comparison(const ValidationReport& simulated, const ValidationReport& ana) {
  std::printf("\n%-20s %6s %14s %14s %16s %16s\n", "source", "cases", "analytical %", "simulated %",
              "analytical max%", "simulated max%");
  for (std::size_t i = 0; i < simulated.sources.size() && i < ana.sources.size(); ++i)
    std::printf("%-20s %6d %14.2f %14.2f %16.2f %16.2f\n", simulated.sources[i].name.c_str(), simulated.sources[i].cases,
                ana.sources[i].mape, simulated.sources[i].mape, ana.sources[i].max_abs_pct, simulated.sources[i].max_abs_pct);
  std::printf("(MAPE per source: the analytical estimate vs the discrete-event simulator; the table above is the "
              "simulator's)\n");
}

nlohmann::json report_json(const ValidationReport& r) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& c : r.cases)
    cases.push_back({{"source", c.source}, {"id", c.id}, {"metric", c.metric}, {"detail", c.detail},
                     {"gpu", c.gpu}, {"engine", c.engine}, {"published", c.published}, {"predicted", c.predicted},
                     {"error_pct", c.error_pct()}, {"optimism_pct", c.optimism_pct()},
                     {"tolerance_pct", c.tolerance_pct}, {"ok", c.ok()}});
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& s : r.sources)
    sources.push_back({{"name", s.name}, {"description", s.description}, {"kind", s.kind}, {"engine", s.engine},
                       {"cases", s.cases}, {"failed", s.failed}, {"mape_pct", s.mape},
                       {"mean_signed_pct", s.mean_signed_pct}, {"max_abs_error_pct", s.max_abs_pct},
                       {"mape_tolerance_pct", s.mape_tolerance_pct}, {"ok", s.ok()}});
  return {{"cases", cases}, {"sources", sources}, {"overall_mape_pct", r.overall_mape}, {"ok", r.ok()}};
}

void print_case(const ValidationCase& c) {
  std::printf("%-20s %-46s %-26s %12.5g %12.5g %+8.2f %7.2f %s\n", c.source.c_str(), c.id.c_str(), c.metric.c_str(),
              c.published, c.predicted, c.error_pct(), c.tolerance_pct, c.ok() ? "" : "FAIL");
}

void print_report(const ValidationReport& r, const ValidateFlags& f) {
  std::printf("%-20s %-46s %-26s %12s %12s %8s %7s\n", "source", "case", "metric", "published", "predicted", "Δ%",
              "tol%");
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
        print_case(*c);
        ++shown;
      }
      std::printf("%-20s (%zu worst of %zu cases shown; --all prints every case)\n", s.name.c_str(), shown,
                  rows.size());
    } else {
      for (const auto* c : rows) print_case(*c);
    }
  }
  std::printf("\n%-20s %6s %7s %10s %10s %10s  %s\n", "source", "cases", "failed", "MAPE %", "max|Δ|%", "target %",
              "description");
  for (const auto& s : r.sources)
    std::printf("%-20s %6d %7d %10.2f %10.2f %10.2f  %s%s\n", s.name.c_str(), s.cases, s.failed, s.mape,
                s.max_abs_pct, s.mape_tolerance_pct, s.ok() ? "" : "[FAIL] ", s.description.c_str());
  std::printf("%-20s %6zu %7s %10.2f\n", "overall", r.cases.size(), "", r.overall_mape);
  std::printf("%s\n", r.ok() ? "validation: every case within its tolerance"
                             : "validation: FAILED (a case or a source MAPE exceeds its stated tolerance)");
}

}  // namespace

Command add_validate(CLI::App& root) {
  auto f = std::make_shared<ValidateFlags>();
  auto* app = root.add_subcommand("validate", "Predict the published runs of data/validation/ and report the errors");
  app->add_option("--dir", f->dir, "Validation directory (default: <data>/validation)");
  app->add_option("--profile", f->profile, "Hardware profile file used for every case instead of the defaults");
  app->add_option("--source", f->source, "Only sources whose name contains this");
  app->add_option("--worst", f->worst, "Cases shown per long source (worst first)")->check(NonNegative);
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
            const std::string dir = f->dir.empty() ? default_validation_dir() : f->dir;
            std::optional<ValidationReport> analytical;
            if (f->simulate) {
              analytical = run_validation(dir, opt);
              opt.time = sim::simulate_time;
            }
            const ValidationReport r = run_validation(dir, opt);
            if (f->json) {
              nlohmann::json j = report_json(r);
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
