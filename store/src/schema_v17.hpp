#pragma once
// Schema version 17: `seed_stats`' `config` quotes a value that holds a space (or is empty, or holds
// a quote, a backslash or '='), which version 15 wrote bare: "k=a b k2=c" could not be split back
// into its pairs. Frozen once shipped. Described column by column in store/README.md.

namespace attnlab::store {

inline constexpr const char* kSchemaV17 = R"sql(
DROP VIEW seed_stats;

-- Grouped as `attnlab results` groups by default (store::keys_varying_within_groups): by method,
-- dataset and the config keys whose values differ among the jobs of any one (method, dataset), so
-- a sweep's values are never averaged as seeds. `config` gives a job's values of those keys,
-- "key=value" in key order, space-separated (`results`' key columns); "" where nothing differs. A
-- value that is empty or holds a space, tab, newline, '"', '' or '=' is written in double quotes,
-- its '' and '"' escaped with '' (key="a b"), so that the text splits back into its pairs.
CREATE VIEW seed_stats AS
WITH varying AS (
  SELECT DISTINCT key FROM (
    SELECT p.key AS key
    FROM job_params AS p JOIN jobs AS j ON j.id = p.job_id
    WHERE p.key NOT IN ('method', 'dataset', 'seed', 'train.checkpoint_every', 'train.accuracy_checkpoints')
    GROUP BY j.method, j.dataset, p.key HAVING count(DISTINCT p.value) > 1)
), settings AS (
  -- a window's ORDER BY fixes the concatenation's order (SQLite's plain group_concat does not)
  SELECT DISTINCT p.job_id,
         group_concat(p.key || '=' ||
                      CASE WHEN p.value = '' OR p.value GLOB '*[ "\=' || char(9) || char(10) || char(13) || ']*'
                           THEN '"' || replace(replace(p.value, '\', '\\'), '"', '\"') || '"'
                           ELSE p.value END, ' ') OVER (PARTITION BY p.job_id ORDER BY p.key
                                                          ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS config
  FROM job_params AS p
  WHERE p.key IN (SELECT key FROM varying)
), job_config AS (
  SELECT j.id AS job_id, j.method, j.dataset, j.state, coalesce(s.config, '') AS config
  FROM jobs AS j LEFT JOIN settings AS s ON s.job_id = j.id
), done AS (
  SELECT c.method, c.dataset, c.config, r.metric, r.value
  FROM job_results AS r JOIN job_config AS c ON c.job_id = r.job_id
  WHERE r.state = 'done' AND r.value IS NOT NULL
), moments AS (
  SELECT method, dataset, config, metric, COUNT(*) AS n, AVG(value) AS mean, MIN(value) AS min, MAX(value) AS max
  FROM done GROUP BY method, dataset, config, metric
)
SELECT m.method, m.dataset, m.config, m.metric, m.n, m.mean,
       CASE WHEN m.n > 1 THEN
         sqrt((SELECT SUM((d.value - m.mean) * (d.value - m.mean)) FROM done AS d
               WHERE d.method = m.method AND d.dataset = m.dataset AND d.config = m.config AND d.metric = m.metric)
              / (m.n - 1))
       END AS std,
       m.min, m.max,
       (SELECT COUNT(*) FROM job_config AS c
        WHERE c.method = m.method AND c.dataset = m.dataset AND c.config = m.config) AS jobs,
       (SELECT COUNT(*) FROM job_config AS c
        WHERE c.method = m.method AND c.dataset = m.dataset AND c.config = m.config
          AND c.state IN ('failed', 'diverged', 'oom', 'blocked')) AS failed
FROM moments AS m;
)sql";

}  // namespace attnlab::store
