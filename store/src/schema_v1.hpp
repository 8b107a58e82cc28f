#pragma once
// Schema version 1: the DDL of migration 1. Frozen once shipped; change the schema with a new
// migration. Described column by column in store/README.md.

namespace attnlab::store {

inline constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE experiments (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL,
  source_path TEXT,
  config_text TEXT NOT NULL,
  created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE jobs (
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  method        TEXT NOT NULL,
  dataset       TEXT NOT NULL,
  seed          INTEGER NOT NULL,
  config_toml   TEXT NOT NULL,
  config_hash   TEXT NOT NULL UNIQUE,
  state         TEXT NOT NULL DEFAULT 'queued'
                CHECK (state IN ('queued', 'running', 'done', 'failed', 'diverged', 'oom')),
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX jobs_by_experiment ON jobs(experiment_id);

CREATE TABLE job_params (
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  key    TEXT NOT NULL,
  value  TEXT NOT NULL,
  PRIMARY KEY (job_id, key)
);

CREATE TABLE runs (
  id              INTEGER PRIMARY KEY,
  job_id          INTEGER NOT NULL REFERENCES jobs(id),
  attempt         INTEGER NOT NULL,
  status          TEXT NOT NULL
                  CHECK (status IN ('running', 'done', 'failed', 'diverged', 'oom', 'interrupted')),
  host            TEXT,
  device          TEXT,
  device_name     TEXT,
  torch_version   TEXT,
  attnlab_version TEXT,
  git_revision    TEXT,
  threads         INTEGER,
  pid             INTEGER,
  started_at      TEXT NOT NULL,
  finished_at     TEXT,
  error           TEXT,
  checkpoint_path TEXT,
  UNIQUE (job_id, attempt)
);
CREATE INDEX runs_by_status ON runs(status);

CREATE TABLE run_plugins (
  run_id  INTEGER NOT NULL REFERENCES runs(id),
  kind    TEXT NOT NULL,
  name    TEXT NOT NULL,
  version TEXT NOT NULL,
  path    TEXT NOT NULL,
  sha256  TEXT NOT NULL,
  PRIMARY KEY (run_id, kind, name)
);

CREATE TABLE curves (
  run_id       INTEGER NOT NULL REFERENCES runs(id),
  step         INTEGER NOT NULL,
  split        TEXT NOT NULL,
  name         TEXT NOT NULL,
  value        REAL,
  wall_seconds REAL NOT NULL,
  PRIMARY KEY (run_id, split, name, step)
) WITHOUT ROWID;

CREATE TABLE results (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  name   TEXT NOT NULL,
  value  REAL,
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;

CREATE VIEW run_summary AS
SELECT
  r.id          AS run_id,
  r.job_id      AS job_id,
  e.name        AS experiment,
  j.method      AS method,
  j.dataset     AS dataset,
  j.seed        AS seed,
  r.attempt     AS attempt,
  r.status      AS status,
  r.device      AS device,
  r.started_at  AS started_at,
  r.finished_at AS finished_at,
  r.error       AS error,
  (SELECT value FROM results WHERE run_id = r.id AND name = 'test_acc')          AS test_acc,
  (SELECT value FROM results WHERE run_id = r.id AND name = 'best_val_acc')      AS best_val_acc,
  (SELECT value FROM results WHERE run_id = r.id AND name = 'wall_seconds')      AS wall_seconds,
  (SELECT value FROM results WHERE run_id = r.id AND name = 'steps_per_second')  AS steps_per_second,
  (SELECT value FROM results WHERE run_id = r.id AND name = 'peak_memory_bytes') AS peak_memory_bytes,
  (SELECT value FROM results WHERE run_id = r.id AND name = 'param_count')       AS param_count,
  (SELECT value FROM results WHERE run_id = r.id AND name = 'majority_rate')     AS majority_rate
FROM runs r
JOIN jobs j        ON j.id = r.job_id
JOIN experiments e ON e.id = j.experiment_id;
)sql";

}  // namespace attnlab::store
