#!/usr/bin/env bash
# The two builds on this machine's CPU, in one run (README.md, "Which build"): attnlab bench of
# build/ (LibTorch 1.13) and build-cuda/ (LibTorch 2.11), one after the other, into one database
# (BENCH_DB, default builds-bench.db; each row keeps its LibTorch version): softmax at 1K, 4K and
# 16K tokens, then every method at 4K; then the two side by side as a markdown table.
# BENCH_ARGS (default "--batch-size 2 --warmup 2 --steps 5") go to every bench.
set -euo pipefail
cd "$(dirname "$0")/.."
db=${BENCH_DB:-builds-bench.db}
args=${BENCH_ARGS:-"--batch-size 2 --warmup 2 --steps 5"}
for build in build build-cuda; do
  [ -x "$build/runner/attnlab" ] || { echo "bench-builds: no $build/runner/attnlab (scripts/build.sh [--torch2])" >&2; exit 1; }
done
echo "bench-builds: $(nproc) cores; $(uptime | sed 's/.*load/load/')"
for build in build build-cuda; do
  # shellcheck disable=SC2086  # the arguments are words
  "$build/runner/attnlab" bench --db "$db" --methods softmax --lengths 1024,4096,16384 $args >/dev/null
  # shellcheck disable=SC2086
  "$build/runner/attnlab" bench --db "$db" --lengths 4096 $args >/dev/null
done
# the newest row of each (LibTorch, method, length), side by side
sqlite3 -markdown "$db" "
WITH latest AS (
  SELECT * FROM bench_results WHERE id IN (SELECT max(id) FROM bench_results GROUP BY torch_version, method, seq_len, batch_size)),
old AS (SELECT * FROM latest WHERE torch_version LIKE '1.%'),
new AS (SELECT * FROM latest WHERE torch_version LIKE '2.%')
SELECT old.method, old.seq_len AS length, old.batch_size AS batch,
       printf('%.3f', old.step_seconds_median) AS 'step 1.13 (s)', printf('%.3f', new.step_seconds_median) AS 'step 2.11 (s)',
       printf('%.2f', new.step_seconds_median / old.step_seconds_median) AS '2.11 / 1.13',
       printf('%.0f', old.peak_memory_bytes / 1048576.0) AS 'peak 1.13 (MiB)', printf('%.0f', new.peak_memory_bytes / 1048576.0) AS 'peak 2.11 (MiB)',
       CASE WHEN old.status = 'done' AND new.status = 'done' THEN '' ELSE old.status || ' / ' || new.status END AS status
FROM old JOIN new USING (method, seq_len, batch_size)
ORDER BY old.method != 'softmax', old.seq_len, old.method"
