#pragma once
// Schema version 6: honest failures. Frozen once shipped. Described column by column in
// store/README.md.
//
// - jobs.state gains 'blocked': the job cannot run as configured (its plugin is not found, its
//   configuration or its data is refused); not retried until `attnlab queue retry`.
// - runs.status gains 'rejected': the attempt that found that out.
// - jobs.infra_failures / max_infra_failures: attempts ended by the infrastructure (status
//   'lost': an expired lease, a requeued SLURM task, a job process killed by a signal from
//   outside) have their own, larger cap; jobs.failures now counts only the method's own crashes.
//   Migrated jobs keep their failure counts as they were.
// - jobs.plugin_dirs: the folders (JSON array, absolute) of the plugins the job was queued with,
//   searched first by whichever worker claims it.
//
// The CHECK constraints change, so `jobs` and `runs` are rebuilt as in schema 4 (foreign keys
// off, one transaction, row ids kept, PRAGMA foreign_key_check before the commit); every view
// reads them and is dropped first and made again (the version 5 views with 'blocked' counted
// among the jobs that ended without a result).

namespace attnlab::store {

inline constexpr const char* kSchemaV6 = R"sql(
DROP VIEW run_curves;
DROP VIEW seed_stats;
DROP VIEW job_results;
DROP VIEW job_outcomes;
DROP VIEW run_summary;

CREATE TABLE jobs_v6 (
  id                 INTEGER PRIMARY KEY,
  experiment_id      INTEGER NOT NULL REFERENCES experiments(id),
  method             TEXT NOT NULL,
  dataset            TEXT NOT NULL,
  seed               INTEGER NOT NULL,
  config_toml        TEXT NOT NULL,
  config_hash        TEXT NOT NULL UNIQUE,
  state              TEXT NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'done', 'failed', 'diverged', 'oom',
                                      'cancelled', 'submitted', 'blocked')),
  created_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  attempts           INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  failures           INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
  max_attempts       INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
  infra_failures     INTEGER NOT NULL DEFAULT 0 CHECK (infra_failures >= 0),
  max_infra_failures INTEGER NOT NULL DEFAULT 10 CHECK (max_infra_failures >= 1),
  plugin_dirs        TEXT,
  lease_run_id       INTEGER REFERENCES runs(id),
  lease_owner        TEXT,
  lease_expires_at   REAL,
  error              TEXT,
  CHECK ((state = 'running') = (lease_run_id IS NOT NULL AND lease_expires_at IS NOT NULL))
);

INSERT INTO jobs_v6 (id, experiment_id, method, dataset, seed, config_toml, config_hash, state, created_at,
                     attempts, failures, max_attempts, lease_run_id, lease_owner, lease_expires_at, error)
SELECT id, experiment_id, method, dataset, seed, config_toml, config_hash, state, created_at,
       attempts, failures, max_attempts, lease_run_id, lease_owner, lease_expires_at, error
FROM jobs;

CREATE TABLE runs_v6 (
  id                INTEGER PRIMARY KEY,
  job_id            INTEGER NOT NULL REFERENCES jobs(id),
  attempt           INTEGER NOT NULL,
  status            TEXT NOT NULL
                    CHECK (status IN ('running', 'done', 'failed', 'diverged', 'oom', 'interrupted', 'lost',
                                      'rejected')),
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

INSERT INTO runs_v6 SELECT id, job_id, attempt, status, host, device, device_name, torch_version, attnlab_version,
                           git_revision, threads, pid, started_at, finished_at, error, checkpoint_path, worker, uid,
                           heartbeat_at, resume_checkpoint, resume_step
FROM runs;

DROP TABLE jobs;
DROP TABLE runs;
ALTER TABLE jobs_v6 RENAME TO jobs;
ALTER TABLE runs_v6 RENAME TO runs;

CREATE INDEX jobs_by_experiment ON jobs(experiment_id);
CREATE INDEX jobs_by_state ON jobs(state, id);
CREATE INDEX runs_by_status ON runs(status);
-- a job's attempts, newest first: job_outcomes, resume_point, attempts_of_job
CREATE INDEX runs_by_job ON runs(job_id, attempt);

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

-- One row per job: its state and the run that counts for it. A job that ended done, diverged or
-- oom counts its newest run of that status; a job that ended failed or blocked counts its newest
-- run (whose error says why). Any other job has no run that counts yet: run_id is NULL.
CREATE VIEW job_outcomes AS
SELECT
  j.id         AS job_id,
  CASE
    WHEN j.state IN ('done', 'diverged', 'oom') THEN
      (SELECT r.id FROM runs AS r WHERE r.job_id = j.id AND r.status = j.state ORDER BY r.attempt DESC LIMIT 1)
    WHEN j.state IN ('failed', 'blocked') THEN
      (SELECT r.id FROM runs AS r WHERE r.job_id = j.id ORDER BY r.attempt DESC LIMIT 1)
  END          AS run_id,
  j.experiment_id AS experiment_id,
  e.name       AS experiment,
  j.method     AS method,
  j.dataset    AS dataset,
  j.seed       AS seed,
  j.state      AS state,
  j.attempts   AS attempts
FROM jobs AS j
JOIN experiments AS e ON e.id = j.experiment_id;

CREATE VIEW job_results AS
SELECT o.job_id, o.run_id, o.experiment, o.method, o.dataset, o.seed, o.state,
       r.name AS metric, r.value AS value
FROM job_outcomes AS o
JOIN results AS r ON r.run_id = o.run_id;

CREATE VIEW seed_stats AS
WITH done AS (
  SELECT method, dataset, metric, value FROM job_results WHERE state = 'done' AND value IS NOT NULL
), moments AS (
  SELECT method, dataset, metric, COUNT(*) AS n, AVG(value) AS mean, MIN(value) AS min, MAX(value) AS max
  FROM done GROUP BY method, dataset, metric
)
SELECT m.method, m.dataset, m.metric, m.n, m.mean,
       CASE WHEN m.n > 1 THEN
         sqrt((SELECT SUM((d.value - m.mean) * (d.value - m.mean)) FROM done AS d
               WHERE d.method = m.method AND d.dataset = m.dataset AND d.metric = m.metric) / (m.n - 1))
       END AS std,
       m.min, m.max,
       (SELECT COUNT(*) FROM jobs AS j WHERE j.method = m.method AND j.dataset = m.dataset) AS jobs,
       (SELECT COUNT(*) FROM jobs AS j WHERE j.method = m.method AND j.dataset = m.dataset
                                         AND j.state IN ('failed', 'diverged', 'oom', 'blocked')) AS failed
FROM moments AS m;

CREATE VIEW run_curves AS
SELECT c.run_id, r.job_id, j.method, j.dataset, j.seed, r.status,
       c.split, c.name, c.step, c.value, c.wall_seconds
FROM curves AS c
JOIN runs AS r ON r.id = c.run_id
JOIN jobs AS j ON j.id = r.job_id;
)sql";

}  // namespace attnlab::store
