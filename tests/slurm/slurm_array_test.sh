#!/usr/bin/env bash
# The issue's SLURM test, against a real single-node SLURM (Debian's slurmctld, slurmd, munge):
# starts munged, slurmctld and slurmd on loopback with their own configuration, keys and state in a
# scratch folder (nothing in /etc is read or changed), submits a four-job experiment as an array
# with `attnlab slurm submit --max-parallel 2`, requeues the long task once while it trains
# (SLURM's requeue: the task must finish its job from its own shard), collects once mid-array,
# waits for the array, runs `attnlab slurm collect` twice, and checks the main database: every job
# done with its results, every shard's run there once, and the second collect changed nothing.
# The daemons are stopped by pid at exit, even on failure.
#
# usage: slurm_array_test.sh ATTNLAB_BINARY        exit 77: skipped (not root, packages missing)
# KEEP_SLURM_TEST_DIR=1 keeps the scratch folder (daemon logs, task logs, databases).
set -euo pipefail

attnlab=${1:?usage: slurm_array_test.sh ATTNLAB_BINARY}
attnlab=$(readlink -f "$attnlab")
started=$(date +%s.%N)

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (it starts munged, slurmctld and slurmd)"
PATH=$PATH:/usr/sbin:/sbin
for tool in munged munge unmunge slurmctld slurmd sbatch squeue scontrol sinfo sqlite3 setpriv; do
  command -v "$tool" >/dev/null || skip "$tool not installed (bash scripts/install-deps.sh installs slurmctld slurmd slurm-client munge sqlite3)"
done
id munge >/dev/null 2>&1 || skip "no munge user (the munge package creates it)"
[ -x "$attnlab" ] || { echo "FAIL: $attnlab is not executable"; exit 1; }

work=$(mktemp -d /tmp/attnlab-slurm-test.XXXXXX)
chmod 711 "$work"  # the munge user must reach its socket folder inside
export SLURM_CONF="$work/slurm.conf"
# Every process the test starts, and what they start in turn (slurmstepd, the array's tasks and
# their job processes), carries this variable, so that cleanup can find each of them by pid.
marker="ATTNLAB_SLURM_TEST=$work"
daemon_pids=()
fail() {
  echo "FAIL: $*"
  for log in "$work"/log/*.log "$work"/main.db.slurm/*/logs/*.out; do
    [ -f "$log" ] && { echo "--- $log (last lines)"; tail -n 25 "$log"; }
  done
  exit 1
}
job=""
cleanup() {
  local pid
  # A test that failed mid-array: cancel it while the daemons still run.
  if [ -n "$job" ]; then
    scancel "$job" 2>/dev/null || true
    for _ in $(seq 50); do [ -z "$(squeue --noheader --jobs "$job" 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  for pid in "${daemon_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${daemon_pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  # slurmd's job steps (slurmstepd and the tasks under it) outlive slurmd: stop, by pid, whatever
  # still carries the marker.
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}; pid=${pid%/environ}
    tr '\0' '\n' <"$environ" 2>/dev/null | grep -qxF "$marker" && kill -9 "$pid" 2>/dev/null  || true
  done
  if [ "${KEEP_SLURM_TEST_DIR:-0}" = 1 ]; then echo "scratch folder kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
# waits up to $1 seconds for the command after it to succeed
wait_for() {
  local seconds=$1; shift
  local deadline=$(( $(date +%s) + seconds ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
elapsed() { awk -v now="$(date +%s.%N)" -v t0="$started" 'BEGIN { printf "%.1f", now - t0 }'; }
sql() { sqlite3 -bail -cmd '.timeout 10000' "$@"; }

# --- munge: its own key and socket -------------------------------------------------------------
mkdir -p "$work/munge" "$work/log" "$work/state" "$work/spool"
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
chown -R munge:munge "$work/munge"
chmod 755 "$work/munge"  # munged insists that every user can reach its socket
socket="$work/munge/munge.socket"
env "$marker" setpriv --reuid=munge --regid=munge --init-groups munged --foreground --socket="$socket" \
  --key-file="$work/munge/munge.key" --pid-file="$work/munge/munged.pid" --seed-file="$work/munge/munged.seed" \
  --log-file="$work/log/munged.log" >"$work/log/munged.out" 2>&1 &
daemon_pids+=($!)
check_munge() { munge -S "$socket" -n | unmunge -S "$socket"; }
wait_for 20 check_munge || fail "munged did not answer on $socket"

# --- slurmctld and slurmd on loopback, on two free ports -----------------------------------------
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=$(( 20000 + RANDOM % 20000 ))
until port_free "$port" && port_free $((port + 1)); do port=$(( 20000 + RANDOM % 20000 )); done
node=$(hostname -s)
memory_mb=$(awk '/^MemTotal:/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
cat >"$SLURM_CONF" <<EOF
ClusterName=attnlabtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$memory_mb State=UNKNOWN
PartitionName=attnlab Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
env "$marker" slurmctld -D -i >"$work/log/slurmctld.out" 2>&1 &
daemon_pids+=($!)
wait_for 30 scontrol ping || fail "slurmctld did not answer"
env "$marker" slurmd -D >"$work/log/slurmd.out" 2>&1 &
daemon_pids+=($!)
node_idle() { [ "$(sinfo --noheader --nodes="$node" --format=%t)" = idle ]; }
wait_for 60 node_idle || fail "node $node did not become idle: $(sinfo --noheader 2>&1)"
echo "SLURM up on 127.0.0.1:$port ($(nproc) CPUs, ${memory_mb} MB) after $(elapsed) s"

# --- the experiment: 2 methods x 2 datasets; the ListOps jobs train longer (the requeued one) ----
cat >"$work/exp.toml" <<'EOF'
[experiment]
name = "slurm-array"
seeds = [1]
[model]
layers = 1
dim = 16
ffn_dim = 32
heads = 2
[train]
steps = 40
batch_size = 8
lr = 0.002
warmup = 4
eval_every = 20
log_every = 10
checkpoint_every = 50
[methods.softmax]
[methods.linear_elu]
[datasets.listops]
max_len = 64
train_size = 256
val_size = 32
test_size = 32
max_depth = 3
max_args = 4
min_length = 3
max_length = 60
[datasets.listops.train]
steps = 400
[datasets.sparse_sum]
length = 32
train_size = 270
val_size = 36
test_size = 36
EOF
db="$work/main.db"
env "$marker" "$attnlab" slurm submit "$work/exp.toml" --db "$db" --cache-dir "$work/cache" --max-parallel 2 --time 10 \
  >"$work/submit.out" 2>&1 || { cat "$work/submit.out"; fail "slurm submit"; }
cat "$work/submit.out"
job=$(sed -n 's/^submitted SLURM job \([0-9][0-9]*\):.*/\1/p' "$work/submit.out")
[ -n "$job" ] || fail "no SLURM job id in the submit output"
jobs_total=$(sql "$db" "SELECT count(*) FROM jobs")
[ "$jobs_total" = 4 ] || fail "expected 4 jobs in the main database, found $jobs_total"
[ "$(sql "$db" "SELECT count(*) FROM jobs WHERE state = 'submitted'")" = 4 ] || fail "jobs not marked submitted"
folder=$(ls -d "$db.slurm"/*/)
grep -q -- '--array=0-3%2' "$folder/submit.sbatch" || fail "the script lacks --array=0-3%2"

# --- requeue task 0 (ListOps, 400 steps) once it trains: SLURM's requeue, not ours --------------
shard0="$folder/shards/task-0.db"
training() { [ "$(sql "$shard0" "SELECT count(*) FROM curves c JOIN runs r ON r.id = c.run_id WHERE r.status = 'running'")" -gt 0 ]; }
if wait_for 120 training; then
  scontrol requeue "${job}_0" || fail "scontrol requeue ${job}_0"
  # A requeued job waits (BeginTime) before it is eligible again; let it start now.
  pending() { [ "$(squeue --noheader --array --jobs "$job" --format '%K %T' | awk '$1 == 0 { print $2 }')" = PENDING ]; }
  wait_for 30 pending || fail "task 0 did not go back to pending after the requeue"
  scontrol update jobid="${job}_0" StartTime=now || fail "could not release the requeued task"
  echo "requeued task 0 while it trained, after $(elapsed) s"
else
  fail "task 0 never started training"
fi

# A collect while tasks still write their shards: what finished is merged, the rest left for later.
"$attnlab" slurm collect --db "$db" >"$work/collect0.out" 2>&1 || { cat "$work/collect0.out"; fail "collect during the array"; }
echo "collect during the array: $(grep -o '[0-9]* done, [0-9]* failed, [0-9]* unfinished.*' "$work/collect0.out")"

# --- wait for the whole array, throttled to 2 at a time -------------------------------------
max_running=0
array_done() {
  local running
  running=$(squeue --noheader --array --jobs "$job" --states RUNNING --format %K 2>/dev/null | wc -l)
  [ "$running" -le "$max_running" ] || max_running=$running
  [ -z "$(squeue --noheader --array --jobs "$job" --format %K 2>/dev/null)" ]
}
wait_for 420 array_done || fail "the array did not finish within 7 minutes: $(squeue --array 2>&1)"
echo "array finished after $(elapsed) s (at most $max_running task(s) running at once)"
[ "$max_running" -le 2 ] || fail "$max_running tasks ran at once despite --max-parallel 2"
grep -q "restart 1" "$folder"/logs/"${job}"_0.out || fail "task 0's log shows no second incarnation (restart 1)"

# --- collect twice ---------------------------------------------------------------------------
counts() {
  sql "$db" "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM runs), (SELECT count(*) FROM results),
                    (SELECT count(*) FROM curves), (SELECT count(*) FROM run_plugins), (SELECT count(*) FROM experiments),
                    (SELECT group_concat(state) FROM (SELECT state FROM jobs ORDER BY id))"
}
"$attnlab" slurm collect --db "$db" >"$work/collect1.out" 2>&1 || { cat "$work/collect1.out"; fail "first collect"; }
cat "$work/collect1.out"
after_first=$(counts)
"$attnlab" slurm collect --db "$db" >"$work/collect2.out" 2>&1 || { cat "$work/collect2.out"; fail "second collect"; }
cat "$work/collect2.out"
after_second=$(counts)
[ "$after_first" = "$after_second" ] || fail "the second collect changed the database: $after_first -> $after_second"
grep -q " 0 run(s) merged now" "$work/collect2.out" || fail "the second collect merged runs again"

# --- every job's results in the main database ----------------------------------------------------
[ "$(sql "$db" "SELECT count(*) FROM jobs WHERE state = 'done'")" = 4 ] ||
  fail "not every job is done: $(sql "$db" "SELECT id, method, dataset, state, error FROM jobs")"
missing=$(sql "$db" "SELECT j.id FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM runs r JOIN results s ON s.run_id = r.id
                     WHERE r.job_id = j.id AND r.status = 'done' AND s.name = 'test_acc')")
[ -z "$missing" ] || fail "jobs without a done run with test_acc: $missing"
done_runs=$(sql "$db" "SELECT count(*) FROM runs WHERE status = 'done'")
[ "$done_runs" = 4 ] || fail "expected exactly 4 done runs (one per job), found $done_runs"
for task in 0 1 2 3; do  # the main database holds every run of every shard
  shard_runs=$(sql "$folder/shards/task-$task.db" "SELECT group_concat(uid) FROM (SELECT uid FROM runs ORDER BY uid)")
  for uid in ${shard_runs//,/ }; do
    [ "$(sql "$db" "SELECT count(*) FROM runs WHERE uid = '$uid'")" = 1 ] || fail "run $uid of task $task not merged exactly once"
  done
done
# The requeued task's job: its first attempt stopped by SLURM's SIGTERM (interrupted, with a resume
# checkpoint), its second one, in the task's next incarnation, done.
attempts0=$(sql "$db" "SELECT group_concat(status) FROM (SELECT status FROM runs WHERE job_id = (SELECT min(id) FROM jobs) ORDER BY attempt)")
[ "$attempts0" = "interrupted,done" ] || fail "task 0's job: attempts $attempts0, expected interrupted,done"
echo "task 0's job: $(sql "$db" "SELECT 'attempt 1 ' || status || ' after step ' || resume_step FROM runs
                                  WHERE job_id = (SELECT min(id) FROM jobs) AND attempt = 1"), attempt 2 done"
sql -header -column "$db" "SELECT j.id AS job, j.method, j.dataset, j.state, count(r.id) AS runs,
                            (SELECT round(value, 3) FROM results s JOIN runs d ON d.id = s.run_id
                             WHERE d.job_id = j.id AND d.status = 'done' AND s.name = 'test_acc') AS test_acc
                           FROM jobs j LEFT JOIN runs r ON r.job_id = j.id GROUP BY j.id ORDER BY j.id"
echo "PASS: SLURM array of 4 jobs (one task requeued mid-training) submitted, collected during and twice after it, every result in the main database; wall time $(elapsed) s"
