#!/usr/bin/env bash
# bench-pair.sh BEFORE AFTER: two attnlab executables (each with its plugins where it finds them: a
# build tree, or a tree from scripts/gpu/install-tree.sh run with its LD_LIBRARY_PATH) measured
# side by side in one run, method by method, BEFORE then AFTER: the ops one training step runs
# (the events of the Chrome trace of `bench --trace`, which every version writes: every op as
# LibTorch's profiler records it, nested ones included) and the step's median time. The README's
# table of the step's ops before and after was made with it:
#   BEFORE=/tmp/before/bin/attnlab  (the earlier commit, built and installed)
#   bash scripts/bench-pair.sh "$BEFORE" build-cuda/runner/attnlab
# BENCH_METHODS (default: every method AFTER finds), BENCH_LENGTH (64), BENCH_ARGS (default
# "--batch-size 1 --threads 1 --warmup 3 --steps 15": the host's time a step, little arithmetic),
# BENCH_ROUNDS (3): each method measured that many times on each side, alternately, and each side's
# step the least of its medians (what a quiet moment of a shared machine gives; the medians of one
# round here differ by up to 2x from round to round).
set -euo pipefail
before=$1 after=$2
length=${BENCH_LENGTH:-64}
args=${BENCH_ARGS:-"--batch-size 1 --threads 1 --warmup 3 --steps 15"}
rounds=${BENCH_ROUNDS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
methods=${BENCH_METHODS:-$("$after" plugins 2>/dev/null | awk '/^Attention methods:/ {a = 1; next} /^[A-Z]/ {a = 0} a && /^  [a-z_0-9]+ [0-9]/ {print $1}' | paste -sd, -)}
[ -n "$methods" ] || { echo "bench-pair: no attention method found by $after" >&2; exit 1; }
echo "bench-pair: $(nproc) cores; $(uptime | sed 's/.*load/load/'); length $length, $args, $rounds rounds"
# ops: the events of the traced step; step: the median of the timed ones, from that side's database
measure() {  # SIDE EXECUTABLE METHOD
  # shellcheck disable=SC2086  # the arguments are words
  "$2" bench --db "$work/$1.db" --methods "$3" --lengths "$length" $args --trace "$work/$1" >/dev/null
  ops=$(grep -c '"ph"' "$work/$1/$3-$length-step-fp32.json")
  step=$(sqlite3 "$work/$1.db" "SELECT printf('%.2f', step_seconds_median * 1000) FROM bench_results WHERE method = '$3' ORDER BY id DESC LIMIT 1")
  echo "$ops $step"
}
echo
echo "| method | ops before | ops after | after / before | step before (ms) | step after (ms) | after / before |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
least() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b + 0 < a + 0) ? b : a }'; }
for method in ${methods//,/ }; do
  step_b="" step_a=""
  for (( round = 0; round < rounds; round++ )); do
    read -r ops_b step < <(measure before "$before" "$method")
    step_b=$(least "$step_b" "$step")
    read -r ops_a step < <(measure after "$after" "$method")
    step_a=$(least "$step_a" "$step")
  done
  awk -v m="$method" -v ob="$ops_b" -v oa="$ops_a" -v sb="$step_b" -v sa="$step_a" \
    'BEGIN { printf "| %s | %d | %d | %.2f | %s | %s | %.2f |\n", m, ob, oa, oa / ob, sb, sa, sa / sb }'
done
