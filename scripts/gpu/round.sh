#!/usr/bin/env bash
# The GPU round (scripts/gpu/README.md): ON the GPU machine, in the project root, with .gpu-tree/
# carried (scripts/gpu/pack.sh builds it here against the LibTorch 2.11 + CUDA 13.0 that the
# machine's python3 has), so that nothing is compiled there. With ROUND_DEVICE=cpu it is the CPU
# stand-in: the same stages at toy sizes, to know here that each one starts and ends.
#
# Stages, in order of what only a GPU can tell (each within its own time; one that fails or runs out
# is recorded and the round goes on; a line per stage in summary.txt):
#   setup        the machine, the tree loaded against the machine's LibTorch, attnlab env
#                (if the tree does not load and .gpu-debs/ was carried: scripts/gpu/build.sh there)
#   checks       attnlab check of every method on the device: fp32, and bf16 + fp16 autocast
#   listops-step the training step of softmax and Skyformer at the paper's ListOps shape (2,000
#                tokens, batch 32): bf16, then fp32 eager (its ops counted, one step traced: the
#                host's account) and as a replayed CUDA graph; held against 5 ms
#   packed       the same steps with 2, 4 and 8 processes at once on the GPU (bench --concurrent):
#                the steps a second of all of them, held against 400
#   determinism  a ListOps job (2,000 tokens, batch 32, deterministic = true, CUDA graphs) twice: the
#                same curves? and once eagerly (cuda_graphs = "off"): the same within tolerance?
#   resume       the same job, its process killed after a checkpoint, resumed: the same curves?
#   listops      softmax and Skyformer at conf/skyformer-lra.toml's ListOps settings, two jobs at
#                once on the GPU, for as many of the 50,000 steps as fit (from the packed step time)
#   estimate     attnlab estimate conf/skyformer-lra.toml from this round's bench, the bench commands
#                it names run while time is left, then the estimate again: Table 1's GPU-hours
#   bench-*      attnlab bench at 1K/4K/16K, batch 32: step bf16, attention-only bf16, step fp32,
#                attention-only fp32 (every method; each row stored as it is measured); and
#                softmax's attention-only bf16 at 16K with heads of 128 (bench-attn-d128); only
#                with the time left
#   show         the stored bench rows and the ListOps results as tables
# Everything lands in $OUT (./gpu-out if unset), at most the 8 files the device tool brings back.
#
# Knobs (environment): ROUND_DEVICE (cuda:0), ROUND_METHODS=a,b (default: every method found),
# ROUND_SKIP=checks,bench-fp32,... (stage names), ROUND_LENGTHS (1024,4096,16384), ROUND_BATCH (32),
# ROUND_BENCH_ARGS ("--warmup 2 --steps 5"), ROUND_CHECK_JOBS (4 checks at once), ROUND_PACKED (2,4,8:
# the processes at once of the packed stage), seconds per stage: ROUND_CHECKS_S ROUND_STEP_S
# ROUND_PACKED_S ROUND_DETERMINISM_S ROUND_RESUME_S ROUND_LISTOPS_S ROUND_ESTIMATE_S ROUND_BENCH_S (each bench);
# ROUND_END (epoch seconds by which everything must be over; default: this script's start + 570);
# ROUND_TORCH_LIB (the LibTorch libraries to run against; default: python3's torch's), ROUND_TREE
# (.gpu-tree), ROUND_WORK (/tmp/attnlab-round: databases, checkpoints, the generated ListOps).
set -uo pipefail  # no -e: a stage that fails is recorded, and the round goes on
cd "$(dirname "$0")/../.." || exit 1
started=$(date +%s)
tree=${ROUND_TREE:-.gpu-tree}
[[ $tree == /* ]] || tree=$PWD/$tree
out=${OUT:-$PWD/gpu-out}
device=${ROUND_DEVICE:-cuda:0}
work=${ROUND_WORK:-/tmp/attnlab-round}  # databases, checkpoints, the generated ListOps (1 GB)
mkdir -p "$out" "$work"
summary=$out/summary.txt
: >"$summary"
for f in setup.log checks.log train.log bench.log tables.txt; do : >"$out/$f"; done  # a rerun's logs start empty

# Sizes: the GPU round's, or the CPU stand-in's (the same stages, small enough for 2 cores)
if [ "$device" = cpu ]; then
  standin=1 default_methods=softmax,skyformer
  lengths=${ROUND_LENGTHS:-64,128} batch=${ROUND_BATCH:-2} bench_args=${ROUND_BENCH_ARGS:-"--warmup 1 --steps 2"}
  train_len=128 train_batch=4 train_rows=400 eval_rows=40 det_steps=30 ckpt_every=10 det_eval=(10 4) listops_eval=(20 4)
  packed=${ROUND_PACKED:-2}
else
  standin="" default_methods=""
  lengths=${ROUND_LENGTHS:-1024,4096,16384} batch=${ROUND_BATCH:-32} bench_args=${ROUND_BENCH_ARGS:-"--warmup 2 --steps 5"}
  # the determinism job: 300 steps, evaluated every 100 on 10 batches; the long runs as the paper
  train_len=2048 train_batch=32 train_rows=96000 eval_rows=2000 det_steps=300 ckpt_every=100 det_eval=(100 10) listops_eval=(500 62)
  packed=${ROUND_PACKED:-2,4,8}
fi
checks_s=${ROUND_CHECKS_S:-80} step_s=${ROUND_STEP_S:-60} packed_s=${ROUND_PACKED_S:-90}
determinism_s=${ROUND_DETERMINISM_S:-100} resume_s=${ROUND_RESUME_S:-45} listops_s=${ROUND_LISTOPS_S:-330}
estimate_s=${ROUND_ESTIMATE_S:-120} bench_s=${ROUND_BENCH_S:-75} check_jobs=${ROUND_CHECK_JOBS:-4}
end=${ROUND_END:-$(( started + 570 ))}  # the device tool ends a call at 600 s

say() { echo "round: $*" | tee -a "$summary"; }
report() { printf '%-15s %-13s %5ss  %s\n' "$1" "$2" "$3" "${4:-}" | tee -a "$summary"; }
skipped() { [[ ",${ROUND_SKIP:-}," == *",$1,"* ]]; }
verdict() { case $1 in 0) echo ok ;; 124 | 137) echo TIMEOUT ;; *) echo "FAILED($1)" ;; esac; }
# stage NAME SECONDS LOG COMMAND...: COMMAND (a program, or a function exported below) within its
# seconds or what is left before the end (10 s kept to wrap up, 30 more for the last stage, show),
# its output appended to $out/LOG.
# `timeout` ends the command's whole process group. The summary line ends with the last line the
# command wrote that starts with "=> ".
stage() {
  local name=$1 s=$2 log=$out/$3 t0=$SECONDS rc left
  shift 3
  left=$(( end - $(date +%s) - 10 ))
  [ "$name" = show ] || left=$(( left - 30 ))  # kept for the tables
  (( left < s )) && s=$left
  if skipped "$name"; then report "$name" skipped 0; return 1; fi
  if (( s < 5 )); then report "$name" "no time left" 0; return 1; fi
  echo "### $name (at most ${s}s): $*" >>"$log"
  local from=$(( $(wc -l <"$log") + 1 ))
  timeout -k 5 "$s" "$@" >>"$log" 2>&1
  rc=$?
  report "$name" "$(verdict $rc)" $(( SECONDS - t0 )) "$(tail -n "+$from" "$log" | grep '^=> ' | tail -1 | cut -c4-)"
  return $rc
}

# --- setup: the tree against this machine's LibTorch --------------------------------------------
setup_log=$out/setup.log
{
  echo "### machine"
  sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"'
  echo "$(nproc) cores, $(ldd --version 2>/dev/null | head -1)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || true
  python3 -c 'import torch; print("python3: torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1
} >>"$setup_log"
torch_lib=${ROUND_TORCH_LIB:-$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>>"$setup_log")}
# attnlab through a wrapper that puts first the tree's copies of the Debian libraries the machine
# lacks, then the machine's LibTorch and the CUDA runtime beside it (libattnlab_core links
# libcudart itself) (LD_LIBRARY_PATH comes before the RUNPATH the binaries carry, which names where
# they were built); the machine's own programs (python3) never see them
cuda_lib=$(cd "$torch_lib/../../nvidia/cu13/lib" 2>/dev/null && pwd)
attnlab=$work/attnlab
cat >"$attnlab" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$tree/lib/system:$torch_lib:$cuda_lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$tree/bin/attnlab" "\$@"
EOF
chmod +x "$attnlab"
echo "### attnlab env, by $(tail -1 "$attnlab")" >>"$setup_log"
if ! "$attnlab" env >>"$setup_log" 2>&1; then
  say "the carried tree does not load against ${torch_lib:-no LibTorch} (setup.log says why)"
  if [ -d .gpu-debs ] && [ -z "$standin" ]; then
    say "building it here instead (scripts/gpu/build.sh), $(( end - $(date +%s) ))s left"
    OUT="" GPU_INSTALL_PREFIX=$tree bash scripts/gpu/build.sh -DBUILD_TESTING=OFF >>"$setup_log" 2>&1
    "$attnlab" env >>"$setup_log" 2>&1 || { say "the tree built here does not load either"; exit 1; }
  else
    exit 1
  fi
fi
report setup ok $(( $(date +%s) - started )) "$(grep -E '^(LibTorch|CUDA|devices) ' "$setup_log" | tr -s ' ' | paste -sd ';')"
say "$(date -u '+%F %T UTC'), device $device, ends by $(date -u -d "@$end" '+%T UTC')${standin:+, CPU stand-in sizes}"

methods=${ROUND_METHODS:-$default_methods}
if [ -z "$methods" ]; then  # the names under "Attention methods:" in `attnlab plugins`
  methods=$("$attnlab" plugins 2>/dev/null |
    awk '/^Attention methods:/ {a = 1; next} /^[^ ]/ {a = 0} a && /^  [^ ]/ {print $1}' | paste -sd,)
fi
say "methods: $methods"
export attnlab device work out methods check_jobs train_len train_batch train_rows eval_rows

# --- checks: the conformance suite of every method on the device, a few at once -----------------
check_one() {  # METHOD: its own log, the exit status as its last line
  "$attnlab" check "$1" --device "$device" >"$work/check-$1.log" 2>&1
  echo "### check $1: exit $?" >>"$work/check-$1.log"
}
checks() {
  local m failed=() count=0
  rm -f "$work"/check-*.log
  tr , '\n' <<<"$methods" | xargs -P "$check_jobs" -I{} bash -c 'check_one {}'
  for m in ${methods//,/ }; do
    count=$(( count + 1 ))
    cat "$work/check-$m.log" 2>/dev/null || echo "### check $m: no log"
    grep -q "^### check $m: exit 0$" "$work/check-$m.log" 2>/dev/null || failed+=("$m")
  done
  echo "=> $(( count - ${#failed[@]} ))/$count methods pass every check${failed:+; not: ${failed[*]}}"
  (( ${#failed[@]} == 0 ))
}
export -f check_one checks
stage checks "$checks_s" checks.log bash -c checks

# --- bench at the jobs' shape: ListOps' step (fp32, 2,000 tokens, batch 32) -----------------------
bench_run() {  # attnlab bench ARGS..., then "=> " the rows it stored: done, oom, failed
  local before
  before=$(python3 -c 'import sqlite3, sys
try: print(sqlite3.connect(sys.argv[1]).execute("SELECT coalesce(max(id), 0) FROM bench_results").fetchone()[0])
except sqlite3.Error: print(0)' "$out/bench.db")
  "$attnlab" bench "$@"
  python3 - "$out/bench.db" "$before" <<'EOF'
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "SELECT status, count(*) FROM bench_results WHERE id > ? GROUP BY status ORDER BY status", (int(sys.argv[2]),)).fetchall()
print("=> rows: " + (", ".join(f"{n} {status}" for status, n in rows) or "none"))
EOF
}
# listops_steps [AT_ONCE]: per method, the newest rows at the jobs' shape: eager (with its ops) and
# as the default runs it (a CUDA graph on a GPU); with AT_ONCE (2,4,8) the steps a second of each
# packed group, all of its processes together. The last line is the stage's figure.
listops_steps() {
  python3 - "$out/bench.db" "$train_len" "$train_batch" "${1:-}" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
length, batch, packed = int(sys.argv[2]), int(sys.argv[3]), [int(n) for n in sys.argv[4].split(",") if n]
def newest(method, mode_like, at_once, precision="fp32"):  # the precision is in the row's config
    bf16 = "%bf16%" if precision == "bf16" else "%"
    return db.execute("SELECT step_seconds_median, ops_per_step, host_seconds_median, id FROM bench_results WHERE method = ? "
                      "AND seq_len = ? AND batch_size = ? AND status = 'done' AND step_mode LIKE ? "
                      "AND concurrent = ? AND config_toml LIKE ? AND (config_toml NOT LIKE '%bf16%' OR ? = 'bf16') "
                      "ORDER BY id DESC", (method, length, batch, mode_like, at_once, bf16, precision)).fetchall()
parts = []
for method in ("softmax", "skyformer"):
    eager, graph = newest(method, "eager (cuda graphs off: [train]%", 1), newest(method, "cuda graph", 1)
    if not packed:
        text = method
        if eager:
            step, ops, host, _ = eager[0]
            text += f" eager {step * 1e3:.2f} ms ({ops or '?'} ops, host {host * 1e3:.2f} ms)"
        text += f", graph {graph[0][0] * 1e3:.2f} ms" if graph else ", no graph row"
        bf16 = newest(method, "%", 1, "bf16")
        if bf16: text += f"; bf16 {bf16[0][0] * 1e3:.2f} ms"
        parts.append(text)
        continue
    mode = "cuda graph" if graph else "eager (%"  # as the jobs run: a graph where there is one
    single = newest(method, mode, 1)
    groups = [f"1: {1 / single[0][0]:.0f}"] if single else []
    for n in packed:
        rows = newest(method, mode, n)[:n]  # one group: its n processes' rows
        if len(rows) == n: groups.append(f"{n}: {sum(1 / r[0] for r in rows):.0f}")
    parts.append(f"{method} " + ", ".join(groups))
print("=> " + ("steps/s, all processes: " if packed else "step: ") + "; ".join(parts))
EOF
}
# trace_summary DIR: each Chrome trace `bench --trace` wrote (one step of a method): its ops, the
# host's time inside them (the top-level ops' spans on each thread), and the top-level ops that
# took most of it; a host-bound step is read here
trace_summary() {
  python3 - "$1" <<'EOF'
import collections, json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    data = json.loads(path.read_text())
    events = [e for e in (data.get("traceEvents", []) if isinstance(data, dict) else data) if e.get("ph") == "X"]
    spans = collections.defaultdict(list)
    for e in events:
        start = float(e["ts"])
        spans[e.get("tid")].append((start, start + float(e.get("dur", 0)), e["name"]))
    count, took = collections.Counter(), collections.Counter()
    for thread in spans.values():
        end = float("-inf")
        for start, stop, name in sorted(thread, key=lambda s: (s[0], -s[1])):
            if start >= end:  # not inside the top-level op before it
                count[name] += 1
                took[name] += stop - start
                end = stop
    print(f"{path.stem}: {len(events)} ops, {sum(count.values())} top-level, {sum(took.values()) / 1000:.2f} ms of host time in them")
    for name, t in took.most_common(10):
        print(f"  {name:<64} {count[name]:6d} x {t / 1000:9.3f} ms")
EOF
}
export -f bench_run listops_steps trace_summary
export packed
rm -f "$out"/bench.db*
# shellcheck disable=SC2054  # commas inside words, not between them
shape=(--device "$device" --db "$out/bench.db" --methods softmax,skyformer --lengths "$train_len" --batch-size "$train_batch")
# bf16 as the jobs would run it; fp32 eagerly, its ops counted and one more step traced (LibTorch's
# profiler, host side); then fp32 as the jobs run it (a graph on a GPU)
# shellcheck disable=SC2016  # expanded by the stage's shell
stage listops-step "$step_s" bench.log bash -c 'bench_run "$@" --precision bf16 &&
  bench_run "$@" --precision fp32 --cuda-graphs off --ops --trace "$work/traces" && trace_summary "$work/traces" &&
  bench_run "$@" --precision fp32 && listops_steps' bench_run "${shape[@]}"
# shellcheck disable=SC2016
stage packed "$packed_s" bench.log bash -c 'bench_run "$@" && listops_steps "$packed"' bench_run "${shape[@]}" \
  --precision fp32 --concurrent "$packed"

# --- training: ListOps generated by LRA's rules, one experiment file per use ---------------------
# job_file NAME METHODS STEPS EVAL_EVERY EVAL_BATCHES [TRAIN LINES]: conf/skyformer-lra.toml's
# ListOps model and the authors' training (OneCycleLR, values clipped, their mean pooling, mask,
# validation stream, test batches and checkpoint rule; warm-up 1,000 steps, or a tenth of a shorter
# run, never the one step OneCycleLR refuses), at their padded length, in fp32 (their fp16 autocast
# is left to a round that has measured it); prints its path
job_file() {
  local file=$work/$1.toml warmup=$(( $3 / 10 < 1000 ? $3 / 10 : 1000 )) m
  [ "$warmup" -eq 1 ] && warmup=2
  {
    printf '[experiment]\nname = "gpu-round-%s"\nseeds = [1]\n' "$1"
    printf '[model]\nlayers = 2\ndim = 64\nffn_dim = 128\nheads = 2\nhead_dim = 32\ndropout = 0.1\npooling = "mean_with_padding"\n'
    printf 'mask = "nonzero_tokens"\n'
    printf '[train]\nsteps = %s\nbatch_size = %s\nlr = 0.0001\nwarmup = %s\ndecay = "onecycle"\neps = 1e-6\n' "$3" "$train_batch" "$warmup"
    printf 'clip_value = 1.0\nclip_norm = 0.0\nkeep_best_after = 0.2\neval_draw = "stream"\ntest_drop_last = true\n'
    printf 'eval_every = %s\neval_batches = %s\nvariance_passes = 0\n%b\n' "$4" "$5" "${6:-}"
    printf '[datasets.listops]\nsource = "generate"\nmax_len = %s\ntrain_size = %s\nval_size = %s\ntest_size = %s\n' \
      "$train_len" "$train_rows" "$eval_rows" "$eval_rows"
    for m in ${2//,/ }; do
      printf '[methods.%s]\n' "$m"
      case $m in softmax) echo "dropout = 0.1" ;; skyformer) echo "landmarks = 128" ;; esac
    done
  } >"$file"
  echo "$file"
}
run_job() {  # FILE DB [ARGS...]: attnlab run on the device, the generated data cached in $work
  local file=$1 db=$2
  shift 2
  "$attnlab" run "$file" --db "$db" --devices "$device" --cache-dir "$work/cache" "$@"
}
# same_runs DB_A DB_B [TOLERANCE]: the done runs of two databases, every curve point and every
# result but the timings, compared exactly, or within a relative TOLERANCE
same_runs() {
  python3 - "$1" "$2" "${3:-0}" <<'EOF'
import sqlite3, sys
def read(path):
    db = sqlite3.connect(path)
    run = db.execute("SELECT run_id FROM job_outcomes WHERE state = 'done'").fetchone()
    if run is None: sys.exit(f"=> {path}: no done job")
    curves = db.execute("SELECT split, name, step, value FROM curves WHERE run_id = ? ORDER BY 1, 2, 3", run).fetchall()
    timing = ("wall_seconds", "train_seconds", "steps_per_second", "peak_memory_bytes")
    results = db.execute(f"SELECT name, value FROM results WHERE run_id = ? AND name NOT IN {timing} ORDER BY 1", run).fetchall()
    return curves, results
(ca, ra), (cb, rb) = read(sys.argv[1]), read(sys.argv[2])
tolerance = float(sys.argv[3])
only = {c[:3] for c in ca} ^ {c[:3] for c in cb}
pairs = [(a[3], b[3]) for a, b in zip(ca, cb) if a[:3] == b[:3]] + [(a[1], b[1]) for a, b in zip(ra, rb) if a[0] == b[0]]
gap = max([abs(a - b) / max(abs(a), abs(b), 1e-12) for a, b in pairs if a != b] or [0.0])
differ = [(a, b) for a, b in zip(ca, cb) if a != b]
same = not only and len(ra) == len(rb) and gap <= tolerance
verdict = ("identical" if gap == 0 else f"within {tolerance:g} (largest relative difference {gap:.2e})") if same else \
          f"DIFFERENT (largest relative difference {gap:.2e})"
print(f"=> {verdict}: {len(ca)} and {len(cb)} curve points, {len(only)} in one only, {len(differ)} values differ; "
      f"{len(ra)} results {'equal' if ra == rb else 'differ'}")
for a, b in differ[:5]: print("first differences:", a, b)
sys.exit(0 if same else 1)
EOF
}
result_of() {  # DB METRIC [METHOD]: a result of the job of METHOD that ended done
  python3 -c 'import sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute(
    "SELECT value FROM job_results WHERE state = ? AND metric = ? AND method LIKE ?", ("done", sys.argv[2], sys.argv[3])).fetchone()
print(format(row[0], "g") if row else "")' "$1" "$2" "${3:-%}"
}
step_mode_of() {  # DB: how the done run's steps ran
  python3 -c 'import sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute("SELECT step_mode FROM runs WHERE status = ? ORDER BY id DESC", ("done",)).fetchone()
print(row[0] if row else "")' "$1"
}
# determinism: the job twice as it runs by default (a CUDA graph on a GPU), then eagerly
determinism() {
  run_job "$det_file" "$work/det-a.db" && run_job "$det_file" "$work/det-b.db" || return 1
  echo "steps ran as: $(step_mode_of "$work/det-a.db")"
  same_runs "$work/det-a.db" "$work/det-b.db" || return 1
  run_job "$det_eager_file" "$work/det-eager.db" || return 1
  echo "steps ran as: $(step_mode_of "$work/det-eager.db")"
  same_runs "$work/det-a.db" "$work/det-eager.db" 1e-3 >"$work/det-eager.txt"
  local rc=$?
  cat "$work/det-eager.txt"
  same_runs "$work/det-a.db" "$work/det-b.db" | sed "s/\$/; eagerly: $(grep '^=> ' "$work/det-eager.txt" | cut -c4- | cut -d: -f1)/"
  return $rc
}
# resume: the job's own process (exec-job) SIGKILLed once the database recorded its first
# checkpoint; the worker counts that attempt as lost and starts another, which resumes from it
resume() {
  run_job "$det_file" "$work/resume.db" &
  local run=$! polls=0
  until python3 -c 'import sqlite3, sys
try: sys.exit(0 if sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM runs WHERE resume_step > 0").fetchone()[0] else 1)
except sqlite3.Error: sys.exit(1)' "$work/resume.db" 2>/dev/null; do
    kill -0 "$run" 2>/dev/null || { echo "=> the run ended before its first checkpoint"; return 1; }
    sleep 0.1
    polls=$(( polls + 1 ))
  done
  pkill -KILL -f "exec-job --db $work/resume.db" && echo "killed the job process after its first checkpoint (${polls} polls)"
  wait "$run" || return 1
  same_runs "$work/det-a.db" "$work/resume.db"
}
export -f job_file run_job same_runs result_of step_mode_of determinism resume
det_file=$(job_file determinism softmax "$det_steps" "${det_eval[@]}" "checkpoint_every = $ckpt_every\ndeterministic = true")
det_eager_file=$(job_file determinism-eager softmax "$det_steps" "${det_eval[@]}" \
  "checkpoint_every = $ckpt_every\ndeterministic = true\ncuda_graphs = \"off\"")
export det_file det_eager_file
rm -rf "$work"/det-*.db* "$work"/resume.db* "$work"/listops.db* "$work"/traces
stage determinism "$determinism_s" train.log bash -c determinism
if [ -f "$work/det-a.db" ]; then
  stage resume "$resume_s" train.log bash -c resume
else
  report resume skipped 0 "no determinism run to compare with"
fi

# listops: softmax and Skyformer, two jobs at once on the device, for as many of the 50,000 steps
# as fit in the time left (ROUND_LISTOPS_S at most; what the estimate and the tables need kept),
# from the slower method's step with two processes at once (or alone, taken as twice as long).
# A job's step is taken as 1.25 bench steps (the first H100 round: softmax's loop 24.7 ms a step,
# its bench step 21.1 ms: batches drawn, the curve kept); 15 s go to the start, the data and the
# test, 15% to the evaluations every 500 steps.
packed_step() {  # the slower method's step with two at once, or twice its step alone
  python3 -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
def step(method, at_once):
    row = db.execute("SELECT step_seconds_median FROM bench_results WHERE method = ? AND seq_len = ? AND batch_size = ? "
                     "AND status = ? AND step_mode != ? AND step_mode NOT LIKE ? AND concurrent = ? ORDER BY id DESC",
                     (method, int(sys.argv[2]), int(sys.argv[3]), "done", "eager", "eager (cuda graphs off: [train]%", at_once)).fetchone()
    return row[0] if row else None
steps = [step(m, 2) or (2 * step(m, 1) if step(m, 1) else None) for m in ("softmax", "skyformer")]
print(max(steps) if None not in steps else "")' "$out/bench.db" "$train_len" "$train_batch"
}
listops() {
  run_job "$listops_file" "$work/listops.db" --jobs-per-device 2 || return 1
  local m text=""
  for m in softmax skyformer; do
    text+="${text:+; }$m $(result_of "$work/listops.db" test_acc "$m" | awk '{printf "%.2f", 100 * $1}') after $(result_of "$work/listops.db" steps_done "$m") steps, $(result_of "$work/listops.db" steps_per_second "$m") steps/s"
  done
  echo "=> test accuracy (Table 1: softmax 38.37, skyformer 38.69): $text"
}
export -f listops
step=$(packed_step)
kept=$(( 10 + 40 ))  # the wrap-up's and the tables' seconds, and the estimate's unless skipped
skipped estimate || kept=$(( kept + estimate_s ))
left=$(( end - $(date +%s) - kept ))
seconds=$(( listops_s < left ? listops_s : left ))
steps=$(python3 -c 'import sys
step, seconds, every = float(sys.argv[1] or 0), int(sys.argv[2]), int(sys.argv[3])
steps = int((seconds - 15) * 0.85 / (1.25 * step)) // every * every if step > 0 else 0
print(min(50000, steps) if steps >= every else 0)' "$step" "$seconds" "${listops_eval[0]}")
if (( steps == 0 )); then
  report listops skipped 0 "no step time measured, or too little time for ${listops_eval[0]} steps"
else
  say "listops: a packed step ${step}s: $steps steps in ${seconds}s, two jobs at once"
  listops_file=$(job_file listops softmax,skyformer "$steps" "${listops_eval[@]}")
  export listops_file
  stage listops "$seconds" train.log bash -c listops
fi

# estimate: Table 1's cost (conf/skyformer-lra.toml: nine methods, five tasks, three seeds) from this
# round's bench; the bench commands it names for what it lacks run while time is left (the stage's
# limit ends the one running), then the estimate again
estimate() {
  local report=$work/estimate.txt line
  "$attnlab" estimate "$estimate_conf" --device "$device" --db "$out/bench.db" --cache-dir "$work/cache" >"$report" 2>&1
  cat "$report"
  grep '^  attnlab bench ' "$report" | while read -r line; do
    # shellcheck disable=SC2086  # the command's words
    bench_run ${line#attnlab bench } $bench_args </dev/null
  done
  "$attnlab" estimate "$estimate_conf" --device "$device" --db "$out/bench.db" --cache-dir "$work/cache" >"$report" 2>&1
  local rc=$?
  tail -n 12 "$report"
  echo "=> $(grep -E '^[0-9]+ job\(s\) on ' "$report" | tail -1)"
  return $rc
}
# the CPU stand-in estimates the round's own ListOps jobs (Table 1's benches would take hours here)
estimate_conf=${standin:+$(job_file estimate softmax,skyformer 1000 "${listops_eval[@]}")}
estimate_conf=${estimate_conf:-conf/skyformer-lra.toml}
export -f estimate
export bench_args estimate_conf
stage estimate "$estimate_s" bench.log bash -c estimate

# --- bench sweeps, with the time left: each row stored as it is measured --------------------------
bench=(--device "$device" --db "$out/bench.db" --lengths "$lengths" --batch-size "$batch" --methods "$methods")
# shellcheck disable=SC2206  # the extra arguments are words
bench+=($bench_args)
stage bench-bf16 "$bench_s" bench.log bash -c 'bench_run "$@"' bench_run "${bench[@]}" --precision bf16
stage bench-attn-bf16 "$bench_s" bench.log bash -c 'bench_run "$@"' bench_run "${bench[@]}" --precision bf16 --attention-only
# softmax's forward at the longest length with heads of 128 (8 of them), the width attention kernels
# are built for: the LRA model's heads of 32 leave a kernel's tiles a quarter full
# shellcheck disable=SC2086  # the extra arguments are words
stage bench-attn-d128 30 bench.log bash -c 'bench_run "$@"' bench_run --device "$device" --db "$out/bench.db" \
  --methods softmax --lengths "${lengths##*,}" --batch-size "$batch" --precision bf16 --attention-only \
  --model.heads=8 --model.head_dim=128 $bench_args
stage bench-fp32 "$bench_s" bench.log bash -c 'bench_run "$@"' bench_run "${bench[@]}" --precision fp32
stage bench-attn-fp32 "$bench_s" bench.log bash -c 'bench_run "$@"' bench_run "${bench[@]}" --precision fp32 --attention-only

# --- the tables; each database folded into one file (a stage cut short leaves -wal and -shm) ------
for db in "$out/bench.db" "$work/listops.db"; do
  [ -f "$db" ] && python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)")' "$db"
done
tables() {
  "$attnlab" bench --show --db "$out/bench.db"
  [ -f "$work/listops.db" ] || return 0
  "$attnlab" results --db "$work/listops.db" --metric test_acc,best_val_acc,steps_done,steps_per_second,peak_memory_bytes
  "$attnlab" table accuracy --db "$work/listops.db" --paper skyformer
}
export -f tables
stage show 30 tables.txt bash -c tables
[ -f "$work/listops.db" ] && cp "$work/listops.db" "$out/train.db"
rm -f "$out"/*.db-wal "$out"/*.db-shm
files=("$out"/*)
say "done in $(( $(date +%s) - started ))s: ${#files[@]} files in $out$( (( ${#files[@]} > 8 )) && echo ' (over the 8 the device tool brings back)')"
