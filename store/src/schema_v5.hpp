#pragma once
// Schema version 5: views for the questions a paper asks of its runs (which run counts for each
// job, its results in long form, seed statistics, curves with their job). Views only: no table
// changes. Frozen once shipped. Described column by column in store/README.md; `attnlab results`,
// `table` and `compare` read the same views, so the CLI and the sqlite3 prompt agree.

namespace attnlab::store {

inline constexpr const char* kSchemaV5 = R"sql(
-- One row per job: its state and the run that counts for it. A job that ended done, diverged or
-- oom counts its newest run of that status (after a --rerun, the new one); a job that ended
-- failed counts its newest run (whose error says why). Any other job (queued, running,
-- submitted, cancelled) has no run that counts yet: run_id is NULL.
CREATE VIEW job_outcomes AS
SELECT
  j.id         AS job_id,
  CASE
    WHEN j.state IN ('done', 'diverged', 'oom') THEN
      (SELECT r.id FROM runs AS r WHERE r.job_id = j.id AND r.status = j.state ORDER BY r.attempt DESC LIMIT 1)
    WHEN j.state = 'failed' THEN
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

-- Every result of every counting run, one row per (job, result name).
CREATE VIEW job_results AS
SELECT o.job_id, o.run_id, o.experiment, o.method, o.dataset, o.seed, o.state,
       r.name AS metric, r.value AS value
FROM job_outcomes AS o
JOIN results AS r ON r.run_id = o.run_id;

-- Per (method, dataset, metric): the metric over the seeds of the jobs that ended done, and
-- how many jobs there are and how many ended failed, diverged or oom. std is the sample
-- standard deviation (n - 1), NULL for one seed. A NULL result (NaN) is not a value.
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
                                         AND j.state IN ('failed', 'diverged', 'oom')) AS failed
FROM moments AS m;

-- Curve points with the run's job: what `attnlab curves` draws.
CREATE VIEW run_curves AS
SELECT c.run_id, r.job_id, j.method, j.dataset, j.seed, r.status,
       c.split, c.name, c.step, c.value, c.wall_seconds
FROM curves AS c
JOIN runs AS r ON r.id = c.run_id
JOIN jobs AS j ON j.id = r.job_id;
)sql";

}  // namespace attnlab::store
