#pragma once
// The results database's schema as migrations: kMigrations[i] takes
// user_version i to i + 1. Never edit a released migration; append one.
#include <array>
#include <cstdint>

namespace ztune::db {

/// PRAGMA application_id of a ztune results database ("ztun" in ASCII).
inline constexpr std::int32_t kApplicationId = 0x7a74756e;

inline constexpr std::array<const char*, 1> kMigrations{
    // 0 -> 1: the first schema.
    R"sql(
CREATE TABLE clusters(
  id INTEGER PRIMARY KEY,
  digest TEXT NOT NULL UNIQUE,          -- SHA-256 of the canonical cluster JSON
  name TEXT NOT NULL,
  doc TEXT NOT NULL,                    -- ztune.cluster/1 JSON
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')));
CREATE TABLE models(
  id INTEGER PRIMARY KEY,
  digest TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  doc TEXT NOT NULL,                    -- ztune.model/1 JSON
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')));
CREATE TABLE profiles(
  id INTEGER PRIMARY KEY,
  digest TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  doc TEXT NOT NULL,                    -- ztune.profile/1 JSON
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')));
CREATE TABLE searches(
  id INTEGER PRIMARY KEY,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  cluster_id INTEGER NOT NULL REFERENCES clusters(id),
  model_id INTEGER NOT NULL REFERENCES models(id),
  profile_id INTEGER REFERENCES profiles(id),
  options TEXT NOT NULL,                -- JSON: constraints, objective, passes switched off, ...
  space INTEGER NOT NULL,
  evaluated INTEGER NOT NULL,
  feasible INTEGER NOT NULL,
  pruned_by TEXT NOT NULL,              -- JSON {reason: count}
  passes TEXT NOT NULL,                 -- JSON [{name, enabled, in, out, seconds, note}]
  elapsed_s REAL NOT NULL,
  threads INTEGER NOT NULL,
  interrupted INTEGER NOT NULL,
  ztune_version TEXT NOT NULL);
CREATE TABLE candidates(
  search_id INTEGER NOT NULL REFERENCES searches(id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,                -- 1 = best
  summary TEXT NOT NULL,
  plan TEXT NOT NULL,                   -- ztune.plan/1 JSON
  prediction TEXT NOT NULL,             -- JSON as printed by search --json
  gpu_bytes REAL NOT NULL,
  iteration_s REAL,
  tokens_per_s REAL,
  mfu REAL,
  objective REAL,
  simulated_iteration_s REAL,
  PRIMARY KEY(search_id, rank));
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  cluster_id INTEGER REFERENCES clusters(id),
  model_id INTEGER REFERENCES models(id),
  plan TEXT NOT NULL,
  plan_digest TEXT NOT NULL,
  summary TEXT NOT NULL,
  prediction TEXT,                      -- JSON, when a prediction was made
  predicted_iteration_s REAL,
  measured_iteration_s REAL,
  status TEXT NOT NULL,
  record TEXT NOT NULL);                -- the executor's run record, verbatim
CREATE TABLE measurements(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value REAL NOT NULL,
  unit TEXT NOT NULL);
CREATE INDEX measurements_by_run ON measurements(run_id);
CREATE INDEX runs_by_plan ON runs(plan_digest);
)sql",
};

static_assert(kMigrations.size() == 1, "kResultsSchemaVersion must equal the number of migrations");

}  // namespace ztune::db
