#include "ztune/validation/accuracy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <tuple>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/text.hpp"

namespace fs = std::filesystem;

namespace ztune {

namespace {

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.1f%%" : "%.0f%%", v);
  return buf;
}

std::string signed_pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", v);
  return buf;
}

using CaseKey = std::pair<std::string, std::string>;  // (source, id)

// The left-out errors of loso.json by (source, id): optimism and |error|.
struct LosoError {
  double abs_pct = 0;
  double optimism_pct = 0;
};
std::map<CaseKey, LosoError> loso_cases(const nlohmann::json& loso) {
  std::map<CaseKey, LosoError> out;
  if (!loso.is_object() || !loso.contains("cases") || !loso["cases"].is_array()) return out;
  for (const auto& c : loso["cases"]) {
    if (!c.is_object() || !c.contains("source") || !c.contains("id") || !c.contains("loso_error_pct") ||
        !c.contains("loso_optimism_pct") || !c["loso_error_pct"].is_number() || !c["loso_optimism_pct"].is_number() ||
        !c["source"].is_string() || !c["id"].is_string())
      continue;
    const double e = c["loso_error_pct"].get<double>();
    out[{c["source"].get<std::string>(), c["id"].get<std::string>()}] = {e < 0 ? -e : e,
                                                                         c["loso_optimism_pct"].get<double>()};
  }
  return out;
}

// Source-balanced means over the time cases `keep` selects.
template <typename Keep, typename Value>
void balanced(const ValidationReport& r, Keep keep, Value value, int& sources, int& runs, double& mape, double& sgn) {
  std::map<std::string, std::pair<double, double>> sum;  // source -> (Σ|e|, Σ optimism)
  std::map<std::string, int> n;
  for (const auto& c : r.cases) {
    if (!is_time_metric(c.metric) || c.gpu.empty() || !keep(c)) continue;
    double abs_e = 0, opt = 0;
    if (!value(c, abs_e, opt)) continue;
    sum[c.source].first += abs_e;
    sum[c.source].second += opt;
    ++n[c.source];
  }
  sources = static_cast<int>(sum.size());
  runs = 0;
  mape = sgn = 0;
  for (const auto& [s, v] : sum) {
    mape += v.first / n[s];
    sgn += v.second / n[s];
    runs += n[s];
  }
  if (sources > 0) {
    mape /= sources;
    sgn /= sources;
  }
}

// The q-quantile of weighted values (q in [0, 1]; weights > 0): the smallest
// value whose cumulative weight reaches q of the total.
double weighted_quantile(std::vector<std::pair<double, double>> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double total = 0;
  for (const auto& [x, w] : v) total += w;
  double cum = 0;
  for (const auto& [x, w] : v) {
    cum += w;
    if (cum >= q * total - 1e-12) return x;
  }
  return v.back().first;
}

}  // namespace

namespace {
// A cell's own band, % each side: its 10th-90th percentile widened to at
// least ± its mean error (time_factors; the pooled band is every source's).
std::pair<double, double> widened_band(const CrossValidated& cv) {
  return {std::min(cv.optimism_p10, -cv.mape), std::max(cv.optimism_p90, cv.mape)};
}
}  // namespace

std::pair<double, double> CrossValidated::time_factors() const {
  auto [lo, hi] = widened_band(*this);
  if (scope != CellScope::every && (pooled_lo != 0 || pooled_hi != 0)) {
    const double k = kBandPriorSources, n = sources;
    lo = (n * lo + k * pooled_lo) / (n + k);
    hi = (n * hi + k * pooled_hi) / (n + k);
  }
  return {1 + lo / 100, 1 + hi / 100};
}

std::pair<double, double> widened_factors(std::pair<double, double> factors, double widening) {
  return {std::max(0.05, 1 + (factors.first - 1) * widening), 1 + (factors.second - 1) * widening};
}

std::string profiles_digest() {
  // The same files, in the same order, as fit_profiles.py digest().
  std::uint64_t h = 0xcbf29ce484222325ull;
  const fs::path data = data_dir();
  std::vector<fs::path> files;
  for (const char* g : {"v100", "a100", "h100", "h200"}) files.push_back(data / "profiles" / (std::string(g) + ".json"));
  for (const char* e : {"megatron", "deepspeed", "fsdp", "ztune"})
    files.push_back(data / "engines" / (std::string(e) + ".json"));
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    for (std::istreambuf_iterator<char> it(in), end; it != end; ++it) {
      h ^= static_cast<unsigned char>(*it);
      h *= 0x100000001b3ull;
    }
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string loso_problem(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("cases") || !j["cases"].is_array())
    return "$.cases: expected an array of left-out errors";
  for (std::size_t i = 0; i < j["cases"].size(); ++i) {
    const auto& c = j["cases"][i];
    const std::string at = "$.cases[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("loso_optimism_pct") || !c["loso_optimism_pct"].is_number())
      return at + ": expected an object with a numeric loso_optimism_pct";
    // A measured time is positive, so measured / predicted − 1 is above −1:
    // below it the band would come out negative.
    if (const double o = c["loso_optimism_pct"].get<double>(); !(o > -100) || !std::isfinite(o)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", o);
      return at + ".loso_optimism_pct: " + buf + " is impossible (measured / predicted time − 1, in %: expected above -100)";
    }
  }
  return "";
}

nlohmann::json read_loso(std::string* stale) {
  const fs::path file = fs::path(default_validation_dir()) / "loso.json";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    if (stale != nullptr) *stale = "no " + file.string() + " (run data/validation/fit_profiles.py --loso)";
    return nlohmann::json::object();
  }
  nlohmann::json j = read_json_file(file.string());
  // A damaged file yields no band, said why (loso_problem).
  const std::string damaged = loso_problem(j);
  if (!damaged.empty()) {
    if (stale != nullptr)
      *stale = file.string() + ": " + damaged + "; no error band is given (rerun data/validation/fit_profiles.py --loso)";
    return nlohmann::json::object();
  }
  if (stale != nullptr) {
    const bool fresh = j.is_object() && j.contains("profiles_digest") && j["profiles_digest"].is_string() &&
                       j["profiles_digest"].get<std::string>() == profiles_digest();
    if (!fresh)
      *stale = file.string() +
               " was computed for other profiles than data/profiles and data/engines hold now (rerun "
               "data/validation/fit_profiles.py --loso)";
  }
  return j;
}

CrossValidated cross_validated(const ValidationReport& r, const nlohmann::json& loso, const std::string& family,
                               const std::string& engine) {
  const auto errors = loso_cases(loso);
  auto value = [&](const ValidationCase& c, double& abs_e, double& opt) {
    auto it = errors.find({c.source, c.id});
    if (it == errors.end()) return false;
    abs_e = it->second.abs_pct;
    opt = it->second.optimism_pct;
    return true;
  };
  CrossValidated cv;
  cv.family = family;
  cv.engine = engine;
  // ztune's own engine has no published GPU runs: it borrows DeepSpeed's fitted
  // host and overlap figures (data/engines/ztune.json), so DeepSpeed's error is
  // the nearest measured one. Its fp32 storage is priced from its code, unmeasured.
  const std::string priced = engine == "ztune" ? "deepspeed" : engine;
  struct Try {
    std::string cell;
    CellScope scope;
  };
  const Try tries[] = {
      {family + "/" + priced + (engine == "ztune" ? " (borrowed by ztune's executor, unmeasured on GPUs)" : ""),
       CellScope::gpu_engine},
      {family + "/any engine", CellScope::gpu},
      {"any GPU/" + priced, CellScope::engine},
      {"every source", CellScope::every},
  };
  auto measure = [&](std::size_t i) {
    const Try& t = tries[i];
    CrossValidated m = cv;
    balanced(
        r, [&](const ValidationCase& c) { return in_cell(c, t.scope, family, priced); }, value, m.sources, m.runs, m.mape,
        m.mean_signed);
    if (m.runs == 0) return m;
    m.cell = t.cell;
    m.fallback = i > 0;
    m.scope = t.scope;
    // The percentiles over the same runs, each source weighted as in the means.
    std::map<std::string, int> per_source;
    std::vector<std::pair<const ValidationCase*, double>> kept;
    for (const auto& c : r.cases) {
      double abs_e = 0, opt = 0;
      if (!is_time_metric(c.metric) || c.gpu.empty() || !in_cell(c, t.scope, family, priced) || !value(c, abs_e, opt)) continue;
      ++per_source[c.source];
      kept.emplace_back(&c, opt);
    }
    std::vector<std::pair<double, double>> weighted;
    for (const auto& [c, opt] : kept) weighted.emplace_back(opt, 1.0 / per_source[c->source]);
    m.optimism_p10 = weighted_quantile(weighted, 0.1);
    m.optimism_p90 = weighted_quantile(weighted, 0.9);
    return m;
  };
  // Every source's band, which a cell of few sources is drawn toward
  // (time_factors).
  const CrossValidated pooled = measure(3);
  auto with_pool = [&](CrossValidated m) {
    if (!pooled.empty()) std::tie(m.pooled_lo, m.pooled_hi) = widened_band(pooled);
    return m;
  };
  if (CrossValidated own = measure(0); !own.empty()) return with_pool(own);
  // Nothing measured on this GPU by this engine: the GPU's other engines and
  // the engine's other GPUs each miss half of what the cell would measure, so
  // the wider of the two is the band (DeepSpeed on H100 had borrowed H100's
  // Megatron and FSDP runs, 6.9 %, where DeepSpeed's own left-out error is 11 %
  // on A100 and V100).
  const CrossValidated same_gpu = measure(1), same_engine = measure(2);
  if (!same_gpu.empty() || !same_engine.empty())
    return with_pool(same_gpu.empty()                                            ? same_engine
                     : same_engine.empty() || same_gpu.mape >= same_engine.mape ? same_gpu
                                                                                 : same_engine);
  return with_pool(pooled);
}

BandCoverage band_coverage(const ValidationReport& r, const nlohmann::json& loso, double beyond_widening,
                           const CellRuns* only) {
  const auto errors = loso_cases(loso);
  const std::string priced = only == nullptr ? "" : only->engine == "ztune" ? "deepspeed" : only->engine;
  std::map<std::string, std::vector<const ValidationCase*>> by_source;
  for (const auto& c : r.cases)
    if (is_time_metric(c.metric) && !c.gpu.empty() && errors.count({c.source, c.id}) > 0 &&
        (only == nullptr || in_cell(c, only->scope, only->family, priced)))
      by_source[c.source].push_back(&c);
  BandCoverage out;
  // One source's runs in a part (all, inside, beyond): adds its shares.
  struct Tally {
    double inside = 0, width = 0;
    int judged = 0;
    void add(bool in, double w) {
      inside += in ? 1 : 0;
      width += w;
      ++judged;
    }
  };
  auto fold = [](auto& part, const Tally& t) {
    if (t.judged == 0) return;
    ++part.sources;
    part.runs += t.judged;
    part.covered += t.inside / t.judged;
    part.mean_width += t.width / t.judged;
  };
  for (const auto& [source, runs] : by_source) {
    // The left-out errors of every other source: this one unseen.
    nlohmann::json others{{"cases", nlohmann::json::array()}};
    for (const auto& c : loso.at("cases"))
      if (!(c.is_object() && c.contains("source") && c["source"].is_string() && c["source"].get<std::string>() == source))
        others["cases"].push_back(c);
    // (family, engine) → factors and what the other sources' runs span; none
    // when no other source gives a band.
    struct Band {
      std::pair<double, double> factors;
      Envelope span;
    };
    std::map<std::pair<std::string, std::string>, std::optional<Band>> bands;
    Tally all, inside, beyond, beyond_bare;
    for (const ValidationCase* c : runs) {
      const std::pair<std::string, std::string> cell{gpu_family(c->gpu), c->engine};
      auto it = bands.find(cell);
      if (it == bands.end()) {
        const CrossValidated cv = cross_validated(r, others, cell.first, cell.second);
        std::optional<Band> b;
        if (!cv.empty()) b = Band{cv.time_factors(), envelope_without(r, cell.first, cell.second, cv.scope, source)};
        it = bands.emplace(cell, b).first;
      }
      if (!it->second) continue;
      const bool past = beyond_envelope(it->second->span, c->shape);
      const double opt = 1 + errors.at({c->source, c->id}).optimism_pct / 100;
      auto judge = [opt](std::pair<double, double> f, Tally& t) {
        t.add(f.first <= opt && opt <= f.second, 100 * (f.second - f.first));
      };
      const auto band = widened_factors(it->second->factors, past ? beyond_widening : 1.0);
      judge(band, all);
      judge(band, past ? beyond : inside);
      if (past) judge(it->second->factors, beyond_bare);
    }
    if (all.judged == 0) continue;  // the only source: nothing to build its band from
    out.per_source.push_back({source, all.judged, all.inside / all.judged});
    fold(out, all);
    fold(out.inside, inside);
    fold(out.beyond, beyond);
    fold(out.beyond_bare, beyond_bare);
  }
  auto average = [](auto& part) {
    if (part.sources == 0) return;
    part.covered /= part.sources;
    part.mean_width /= part.sources;
  };
  average(out);
  average(out.inside);
  average(out.beyond);
  average(out.beyond_bare);
  return out;
}

std::vector<CellSummary> cell_summaries(const ValidationReport& r, const nlohmann::json& loso) {
  const auto errors = loso_cases(loso);
  std::set<std::pair<std::string, std::string>> cells;
  for (const auto& c : r.cases)
    if (is_time_metric(c.metric) && !c.gpu.empty() && !c.engine.empty()) cells.insert({gpu_family(c.gpu), c.engine});
  std::vector<CellSummary> out;
  for (const auto& [family, engine] : cells) {
    CellSummary s;
    s.family = family;
    s.engine = engine;
    // Captures s's copies: clang before 16 cannot capture structured bindings.
    auto keep = [&s](const ValidationCase& c) { return gpu_family(c.gpu) == s.family && c.engine == s.engine; };
    balanced(
        r, keep,
        [](const ValidationCase& c, double& abs_e, double& opt) {
          abs_e = c.error_pct() < 0 ? -c.error_pct() : c.error_pct();
          opt = c.optimism_pct();
          return true;
        },
        s.sources, s.runs, s.in_sample_mape, s.in_sample_signed);
    int loso_sources = 0;
    balanced(
        r, keep,
        [&](const ValidationCase& c, double& abs_e, double& opt) {
          auto it = errors.find({c.source, c.id});
          if (it == errors.end()) return false;
          abs_e = it->second.abs_pct;
          opt = it->second.optimism_pct;
          return true;
        },
        loso_sources, s.loso_runs, s.loso_mape, s.loso_signed);
    out.push_back(s);
  }
  return out;
}

Accuracy accuracy_for(const Cluster& c, const std::string& engine) {
  Accuracy a;
  a.family = c.device_kind == DeviceKind::cpu ? "cpu" : gpu_family(c.node.gpu.name);
  a.gpu = c.device_kind == DeviceKind::cpu ? "" : c.node.gpu.name;
  try {
    const ValidationReport r = run_validation(default_validation_dir());
    a.sources = time_accuracy(r, c.node.gpu.name);
    if (c.device_kind != DeviceKind::cpu) {
      const nlohmann::json loso = read_loso(&a.stale);
      a.cv = cross_validated(r, loso, a.family, engine);
      // The runs the band was measured on are the runs a plan is checked against.
      a.envelope = a.cv.empty() ? envelope_of(r, a.family, engine) : envelope_of(r, a.family, engine, a.cv.scope);
      if (!a.cv.empty()) {
        const CellRuns cell{a.family, engine, a.cv.scope};
        for (const auto& s : band_coverage(r, loso, kBandBeyondWidening, &cell).per_source)
          if (s.covered < 0.5) a.band_misses.push_back(s);
      }
    }
  } catch (const std::exception& e) {
    a.problem = e.what();
  }
  return a;
}

std::string accuracy_line(const Accuracy& a, const std::string& profile,
                          const std::optional<HardwareProfile>& catalog_profile) {
  if (!a.problem.empty()) return "accuracy: the validation data could not be read (" + a.problem + ")";
  std::string s;
  if (a.sources.empty()) {
    s = "accuracy: no published training time measured on " + a.family +
        " is in data/validation, so this time is not checked against a real run on it (ztune validate lists what "
        "is; ztune calibrate fits a profile to your own runs)";
    // A profile the user brought for it (a copy of another GPU's) is named:
    // its efficiencies are that GPU's, unchecked on this one.
    if (!catalog_profile || profile != catalog_profile->name) s += "; this prediction used profile " + profile;
  } else {
    // A default profile fitted on these runs makes the figures in-sample, which the line says.
    s = "accuracy on " + a.family + " (ztune validate: the same cost model against published runs";
    if (catalog_profile && catalog_profile->source.find("data/validation") != std::string::npos)
      s += ", which the default profile " + catalog_profile->name + " was fitted on";
    if (!catalog_profile || profile != catalog_profile->name) s += "; this prediction used " + profile;
    s += "): ";
    for (std::size_t i = 0; i < a.sources.size(); ++i) {
      const SourceSummary& src = a.sources[i];
      if (i > 0) s += ", ";
      s += src.name + " " + pct(src.mape) + " MAPE over " + grouped(src.cases) + (src.cases == 1 ? " run" : " runs");
      if (src.max_abs_pct > 2 * src.mape && src.max_abs_pct >= 10) s += " (worst " + pct(src.max_abs_pct) + ")";
    }
  }
  if (!a.cv.empty()) {
    s += "\ncross-validated on " + a.cv.cell + ": " + pct(a.cv.mape) + " (leave-one-source-out over " +
         std::to_string(a.cv.sources) + (a.cv.sources == 1 ? " source, " : " sources, ") + grouped(a.cv.runs) +
         " runs; mean speed error " + signed_pct(a.cv.mean_signed) + ", > 0 is too fast)";
    if (a.cv.fallback) s += "; nothing measured on " + a.family + "/" + a.cv.engine + " itself";
    // Where the band has missed in this cell: a plan like those runs may miss it too.
    if (const std::string missed = band_misses_list(a); !missed.empty())
      s += "; left out, its band held under half the runs of " + missed;
  }
  if (!a.stale.empty()) s += "\nnote: " + a.stale;
  return s;
}

std::string band_misses_list(const Accuracy& a) {
  std::string s;
  for (const auto& m : a.band_misses)
    s += (s.empty() ? "" : ", ") + m.source + " (" + grouped(std::round(m.covered * m.runs)) + " of " +
         grouped(m.runs) + ")";
  return s;
}

std::string runs_fit_line(const HardwareProfile& used) {
  if (!used.runs_fit) return "";
  const auto& f = *used.runs_fit;
  std::string s = "your runs: profile " + used.name + " was fitted on " +
                  (f.runs == 1 ? std::string("one") : std::to_string(f.runs)) + " of your runs; ";
  // They ran ztune's executor: another engine's host costs and overlap are
  // its engine profile's, which they did not measure.
  if (!used.engine.name.empty() && used.engine.name != "ztune")
    return s + "they ran ztune's executor, and this prediction prices engine " + used.engine.name +
           ", whose host costs and overlap they did not measure";
  if (f.held_out_error)
    return s + "each left out of the fit was predicted within " + pct(100 * *f.held_out_error) +
           " on average (" + pct(100 * f.in_sample_error) + " in sample)";
  return s + "it predicts that run within " + pct(100 * f.in_sample_error) +
         ", in sample: one run cannot be left out, so how it predicts other plans is not measured (run and "
         "calibrate on a second plan to measure it)";
}

nlohmann::json runs_fit_json(const HardwareProfile& used) {
  return used.runs_fit ? runs_fit_to_json(*used.runs_fit) : nlohmann::json(nullptr);
}

namespace {
// How the cell's band was weighed with every source's (time_factors), said
// beside it: ", weighed 3:3 with every source's band".
std::string drawn_toward_pool(const CrossValidated& cv) {
  if (cv.scope == CellScope::every || (cv.pooled_lo == 0 && cv.pooled_hi == 0)) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, " (%d source%s), weighed %d:%g with every source's band", cv.sources,
                cv.sources == 1 ? "" : "s", cv.sources, kBandPriorSources);
  return buf;
}
}  // namespace

std::string error_band_line(const Accuracy& a, double iteration_s, double tokens_per_s, double widening) {
  if (a.cv.empty() || !(iteration_s > 0)) return "";
  const auto bare = a.cv.time_factors();
  const auto [lo, hi] = widened_factors(bare, widening);
  char buf[256];
  std::snprintf(buf, sizeof buf, "error band: iteration %.3g s, 80%% likely %.3g-%.3g s; ", iteration_s,
                iteration_s * lo, iteration_s * hi);
  std::string s = std::string(buf) + grouped(tokens_per_s) + " tokens/s, 80% likely " + grouped(tokens_per_s / hi) +
                  "-" + grouped(tokens_per_s / lo) + " (the measured time was " + signed_pct(100 * (bare.first - 1)) +
                  " to " + signed_pct(100 * (bare.second - 1)) +
                  " of the prediction for 80% of the runs left out of the fit, cross-validated on " + a.cv.cell +
                  drawn_toward_pool(a.cv);
  if (widening != 1) {
    std::snprintf(buf, sizeof buf, "; widened %gx to ", widening);
    s += buf + signed_pct(100 * (lo - 1)) + " to " + signed_pct(100 * (hi - 1)) +
         " for a plan beyond the runs it was checked on, where left-out runs fell outside that band more often";
  }
  return s + ")";
}

nlohmann::json accuracy_json(const Accuracy& a, double iteration_s, double tokens_per_s, double widening) {
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& s : a.sources)
    sources.push_back({{"source", s.name},
                       {"description", s.description},
                       {"cases", s.cases},
                       {"mape_pct", s.mape},
                       {"mean_signed_pct", s.mean_signed_pct},
                       {"max_abs_error_pct", s.max_abs_pct}});
  nlohmann::json j{{"gpu_family", a.family}, {"time_sources", sources}};
  if (!a.cv.empty()) {
    const auto [lo, hi] = widened_factors(a.cv.time_factors(), widening);
    nlohmann::json misses = nlohmann::json::array();
    for (const auto& m : a.band_misses) misses.push_back({{"source", m.source}, {"runs", m.runs}, {"covered", m.covered}});
    j["cross_validated"] = {{"cell", a.cv.cell},
                            {"fallback", a.cv.fallback},
                            {"engine", a.cv.engine},
                            {"sources", a.cv.sources},
                            {"runs", a.cv.runs},
                            {"mape_pct", a.cv.mape},
                            {"mean_speed_error_pct", a.cv.mean_signed},
                            {"optimism_p10_pct", a.cv.optimism_p10},
                            {"optimism_p90_pct", a.cv.optimism_p90},
                            {"pooled_band_pct", {a.cv.pooled_lo, a.cv.pooled_hi}},
                            {"band_pct", {100 * (lo - 1), 100 * (hi - 1)}},
                            {"band_widening", widening},
                            {"band_misses", misses},
                            {"pooled_weight_sources", kBandPriorSources}};
    if (iteration_s > 0) {
      j["band"] = {{"coverage", 0.8},
                   {"iteration_s", {iteration_s * lo, iteration_s * hi}},
                   {"tokens_per_s", {tokens_per_s / hi, tokens_per_s / lo}}};
    }
  }
  if (!a.stale.empty()) j["stale"] = a.stale;
  if (!a.problem.empty()) j["problem"] = a.problem;
  return j;
}

}  // namespace ztune
