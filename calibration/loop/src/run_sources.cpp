#include "ztune/calibration/run_sources.hpp"

#include <algorithm>
#include <cstdio>

#include "ztune/calibration/machine_noise.hpp"

#include "ztune/model/flops.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/run_record.hpp"

namespace ztune::calibration {

std::vector<RunObservation> runs_from_records(const std::vector<std::string>& files) {
  std::vector<RunObservation> out;
  for (const auto& f : files) out.push_back(run_observation_from_record(read_run_record(f)));
  return out;
}

std::optional<std::string> faster_than_hardware(const RunObservation& r, const Cluster& c) {
  const double peak = c.node.gpu.peak_flops(r.plan.precision);
  const double devices = static_cast<double>(r.plan.devices());
  if (!(r.measured_iteration_s > 0) || !(peak > 0) || !(devices > 0)) return std::nullopt;
  const double rate = model_flops_per_iteration(r.model, static_cast<double>(r.plan.global_batch)) /
                      r.measured_iteration_s;
  const double times = rate / (peak * devices);
  if (times <= kFasterThanPeak) return std::nullopt;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s: a step of %.3g s is %.3g model FLOP/s, %.3g times the peak of its %g %s (%.3g TFLOP/s each "
                "in %s): no hardware runs a step that fast; check its step times",
                r.label.c_str(), r.measured_iteration_s, rate, times, devices,
                c.device_kind == DeviceKind::cpu ? "ranks" : "GPUs", peak / 1e12, to_string(r.plan.precision).c_str());
  return std::string(buf);
}

void read_stored_run(StoredRun& run, const nlohmann::json& document, const std::string& where) {
  if (document.contains("record") && !document.at("record").is_null()) {
    // Valid JSON that is not a record (42, []) had been dropped without a word.
    if (!document.at("record").is_object())
      throw InputError(where + ", column record): expected the run record object, got " +
                       std::string(document.at("record").type_name()));
    run.record = document.at("record");
  }
  if (!document.contains("measurements") || !document.at("measurements").is_array()) return;
  RunContention c;
  for (const auto& m : document.at("measurements")) {
    if (!m.is_object() || !m.contains("name") || !m.contains("value") || !m.at("value").is_number()) continue;
    const auto name = m.at("name").get<std::string>();
    if (name != kOthersCpuMeasurement && name != kStealMeasurement) continue;
    // Shares of the machine's CPU time (1e308 had printed as "inf%", -5 had
    // passed the run as measured on a quiet machine).
    const double v = m.at("value").get<double>();
    if (!(v >= 0 && v <= 1)) {
      char got[64];
      std::snprintf(got, sizeof got, "%.6g", v);
      throw InputError(where + ", table measurements): " + name + ": expected a fraction in [0, 1], got " + got);
    }
    (name == kOthersCpuMeasurement ? c.others_fraction : c.steal_fraction) = v;
    c.valid = true;
  }
  run.contended = contention_problem(c);
}

bool run_of_cluster(const std::string& run_cluster, const std::string& cluster_name) {
  return run_cluster == cluster_name || run_cluster == cluster_name + "-calibrated";
}

void drop_repeated_measurements(std::vector<RunObservation>& fitted, const std::vector<RunObservation>& held_out,
                                std::vector<std::string>& notes) {
  std::vector<RunObservation> kept;
  for (auto& r : fitted) {
    auto same = [&r](const RunObservation& o) { return same_measurement(r, o); };
    if (auto h = std::find_if(held_out.begin(), held_out.end(), same); h != held_out.end()) {
      notes.push_back(r.label + " is the held-out " + h->label + " again: held out, not fitted");
      continue;
    }
    if (auto k = std::find_if(kept.begin(), kept.end(), same); k != kept.end()) {
      notes.push_back(r.label + " is " + k->label + " again: fitted once");
      continue;
    }
    kept.push_back(std::move(r));
  }
  fitted = std::move(kept);
}

std::vector<RunObservation> runs_from_stored(const std::vector<StoredRun>& stored, const std::string& cluster_name,
                                             const std::string& where, std::vector<std::string>& notes) {
  std::vector<RunObservation> out;
  int unusable = 0, oversubscribed = 0, contended = 0;
  std::string first_reason, first_oversubscribed, first_contended;
  for (const auto& s : stored) {
    // Unfinished runs (failed, interrupted) measured nothing; other
    // clusters' runs are not this fit's.
    if (s.status != "ok") continue;
    if (!run_of_cluster(s.cluster, cluster_name)) continue;
    if (!s.record.is_object()) {
      if (++unusable == 1) first_reason = where + " run " + std::to_string(s.id) + ": no run record stored with it";
      continue;
    }
    // Measured while other work shared the machine: slower than its plan by
    // a contention the cost model does not price.
    if (s.contended) {
      if (++contended == 1) first_contended = "run " + std::to_string(s.id) + ": " + *s.contended;
      continue;
    }
    try {
      RunObservation o = run_observation_from_record(s.record, where + " run " + std::to_string(s.id));
      o.label = "run " + std::to_string(s.id);
      if (o.oversubscribed) {
        if (++oversubscribed == 1) first_oversubscribed = o.label + ": " + *o.oversubscribed;
        continue;
      }
      out.push_back(std::move(o));
    } catch (const InputError& e) {
      // A stored record the strict reader refuses (no model, an older executor,
      // a value out of range) cannot be predicted again: counted and left out,
      // not guessed.
      if (++unusable == 1) first_reason = e.what();
    }
  }
  if (unusable > 0)
    notes.push_back(std::to_string(unusable) + " stored run(s) of " + cluster_name +
                    " left out: their records are not valid ztune.runrecord/1 with an embedded model (first: " +
                    first_reason + ")");
  if (oversubscribed > 0)
    notes.push_back(std::to_string(oversubscribed) + " stored run(s) of " + cluster_name +
                    " left out: they ran more threads than their host has, so their time is contention the cost "
                    "model does not price (first: " + first_oversubscribed + ")");
  if (contended > 0)
    notes.push_back(std::to_string(contended) + " stored run(s) of " + cluster_name +
                    " left out: other work shared the machine while they ran (first: " + first_contended + ")");
  return out;
}

}  // namespace ztune::calibration
