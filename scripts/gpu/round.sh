#!/usr/bin/env bash
# The GPU round: ON the GPU machine, in the project root, after scripts/gpu/build.sh in the same
# device call (scripts/gpu/README.md). Stages: attnlab env; `attnlab check` of every attention
# plugin on the GPU; `attnlab bench` in fp32 and in bf16, and the attention forward alone in bf16
# (softmax's TFLOP/s); the stored bench table; the CTest suite
# last (what only a GPU can tell comes first: device time is short, and CI runs the suite anyway).
# Everything lands in $OUT (./gpu-out if unset): a log per stage and summary.txt, one line per
# stage. A stage that fails or runs out of its time is recorded and the round goes on.
#
# Knobs (environment):
#   ROUND_SKIP=tests,bench       stages left out: env, tests, checks, bench (all three), bench-fp32, bench-bf16, bench-attn, show
#   ROUND_METHODS=softmax,performer  attention methods checked and benched (default: every plugin found)
#   ROUND_LENGTHS=1024,4096,16384  ROUND_BATCH=32  ROUND_DEVICE=cuda:0
#   ROUND_BENCH_ARGS="--steps 3"  ROUND_CTEST_ARGS="--label-exclude integration"  (added to those commands)
#   ROUND_{ENV,TESTS,CHECKS,CHECK,BENCH,SHOW}_S  seconds per stage (CHECK: one method; BENCH: each precision)
#   ROUND_END=<epoch seconds>    when the whole round must be over; 0: no overall limit (default below)
set -uo pipefail  # no -e: a stage that fails is recorded, and the round goes on
cd "$(dirname "$0")/../.." || exit 1
build=${BUILD_DIR:-build-gpu}
out=${OUT:-$PWD/gpu-out}
device=${ROUND_DEVICE:-cuda:0}
lengths=${ROUND_LENGTHS:-1024,4096,16384}
batch=${ROUND_BATCH:-32}
env_s=${ROUND_ENV_S:-60} tests_s=${ROUND_TESTS_S:-300} checks_s=${ROUND_CHECKS_S:-300}
check_s=${ROUND_CHECK_S:-90} bench_s=${ROUND_BENCH_S:-300} show_s=${ROUND_SHOW_S:-60}

if [ ! -f "$build/gpu-env.sh" ]; then echo "round: no $build/gpu-env.sh: run scripts/gpu/build.sh first" >&2; exit 1; fi
# shellcheck source=/dev/null
. "$build/gpu-env.sh"
attnlab=$build/runner/attnlab
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"

# The device tool kills a call at its timeout_s (600 s at most), and with it this summary. So unless
# ROUND_END says otherwise the round ends ROUND_CALL_S (570) s after the call began: after build.sh
# began if that was in this same call (gpu-env.sh says when), else after this script began.
now=$(date +%s) call_s=${ROUND_CALL_S:-570}
began=$now
(( now - ${GPU_BUILD_STARTED:-0} < call_s )) && began=$GPU_BUILD_STARTED
end=${ROUND_END:-$(( began + call_s ))}

say() { echo "round: $*" | tee -a "$summary"; }
# report STAGE VERDICT SECONDS LOG [DETAIL]: the stage's line, in summary.txt and on stdout
report() { printf '%-11s %-16s %5ss  %-15s %s\n' "$1" "$2" "$3" "$4" "${5:-}" | tee -a "$summary"; }
skipped() { [[ ",${ROUND_SKIP:-}," == *",$1,"* || ",${ROUND_SKIP:-}," == *",${1%%-*},"* ]]; }
# limit S: S seconds, or fewer if the round's end comes sooner (10 s kept to wrap up)
limit() {
  local s=$1 left=$(( end - $(date +%s) - 10 ))
  (( end > 0 && left < s )) && s=$left
  echo "$s"
}
verdict() { case $1 in 0) echo ok ;; 124 | 137) echo TIMEOUT ;; *) echo "FAILED($1)" ;; esac; }
# detail STAGE LOG: a few words from the log for the summary line
detail() {
  case $1 in
    tests) grep -E 'tests passed|No tests were found' "$out/$2" | tail -1 ;;
  esac
}

# stage NAME SECONDS LOG CMD...: CMD within its time, its output appended to $out/LOG
stage() {
  local name=$1 want=$2 s log=$3 t0=$SECONDS rc
  s=$(limit "$want")
  shift 3
  if skipped "$name"; then report "$name" skipped 0 "$log"; return; fi
  if (( s < 1 || (s < 5 && s < want) )); then report "$name" "no time left" 0 "$log"; return; fi
  { echo "### $name (at most ${s}s): $*"; timeout -k 10 "$s" "$@"; } >>"$out/$log" 2>&1
  rc=$?
  report "$name" "$(verdict $rc)" $(( SECONDS - t0 )) "$log" "$(detail "$name" "$log")"
}

# checks: `attnlab check M --device D` per method, each its own process and time limit, one log
checks() {
  local log=check.log t0=$SECONDS stop s m rc passed=0 failed=()
  if skipped checks; then report checks skipped 0 $log; return; fi
  if (( ${#methods[@]} == 0 )); then report checks "FAILED" 0 $log "no attention methods listed"; return; fi
  stop=$(( $(date +%s) + $(limit "$checks_s") ))
  for m in "${methods[@]}"; do
    s=$(( stop - $(date +%s) ))
    (( s > check_s )) && s=$check_s
    if (( s < 1 || (s < 5 && s < check_s) )); then failed+=("${m}:no-time"); continue; fi
    { echo "### check $m (at most ${s}s)"; timeout -k 10 "$s" "$attnlab" check "$m" --device "$device"; } >>"$out/$log" 2>&1
    rc=$?
    echo "### check $m: $(verdict $rc)" >>"$out/$log"
    if (( rc == 0 )); then passed=$(( passed + 1 )); else failed+=("${m}:$(verdict $rc)"); fi
  done
  report checks "$( (( ${#failed[@]} )) && echo FAILED || echo ok)" $(( SECONDS - t0 )) $log \
    "$passed/${#methods[@]} passed${failed:+; not: ${failed[*]}}"
}

say "$(date -u '+%F %T UTC'), $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
say "device $device, lengths $lengths, batch $batch, skip '${ROUND_SKIP:-}', ends by $( (( end > 0 )) && date -u -d "@$end" '+%T UTC' || echo 'no limit')"
[ -x "$attnlab" ] || say "no $attnlab: the stages that run it will fail"
if [ -n "${ROUND_METHODS:-}" ]; then
  IFS=, read -ra methods <<<"$ROUND_METHODS"
else  # the names under "Attention methods:" in `attnlab plugins` (two spaces in; details are deeper)
  mapfile -t methods < <("$attnlab" plugins 2>/dev/null |
    awk '/^Attention methods:/ {a = 1; next} /^[^ ]/ {a = 0} a && /^  [^ ]/ {print $1}')
fi
say "methods (${#methods[@]}): ${methods[*]}"

bench=(--device "$device" --db "$out/bench.db" --lengths "$lengths" --batch-size "$batch")
[ -z "${ROUND_METHODS:-}" ] || bench+=(--methods "$ROUND_METHODS")
# shellcheck disable=SC2206  # the extra arguments are words
bench+=(${ROUND_BENCH_ARGS:-})
# shellcheck disable=SC2206
ctest_args=(${ROUND_CTEST_ARGS:-})

stage env "$env_s" env.txt "$attnlab" env
checks
stage bench-fp32 "$bench_s" bench.log "$attnlab" bench "${bench[@]}" --precision fp32
stage bench-bf16 "$bench_s" bench.log "$attnlab" bench "${bench[@]}" --precision bf16
# the attention forward alone in bf16: softmax's TFLOP/s against the dense bf16 peak (989 on an H100)
stage bench-attn "$bench_s" bench.log "$attnlab" bench "${bench[@]}" --precision bf16 --attention-only
# A bench stopped at its time limit leaves bench.db-wal and -shm beside bench.db (WAL mode), two
# files over the 8 the device tool returns: fold them in (the last connection to close does).
if [ -e "$out/bench.db-wal" ]; then
  python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA wal_checkpoint(TRUNCATE)"); c.close()' \
    "$out/bench.db" || say "could not fold bench.db-wal into bench.db"
fi
stage show "$show_s" bench-show.txt "$attnlab" bench --show --db "$out/bench.db"
stage tests "$tests_s" tests.log ctest --test-dir "$build" -j8 --timeout 900 --output-on-failure "${ctest_args[@]}"

# the device tool brings back 8 files from $OUT at most (build.log, summary.txt and 6 logs/results)
files=("$out"/*)
say "done: ${#files[@]} files in $out$( (( ${#files[@]} > 8 )) && echo ' (over the 8 the device tool brings back)')"
