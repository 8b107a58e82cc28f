#!/usr/bin/env bash
# Prints what a build cost: the CPU-seconds of its compile and link steps as BUILD/.ninja_log
# records them (the last entry per output: one build's worth), the costliest steps first.
#   scripts/build-cost.sh [BUILD] [TOP]     (default build/, the 15 costliest)
# Each step runs on one core, so the sum is the CPU time the build asks whatever -j was; measure
# a fresh build folder to compare two trees.
set -euo pipefail
build=${1:-build}
top=${2:-15}
log=$build/.ninja_log
[ -f "$log" ] || { echo "build-cost: no $log: build first" >&2; exit 1; }
steps=$(awk 'NR > 1 { ms[$4] = $2 - $1 } END { for (o in ms) printf "%8.1f  %s\n", ms[o] / 1000, o }' "$log" | sort -rn)
head -n "$top" <<<"$steps"
awk '{ s += $1; n++ } END { printf "%s: %d steps, %.0f CPU-seconds\n", FILENAME == "-" ? "" : FILENAME, n, s }' <<<"$steps" | sed "s|^: |$build: |"
