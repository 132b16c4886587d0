#include "ztune/calibration/history.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "ztune/vocab/input_error.hpp"
#include "ztune/model/prediction.hpp"

namespace ztune::calibration {

namespace {

// Two profile documents equal up to the rounding of a unit conversion (µs ↔ s
// each way: 1e-12 relative).
bool nearly_equal(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y));
  }
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !nearly_equal(it.value(), b.at(it.key()))) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!nearly_equal(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

ProfileHistoryRow row_for(const Cluster& catalog, const HardwareProfile& p, std::int64_t id, const std::string& created,
                          std::vector<const TimedRun*> after) {
  ProfileHistoryRow row;
  row.id = id;
  row.created = created;
  row.name = p.name;
  row.source = p.source;
  const Cluster c = with_measured_figures(catalog, p);
  std::sort(after.begin(), after.end(), [](const TimedRun* a, const TimedRun* b) { return a->created < b->created; });
  double sum = 0;
  for (const TimedRun* r : after) {
    const double t = predict_time(r->run.model, r->run.plan, c, p).iteration_s;
    const double e = r->run.measured_iteration_s > 0
                         ? std::abs(t - r->run.measured_iteration_s) / r->run.measured_iteration_s
                         : 0.0;
    if (!row.last_error) row.last_error = e;
    sum += e;
    ++row.runs_since;
  }
  if (row.runs_since > 0) row.mean_abs_error = sum / row.runs_since;
  return row;
}

}  // namespace

std::vector<ProfileHistoryRow> profile_history(const Cluster& catalog_cluster, const std::optional<HardwareProfile>& shipped,
                                               const std::vector<ProfileVersion>& versions,
                                               const std::vector<TimedRun>& runs) {
  std::vector<ProfileHistoryRow> out;
  std::vector<const TimedRun*> all;
  for (const auto& r : runs) all.push_back(&r);
  // A GPU the catalog has no profile for (priced from a user's copy) has no shipped row.
  if (shipped) out.push_back(row_for(catalog_cluster, *shipped, 0, "", all));
  std::vector<const ProfileVersion*> ordered;
  for (const auto& v : versions) ordered.push_back(&v);
  std::sort(ordered.begin(), ordered.end(), [](const ProfileVersion* a, const ProfileVersion* b) {
    return a->created != b->created ? a->created < b->created : a->id < b->id;
  });
  nlohmann::json last;
  for (const ProfileVersion* v : ordered) {
    // The same profile stored again (a search stores the profile it ran
    // with, read back from the file `--run` wrote): one row, the first.
    nlohmann::json doc = profile_to_json(v->profile);
    if (nearly_equal(doc, last)) continue;
    last = std::move(doc);
    // Runs stored after the profile (a run stored in the same second as the
    // profile is the one it was refined on: not after it).
    std::vector<const TimedRun*> after;
    for (const auto& r : runs)
      if (r.created > v->created) after.push_back(&r);
    out.push_back(row_for(catalog_cluster, v->profile, v->id, v->created, after));
  }
  return out;
}

std::vector<ProfileHistoryRow> profile_history_from_stored(const Cluster& catalog_cluster,
                                                           const std::vector<StoredProfile>& profiles,
                                                           const std::vector<StoredRun>& runs, const std::string& where,
                                                           std::vector<std::string>& notes) {
  const std::string name = catalog_cluster.name + "-calibrated";
  std::vector<ProfileVersion> versions;
  int unreadable = 0;
  for (const auto& p : profiles) {
    if (p.name != name) continue;
    try {
      versions.push_back({p.id, p.created, profile_from_json(p.doc, where + " profile " + std::to_string(p.id))});
    } catch (const InputError& e) {
      if (++unreadable == 1) notes.push_back(std::string("stored profile left out: ") + e.what());
    }
  }
  std::vector<TimedRun> timed;
  for (const auto& s : runs) {
    std::vector<std::string> ignored;  // runs_from_db already counts unusable records for the fit
    auto o = runs_from_stored({s}, catalog_cluster.name, where, ignored);
    if (!o.empty()) timed.push_back({s.created, std::move(o.front())});
  }
  return profile_history(catalog_cluster, catalog_profile_for(catalog_cluster), versions, timed);
}

std::vector<std::string> calibrated_cluster_names(const std::vector<StoredProfile>& profiles) {
  std::set<std::string> names;
  const std::string suffix = "-calibrated";
  for (const auto& p : profiles)
    if (p.name.size() > suffix.size() && p.name.ends_with(suffix))
      names.insert(p.name.substr(0, p.name.size() - suffix.size()));
  return {names.begin(), names.end()};
}

void print_profile_history(std::FILE* out, const std::string& cluster, const std::vector<ProfileHistoryRow>& rows) {
  std::fprintf(out, "\nProfiles of %s, oldest first: error on the runs measured after each was stored\n",
               cluster.c_str());
  std::fprintf(out, "  %-6s %-21s %-28s %10s %16s %14s\n", "id", "stored", "profile", "runs since", "mean |error|",
               "next run err");
  for (const auto& r : rows) {
    char mean[32] = "-", next[32] = "-";
    if (r.mean_abs_error) std::snprintf(mean, sizeof mean, "%.1f%%", 100 * *r.mean_abs_error);
    if (r.last_error) std::snprintf(next, sizeof next, "%.1f%%", 100 * *r.last_error);
    std::fprintf(out, "  %-6s %-21s %-28s %10d %16s %14s\n", r.id == 0 ? "ship" : ("p" + std::to_string(r.id)).c_str(),
                 r.created.empty() ? "(catalog)" : r.created.c_str(), r.name.substr(0, 28).c_str(), r.runs_since, mean,
                 next);
  }
}

nlohmann::json profile_history_json(const std::string& cluster, const std::vector<ProfileHistoryRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows)
    a.push_back({{"id", r.id == 0 ? nlohmann::json(nullptr) : nlohmann::json(r.id)},
                 {"stored", r.created.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.created)},
                 {"profile", r.name},
                 {"source", r.source},
                 {"runs_since", r.runs_since},
                 {"mean_abs_error", r.mean_abs_error ? nlohmann::json(*r.mean_abs_error) : nlohmann::json(nullptr)},
                 {"next_run_error", r.last_error ? nlohmann::json(*r.last_error) : nlohmann::json(nullptr)}});
  return {{"cluster", cluster}, {"profiles", a}};
}

}  // namespace ztune::calibration
