#!/usr/bin/env bash
# The chaos test, by hand (minutes: not part of CI; tests/queue_test.cpp has the short versions).
# Twelve small training jobs run twice from one experiment file: once undisturbed (the
# reference), once by two `attnlab worker` supervisors (lease 5 s, a checkpoint every 10 steps)
# while this script sends, every 1-4 s for CHAOS_SECONDS (default 210), SIGKILL, SIGTERM or
# SIGSTOP (SIGCONT 1-8 s later: past the lease, another worker may take the job over) to a
# supervisor, a device worker or a job process, restarting supervisors as they end. Then it
# reports what a researcher would ask:
#   every job done exactly once? attempts by how they ended? jobs left for a manual retry?
#   integrity? curves, results and accuracy marks bit-identical to the undisturbed run? files left?
# Then a second round, the database's own faults (root: the database lives on a 64 MiB tmpfs):
# for CHAOS_SECONDS, every 5-15 s, either a write lock held past the busy timeout (a `sqlite3`
# holding BEGIN IMMEDIATE for 35 s) or the database's disk full for 2-6 s, while `db gc` and
# `queue retry --state failed,blocked` run every 2 s throughout (what they re-queue is counted as
# manual retries), and the same report.
# Usage: bash scripts/chaos.sh [OUT_DIR] 2>/dev/null
#   (ATTNLAB=path/to/attnlab, CHAOS_SECONDS=N, CHAOS_STEPS=N training steps per job, CHAOS_SEED=N,
#   CHAOS_ROUNDS="signals database" or either alone, CHAOS_REUSE_REFERENCE=1 to keep an earlier
#   run's reference in OUT_DIR)
# About 20 minutes on 2 idle cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${ATTNLAB:-build/runner/attnlab}")
out=${1:-/tmp/attnlab-chaos}
seconds=${CHAOS_SECONDS:-210}
rounds=${CHAOS_ROUNDS:-signals database}
reuse=${CHAOS_REUSE_REFERENCE:-0}  # 1: keep OUT_DIR's reference database from an earlier run
steps=${CHAOS_STEPS:-5000}  # enough work for the signals to go on for the whole CHAOS_SECONDS
RANDOM=${CHAOS_SEED:-13}
[ "$reuse" = 1 ] && [ -f "$out/ref.db" ] || reuse=0
if [ "$reuse" = 0 ]; then rm -rf "$out"; else rm -rf "$out/chaos.db"* "$out/db.ckpt" "$out"/*.log "$out/faults.done"; fi
mkdir -p "$out"
cd "$out"

cat > chaos.toml <<EOF
[experiment]
name = "chaos"
seeds = [1, 2, 3, 4, 5, 6]
[model]
layers = 1
dim = 32
ffn_dim = 64
heads = 2
[train]
steps = $steps
batch_size = 8
lr = 0.002
warmup = 20
eval_every = 50
log_every = 10
checkpoint_every = 10
accuracy_checkpoints = 0.1
[methods.softmax]
[methods.performer]
[datasets.listops]
max_len = 96
train_size = 512
val_size = 64
test_size = 64
max_depth = 3
max_args = 4
min_length = 8
max_length = 90
EOF

workers=(--idle-exit --threads 1 --lease 5 --cache-dir "$out/cache")

if [ "$reuse" = 0 ]; then
  echo "reference: 12 jobs, 2 workers, undisturbed"
  "$bin" queue add chaos.toml --db ref.db --cache-dir "$out/cache" > /dev/null
  start=$SECONDS
  "$bin" worker --db ref.db "${workers[@]}" > ref-1.log 2>&1 &
  "$bin" worker --db ref.db "${workers[@]}" > ref-2.log 2>&1 &
  wait
  echo "  $((SECONDS - start)) s"
else
  echo "reference: kept from an earlier run ($out/ref.db)"
fi

# What a researcher would ask of database $1 after a round (its checkpoints in $1.ckpt).
report() {
  local db=$1 ckpt=$1.ckpt/  # the slash: a folder reached through a link is read too
  q() { sqlite3 "$db" "$@"; }
  echo "report"
  echo "  jobs: $(q "SELECT count(*) FROM jobs") ($(q "SELECT group_concat(state || ' ' || n, ', ') FROM (SELECT state, count(*) AS n FROM jobs GROUP BY state)"))"
  echo "  done exactly once: $(q "SELECT count(*) FROM jobs j WHERE state = 'done' AND (SELECT count(*) FROM runs r WHERE r.job_id = j.id AND r.status = 'done') = 1")"
  echo "  jobs needing a manual retry: $(q "SELECT count(*) FROM jobs WHERE state != 'done'")"
  echo "  most attempts of one job: $(q "SELECT max(attempts) FROM jobs"); most lost in a row: $(q "SELECT max(lost_in_a_row) FROM jobs")"
  echo "  attempts: $(q "SELECT count(*) FROM runs"), by how they ended:"
  q "SELECT '    ' || status || ' ' || count(*) || ': ' || (SELECT group_concat(e, '; ') FROM (SELECT DISTINCT
       CASE WHEN r2.error LIKE 'lease expired%' THEN 'lease expired' ELSE coalesce(r2.error, '-') END AS e
       FROM runs r2 WHERE r2.status = r.status)) FROM runs r GROUP BY status"
  echo "  failure counts: own crashes $(q "SELECT sum(failures) FROM jobs"), ended from outside $(q "SELECT sum(infra_failures) FROM jobs")"
  echo "  integrity: $(q "PRAGMA integrity_check")"
  # The counting run of each job against the reference's, matched by config_hash: every curve point
  # (but wall time) and every result that does not measure time or memory.
  same_points=$(q "ATTACH 'ref.db' AS ref;
    WITH c AS (SELECT j.config_hash AS h, p.split, p.name, p.step, p.value FROM job_outcomes o JOIN jobs j ON j.id = o.job_id
               JOIN curves p ON p.run_id = o.run_id),
         r AS (SELECT j.config_hash AS h, p.split, p.name, p.step, p.value FROM ref.jobs j
               JOIN ref.runs x ON x.job_id = j.id AND x.status = 'done' JOIN ref.curves p ON p.run_id = x.id)
    SELECT (SELECT count(*) FROM c JOIN r USING (h, split, name, step) WHERE c.value IS r.value) || ' of ' ||
           (SELECT count(*) FROM r) || ' reference points equal, ' || (SELECT count(*) FROM c) || ' points in all'")
  untimed="name NOT IN ('wall_seconds', 'train_seconds', 'steps_per_second', 'peak_memory_bytes')"
  same_results=$(q "ATTACH 'ref.db' AS ref;
    WITH c AS (SELECT j.config_hash AS h, x.name, x.value FROM job_outcomes o JOIN jobs j ON j.id = o.job_id
               JOIN results x ON x.run_id = o.run_id WHERE x.$untimed),
         r AS (SELECT j.config_hash AS h, v.name, v.value FROM ref.jobs j JOIN ref.runs x ON x.job_id = j.id AND x.status = 'done'
               JOIN ref.results v ON v.run_id = x.id WHERE v.$untimed)
    SELECT (SELECT count(*) FROM c JOIN r USING (h, name) WHERE c.value IS r.value) || ' of ' || (SELECT count(*) FROM r)")
  same_marks=$(q "ATTACH 'ref.db' AS ref;
    WITH c AS (SELECT j.config_hash AS h, m.mark, m.step, m.checksum FROM job_outcomes o JOIN jobs j ON j.id = o.job_id
               JOIN accuracy_marks m ON m.run_id = o.run_id),
         r AS (SELECT j.config_hash AS h, m.mark, m.step, m.checksum FROM ref.jobs j JOIN ref.runs x ON x.job_id = j.id
               AND x.status = 'done' JOIN ref.accuracy_marks m ON m.run_id = x.id)
    SELECT (SELECT count(*) FROM c JOIN r USING (h, mark) WHERE c.step = r.step AND c.checksum = r.checksum) || ' of ' ||
           (SELECT count(*) FROM r) || ' reference marks equal (step and weights), ' || (SELECT count(*) FROM c) || ' in all'")
  echo "  curves: $same_points"
  echo "  accuracy marks: $same_marks"
  echo "  results other than time and memory: $same_results equal"
  echo "  checkpoints set aside as damaged: $(find "$ckpt" -name '*.damaged' | wc -l)"
  echo "  files left in $ckpt: $(find "$ckpt" -type f | wc -l) ($(find "$ckpt" -name 'run-*.pt' -type f | wc -l) best checkpoints; done jobs: $(q "SELECT count(*) FROM jobs WHERE state = 'done'")), $(du -sh "$ckpt" | cut -f1)"
  echo "  $("$bin" db gc --db "$db" --dry-run)"
}

if [[ " $rounds " == *" signals "* ]]; then
  echo "chaos: 12 jobs, 2 workers, SIGKILL/SIGTERM/SIGSTOP for ${seconds} s"
  "$bin" queue add chaos.toml --db chaos.db --cache-dir "$out/cache" > /dev/null
  supervisors=()
  # bash reports each killed background job on stderr: those lines are the kills themselves, not errors
  start_supervisor() { "$bin" worker --db chaos.db "${workers[@]}" >> chaos.log 2>&1 & supervisors+=($!); }
  start_supervisor
  start_supervisor
  declare -A kills=([supervisor]=0 [device-worker]=0 [job-process]=0)
  declare -A signals=([KILL]=0 [TERM]=0 [STOP]=0)
  start=$SECONDS
  while ((SECONDS - start < seconds)); do
    sleep "$((1 + RANDOM % 3)).$((RANDOM % 10))"
    alive=()
    for pid in "${supervisors[@]}"; do kill -0 "$pid" 2> /dev/null && alive+=("$pid"); done
    supervisors=("${alive[@]}")
    [ "$(sqlite3 chaos.db "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')")" = 0 ] && break
    while ((${#supervisors[@]} < 2)); do start_supervisor; done
    supervisor=${supervisors[RANDOM % ${#supervisors[@]}]}
    device_worker=$(pgrep -P "$supervisor" | head -1 || true)
    job_process=$([ -n "$device_worker" ] && pgrep -P "$device_worker" | head -1 || true)
    case $((RANDOM % 3)) in
      0) victim=$supervisor kind=supervisor ;;
      1) victim=${device_worker:-$supervisor} kind=device-worker ;;
      2) victim=${job_process:-${device_worker:-$supervisor}} kind=job-process ;;
    esac
    [ "$victim" = "$supervisor" ] && kind=supervisor
    [ -n "$device_worker" ] && [ "$victim" = "$device_worker" ] && kind=device-worker
    signal=$(echo KILL TERM STOP | cut -d' ' -f$((1 + RANDOM % 3)))
    if kill -"$signal" "$victim" 2> /dev/null; then
      kills[$kind]=$((kills[$kind] + 1))
      signals[$signal]=$((signals[$signal] + 1))
      [ "$signal" = STOP ] && { sleep "$((1 + RANDOM % 8))"; kill -CONT "$victim" 2> /dev/null; } &
    fi
  done
  echo "  $((SECONDS - start)) s of signals"
  echo "  signals: to supervisors ${kills[supervisor]}, device workers ${kills[device-worker]}, job processes ${kills[job-process]};" \
    "SIGKILL ${signals[KILL]}, SIGTERM ${signals[TERM]}, SIGSTOP+SIGCONT ${signals[STOP]}"
  sleep 9  # every stopped process continued
  # No more faults: two fresh supervisors drain what is left; the killed ones' orphans end with them.
  start_supervisor
  start_supervisor
  wait
  sleep 1
  report chaos.db
fi

if [[ " $rounds " == *" database "* ]]; then
  disk=$out/dbdisk
  mkdir -p "$disk" "$out/db.ckpt"
  if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=64m tmpfs "$disk"; then
    echo "database round: skipped (a small tmpfs for the database needs root)"
    exit 0
  fi
  trap 'umount "$disk" 2> /dev/null || true' EXIT
  db=$disk/faults.db
  ln -s "$out/db.ckpt" "$db.ckpt"  # the checkpoints elsewhere: only the database's disk fills
  echo "database: 12 jobs, 2 workers, locks past the busy timeout and the database's disk full for ${seconds} s"
  "$bin" queue add chaos.toml --db "$db" --cache-dir "$out/cache" > /dev/null
  supervisors=()
  start_db_supervisor() { "$bin" worker --db "$db" "${workers[@]}" >> faults.log 2>&1 & supervisors+=($!); }
  start_db_supervisor
  start_db_supervisor
  # db gc and queue retry throughout; what retry re-queues is a manual retry the faults cost
  (while [ ! -e "$out/faults.done" ]; do
     "$bin" db gc --db "$db" >> gc.log 2>&1 || true
     "$bin" queue retry --state failed,blocked --db "$db" >> retry.log 2>&1 || true
     sleep 2
   done) &
  housekeeping=$!
  locks=0 fulls=0
  start=$SECONDS
  while ((SECONDS - start < seconds)); do
    sleep "$((5 + RANDOM % 11))"
    [ "$(sqlite3 "$db" "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')" 2> /dev/null)" = 0 ] && break
    alive=()
    for pid in "${supervisors[@]}"; do kill -0 "$pid" 2> /dev/null && alive+=("$pid"); done
    supervisors=("${alive[@]}")
    while ((${#supervisors[@]} < 2)); do start_db_supervisor; done
    if ((RANDOM % 2)); then
      # a writer holding the lock past every other connection's 30 s busy timeout
      { echo ".timeout 10000"; echo "BEGIN IMMEDIATE;"; sleep 35; echo "COMMIT;"; } | sqlite3 "$db" > /dev/null 2>&1
      locks=$((locks + 1))
    else
      dd if=/dev/zero of="$disk/filler" bs=64k > /dev/null 2>&1 || true
      sleep "$((2 + RANDOM % 5))"
      rm -f "$disk/filler"
      fulls=$((fulls + 1))
    fi
  done
  echo "  $((SECONDS - start)) s of faults: locks held 35 s: $locks; disk full 2-6 s: $fulls"
  start_db_supervisor
  start_db_supervisor
  wait "${supervisors[@]}" 2> /dev/null || true
  touch "$out/faults.done"
  wait "$housekeeping" || true
  sleep 1
  echo "  manual retries: $(grep -o 'queued again [0-9]*' retry.log | awk '{n += $3} END {print n + 0}') jobs re-queued by queue retry"
  echo "  worker lines about the database: $(grep -c 'claims no more jobs\|could not write the database\|database is locked\|disk is full' faults.log || true)"
  report "$db"
fi
