// What the published runs behind a prediction's error band span, and where a
// plan lies beyond them (accuracy.hpp). The band is a leave-one-source-out
// error measured on those runs; a plan with a larger model, a longer
// sequence, more GPUs or deeper parallelism than any of them is an
// extrapolation the band does not cover, and predict and search say so.
#include <algorithm>
#include <cstdio>

#include "ztune/validation/accuracy.hpp"
#include "ztune/vocab/text.hpp"

namespace ztune {

namespace {

// How far past the runs' range a plan must lie to be called an extrapolation:
// a tenth, so a run of 2,304 GPUs covers a plan of 2,500.
constexpr double kMargin = 1.1;

void widen(RunShape& lo, RunShape& hi, const RunShape& s) {
  auto span = [](auto& low, auto& high, auto v) {
    low = std::min(low, v);
    high = std::max(high, v);
  };
  span(lo.gpus, hi.gpus, s.gpus);
  span(lo.params, hi.params, s.params);
  span(lo.hidden, hi.hidden, s.hidden);
  span(lo.seq_len, hi.seq_len, s.seq_len);
  span(lo.tp, hi.tp, s.tp);
  span(lo.pp, hi.pp, s.pp);
  span(lo.cp, hi.cp, s.cp);
  span(lo.ulysses, hi.ulysses, s.ulysses);
  hi.features |= s.features;  // hi.features: every mode some run used
}

std::string number(double v) {
  if (v >= 1e9) {
    char buf[32];
    std::snprintf(buf, sizeof buf, v >= 1e11 ? "%.0fB" : v >= 1e10 ? "%.1fB" : "%.2fB", v / 1e9);
    return buf;
  }
  if (v >= 1e6) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0fM", v / 1e6);
    return buf;
  }
  return grouped(v);
}

}  // namespace

Envelope envelope_of(const ValidationReport& r, const std::string& family, const std::string& engine) {
  // The family's runs of the engine (the ztune engine's are DeepSpeed's), else of any engine.
  if (Envelope e = envelope_of(r, family, engine, CellScope::gpu_engine); !e.empty()) return e;
  return envelope_of(r, family, engine, CellScope::gpu);
}

bool in_cell(const ValidationCase& c, CellScope scope, const std::string& family, const std::string& priced) {
  switch (scope) {
    case CellScope::gpu_engine: return gpu_family(c.gpu) == family && c.engine == priced;
    case CellScope::gpu: return gpu_family(c.gpu) == family;
    case CellScope::engine: return c.engine == priced;
    case CellScope::every: break;
  }
  return true;
}

Envelope envelope_of(const ValidationReport& r, const std::string& family, const std::string& engine,
                     CellScope scope) {
  return envelope_without(r, family, engine, scope, "");
}

Envelope envelope_without(const ValidationReport& r, const std::string& family, const std::string& engine,
                          CellScope scope, const std::string& without) {
  const std::string priced = engine == "ztune" ? "deepspeed" : engine;
  Envelope e;
  for (const ValidationCase& c : r.cases) {
    if (!is_time_metric(c.metric) || c.shape.empty() || !in_cell(c, scope, family, priced)) continue;
    if (!without.empty() && c.source == without) continue;
    if (e.runs++ == 0) {
      e.lo = e.hi = c.shape;
    } else {
      widen(e.lo, e.hi, c.shape);
    }
    e.gpus.insert(c.gpu);
  }
  if (e.runs > 0)
    e.cell = scope == CellScope::gpu_engine ? family + "/" + priced
             : scope == CellScope::gpu      ? family
             : scope == CellScope::engine   ? "any GPU/" + priced
                                            : "every";
  return e;
}

namespace {
// The numeric quantities of shape `s` more than kMargin beyond envelope `e`
// (outside_envelope's and beyond_envelope's one list).
std::vector<Extrapolation> numbers_outside(const Envelope& e, const RunShape& s) {
  std::vector<Extrapolation> x;
  auto check = [&](const char* quantity, double value, double lo, double hi) {
    if (value > hi * kMargin || value * kMargin < lo) x.push_back({quantity, value, lo, hi});
  };
  check("parameters", s.params, e.lo.params, e.hi.params);
  check("hidden size", s.hidden, e.lo.hidden, e.hi.hidden);
  check("sequence length", s.seq_len, e.lo.seq_len, e.hi.seq_len);
  check("GPUs", s.gpus, e.lo.gpus, e.hi.gpus);
  check("tensor-parallel degree", s.tp, e.lo.tp, e.hi.tp);
  check("pipeline depth", s.pp, e.lo.pp, e.hi.pp);
  check("context-parallel degree", s.cp, e.lo.cp, e.hi.cp);
  check("Ulysses degree", s.ulysses, e.lo.ulysses, e.hi.ulysses);
  return x;
}
}  // namespace

std::vector<Extrapolation> outside_envelope(const Envelope& e, const Transformer& m, const Plan& p) {
  if (e.empty()) return {};
  const RunShape s = run_shape(m, p);
  std::vector<Extrapolation> x = numbers_outside(e, s);
  // A mode none of the runs used is priced by terms the band never checked.
  for (std::uint32_t bit = 1; bit != 0 && bit <= s.features; bit <<= 1)
    if ((s.features & bit) != 0 && (e.hi.features & bit) == 0)
      x.push_back({run_feature_name(bit), 0, 0, 0, /*mode=*/true});
  return x;
}

bool beyond_envelope(const Envelope& e, const RunShape& s) {
  if (e.empty() || s.empty()) return false;
  return !numbers_outside(e, s).empty() || (s.features & ~e.hi.features) != 0;
}

namespace {

// A GPU family without one published run (H200): its band is other GPUs'.
bool no_run_on_gpu(const Accuracy& a) { return !a.cv.empty() && a.sources.empty(); }

// outside_envelope, and the cluster's GPU when it is a variant none of the
// runs used (an H100 PCIe priced by the profile fitted on SXM machines).
std::vector<Extrapolation> beyond(const Accuracy& a, const Transformer& m, const Plan& p) {
  std::vector<Extrapolation> x = outside_envelope(a.envelope, m, p);
  // GPU names compare case-blind, as their families do (a100-sxm4-80gb ran).
  const bool ran_on_it = std::any_of(a.envelope.gpus.begin(), a.envelope.gpus.end(),
                                     [&](const std::string& g) { return ascii_upper(g) == ascii_upper(a.gpu); });
  if (!a.envelope.empty() && !a.gpu.empty() && !ran_on_it) {
    std::string ran;
    for (const auto& g : a.envelope.gpus) ran += (ran.empty() ? "" : ", ") + g;
    x.push_back({"GPU " + a.gpu + " (they ran on " + ran + ")", 0, 0, 0, /*mode=*/true});
  }
  return x;
}

}  // namespace

double band_widening(const Accuracy& a, const Transformer& m, const Plan& p) {
  return no_run_on_gpu(a) || !beyond(a, m, p).empty() ? kBandBeyondWidening : 1.0;
}

std::string extrapolation_line(const Accuracy& a, const Transformer& m, const Plan& p) {
  // A GPU without one published run: every plan on it is an extrapolation,
  // whatever band the other GPUs' runs give.
  if (no_run_on_gpu(a))
    return "extrapolated: no published run on " + a.family + " at all; the error band was measured on " + a.cv.cell +
           " runs, and is widened for it";
  const std::vector<Extrapolation> x = beyond(a, m, p);
  if (x.empty()) return "";
  std::string s = "extrapolated beyond the " + a.envelope.cell + " runs it was checked on (" +
                  grouped(a.envelope.runs) + (a.envelope.runs == 1 ? " run): " : " runs): ");
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (i > 0) s += ", ";
    s += x[i].mode ? x[i].quantity + (x[i].quantity.starts_with("GPU ") ? "" : " (none of them ran it)")
                   : x[i].quantity + " " + number(x[i].value) + " (they span " + number(x[i].lo) + "-" + number(x[i].hi) + ")";
  }
  return s + "; the error band was measured inside them, and is widened for it";
}

nlohmann::json extrapolation_json(const Accuracy& a, const Transformer& m, const Plan& p) {
  nlohmann::json out = nlohmann::json::array();
  for (const Extrapolation& e : beyond(a, m, p))
    out.push_back(e.mode ? nlohmann::json{{"quantity", e.quantity}, {"in_runs", false}}
                         : nlohmann::json{{"quantity", e.quantity}, {"value", e.value}, {"runs_min", e.lo}, {"runs_max", e.hi}});
  return {{"cell", a.envelope.cell}, {"runs", a.envelope.runs}, {"no_run_on_gpu", no_run_on_gpu(a)}, {"beyond", out}};
}

}  // namespace ztune
