#pragma once
// Schema version 4: the job queue (attempts, failures, leases) and what SLURM shards need (a
// unique id per run). Frozen once shipped. Described column by column in store/README.md.
//
// SQLite cannot change a CHECK constraint in place, so `jobs` and `runs` are rebuilt with the
// documented procedure: migrate() runs this with foreign keys off, inside one transaction, and
// runs PRAGMA foreign_key_check before committing. Row ids are kept, so every table that refers to
// a job or a run (job_params, run_plugins, curves, results, variance_examples) stays valid.
// The view that reads both tables is dropped first (a rename checks every view) and recreated.
//
// Rows found in flight: a job 'running' in version 3 gets an already expired lease held by its
// newest running run, so the next claim ends that run as 'lost' and queues the job again; any
// other run still 'running' is ended as 'lost' at once. A 'running' job without a running run
// is queued.

namespace attnlab::store {

inline constexpr const char* kSchemaV4 = R"sql(
DROP VIEW run_summary;

CREATE TABLE jobs_v4 (
  id               INTEGER PRIMARY KEY,
  experiment_id    INTEGER NOT NULL REFERENCES experiments(id),
  method           TEXT NOT NULL,
  dataset          TEXT NOT NULL,
  seed             INTEGER NOT NULL,
  config_toml      TEXT NOT NULL,
  config_hash      TEXT NOT NULL UNIQUE,
  state            TEXT NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'running', 'done', 'failed', 'diverged', 'oom',
                                    'cancelled', 'submitted')),
  created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  failures         INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
  max_attempts     INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
  lease_run_id     INTEGER REFERENCES runs(id),
  lease_owner      TEXT,
  lease_expires_at REAL,
  error            TEXT,
  -- a job is running exactly while one of its runs holds a lease on it
  CHECK ((state = 'running') = (lease_run_id IS NOT NULL AND lease_expires_at IS NOT NULL))
);

INSERT INTO jobs_v4 (id, experiment_id, method, dataset, seed, config_toml, config_hash, state, created_at,
                     attempts, failures, lease_run_id, lease_expires_at, error)
SELECT j.id, j.experiment_id, j.method, j.dataset, j.seed, j.config_toml, j.config_hash,
       CASE WHEN j.state = 'running' AND newest_running.id IS NULL THEN 'queued' ELSE j.state END,
       j.created_at,
       (SELECT count(*) FROM runs r WHERE r.job_id = j.id),
       CASE WHEN j.state = 'failed'
            THEN (SELECT count(*) FROM runs r WHERE r.job_id = j.id AND r.status = 'failed') ELSE 0 END,
       CASE WHEN j.state = 'running' THEN newest_running.id END,
       CASE WHEN j.state = 'running' AND newest_running.id IS NOT NULL THEN 0.0 END,
       (SELECT r.error FROM runs r WHERE r.job_id = j.id ORDER BY r.attempt DESC LIMIT 1)
FROM jobs j
LEFT JOIN (SELECT job_id, max(id) AS id FROM runs WHERE status = 'running' GROUP BY job_id) AS newest_running
       ON newest_running.job_id = j.id;

CREATE TABLE runs_v4 (
  id                INTEGER PRIMARY KEY,
  job_id            INTEGER NOT NULL REFERENCES jobs(id),
  attempt           INTEGER NOT NULL,
  status            TEXT NOT NULL
                    CHECK (status IN ('running', 'done', 'failed', 'diverged', 'oom', 'interrupted', 'lost')),
  host              TEXT,
  device            TEXT,
  device_name       TEXT,
  torch_version     TEXT,
  attnlab_version   TEXT,
  git_revision      TEXT,
  threads           INTEGER,
  pid               INTEGER,
  started_at        TEXT NOT NULL,
  finished_at       TEXT,
  error             TEXT,
  checkpoint_path   TEXT,
  worker            TEXT,
  uid               TEXT NOT NULL UNIQUE,
  heartbeat_at      TEXT,
  resume_checkpoint TEXT,
  resume_step       INTEGER,
  UNIQUE (job_id, attempt)
);

INSERT INTO runs_v4 (id, job_id, attempt, status, host, device, device_name, torch_version, attnlab_version,
                     git_revision, threads, pid, started_at, finished_at, error, checkpoint_path, uid)
SELECT r.id, r.job_id, r.attempt,
       CASE WHEN r.status = 'running' AND r.id NOT IN (SELECT lease_run_id FROM jobs_v4 WHERE lease_run_id IS NOT NULL)
            THEN 'lost' ELSE r.status END,
       r.host, r.device, r.device_name, r.torch_version, r.attnlab_version, r.git_revision, r.threads, r.pid,
       r.started_at, r.finished_at,
       CASE WHEN r.status = 'running' AND r.id NOT IN (SELECT lease_run_id FROM jobs_v4 WHERE lease_run_id IS NOT NULL)
            THEN coalesce(r.error, 'never finished (still running when the database moved to schema 4)')
            ELSE r.error END,
       r.checkpoint_path,
       lower(hex(randomblob(16)))
FROM runs r;

DROP TABLE jobs;
DROP TABLE runs;
ALTER TABLE jobs_v4 RENAME TO jobs;
ALTER TABLE runs_v4 RENAME TO runs;

CREATE INDEX jobs_by_experiment ON jobs(experiment_id);
-- what a claim reads: the lowest queued id; what expiry reads: the running jobs
CREATE INDEX jobs_by_state ON jobs(state, id);
CREATE INDEX runs_by_status ON runs(status);

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
