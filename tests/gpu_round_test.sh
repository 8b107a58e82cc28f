#!/usr/bin/env bash
# The GPU round's script, run here as its CPU stand-in (scripts/gpu/README.md), so that a lent
# device never meets a round broken by a change here: the tree installed from this build as
# scripts/gpu/pack.sh installs it, then every stage of scripts/gpu/round.sh at toy sizes against
# this build's LibTorch. Each stage must end ok, the determinism and resume runs must be identical,
# and $OUT must hold the 8 files the device tool brings back.
# Usage: gpu_round_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$1 build_dir=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-round-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() { echo "gpu_round_test: $*" >&2; [ ! -f "$scratch/out/summary.txt" ] || cat "$scratch/out/summary.txt" >&2; exit 1; }

bash "$source_dir/scripts/gpu/install-tree.sh" "$build_dir" "$scratch/tree" >/dev/null
torch_lib=$(sed -n 's/^Torch_DIR:PATH=\(.*\)\/share\/cmake\/Torch$/\1\/lib/p' "$build_dir/CMakeCache.txt")
OUT=$scratch/out ROUND_TREE=$scratch/tree ROUND_WORK=$scratch/work ROUND_DEVICE=cpu ROUND_TORCH_LIB=$torch_lib \
  ROUND_LISTOPS_S=40 ATTNLAB_THREADS=1 bash "$source_dir/scripts/gpu/round.sh" >"$scratch/round.log" 2>&1 ||
  { cat "$scratch/round.log"; fail "round.sh exited $?"; }
summary=$scratch/out/summary.txt
for stage in setup checks listops-step packed determinism resume listops estimate \
             bench-bf16 bench-attn-bf16 bench-attn-d128 bench-fp32 bench-attn-fp32 show; do
  grep -qE "^$stage +ok " "$summary" || fail "stage $stage did not end ok"
done
grep -qE '^checks +ok .* 2/2 methods pass every check' "$summary" || fail "the checks' figure"
for stage in determinism resume; do
  grep -qE "^$stage +ok .* identical: ([0-9]+) and \\1 curve points, 0 in one only, 0 values differ" "$summary" ||
    fail "$stage: the runs are not identical"
done
grep -qE '^determinism +ok .*; eagerly: identical' "$summary" || fail "determinism: the eager run differs (the CPU's is eager too)"
grep -qE '^listops-step +ok .* step: softmax eager [0-9.]+ ms \([0-9]+ ops, host [0-9.]+ ms\), no graph row; bf16 [0-9.]+ ms; skyformer' "$summary" ||
  fail "listops-step: the figure"
grep -qE '^packed +ok .* steps/s, all processes: softmax 1: [0-9]+, 2: [0-9]+; skyformer 1: [0-9]+, 2: [0-9]+$' "$summary" ||
  fail "packed: the figure"
grep -qE '^listops +ok .* softmax [0-9]+\.[0-9]{2} after [0-9]+ steps, .*; skyformer [0-9]+\.[0-9]{2} after [0-9]+ steps' "$summary" ||
  fail "listops: the figure"
grep -qE '^estimate +ok .* 2 job\(s\) on 1 x cpu, 1 at once on each: wall ' "$summary" || fail "estimate: no total"
grep -q "^=> rows: 4 done$" "$scratch/out/bench.log" || fail "no bench stored 4 done rows"
files=$(ls "$scratch/out" | tr '\n' ' ')
[ "$files" = "bench.db bench.log checks.log setup.log summary.txt tables.txt train.db train.log " ] || fail "\$OUT holds: $files"
echo "gpu_round_test: every stage ok ($(tail -1 "$summary"))"
