#!/usr/bin/env bash
# skyformer-listops.sh AUTHORS_CHECKOUT OUT_DIR [STEPS]: the Skyformer authors' own training loop
# (pkuzengqi/Skyformer at 1a677cb, src/main.py) and attnlab, side by side on the same generated
# ListOps files, with conf/skyformer-lra.toml's ListOps settings at 256 tokens, STEPS steps
# (default 300), batch 32, an evaluation every 50 steps. Prints one table a method: train loss,
# validation accuracy and steps/s of each at every evaluation. README.md (this folder) says what
# it does and how to read it.
#   git clone https://github.com/pkuzengqi/Skyformer /tmp/Skyformer && git -C /tmp/Skyformer checkout 1a677cb
#   bash scripts/side-by-side/skyformer-listops.sh /tmp/Skyformer /tmp/sbs-out 300
# ATTNLAB (default build-cuda/runner/attnlab), PYTHON (python3), THREADS (nproc: both sides),
# METHODS ("softmax:softmax skyformer:skyformer": attnlab's name:their --attn name), EVAL_BATCHES
# (15), CONF (conf/skyformer-lra.toml), AUTHORS_SEED (42, their --random), ATTNLAB_SEED (1).
# OUT_DIR's files from an earlier run are replaced.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ $# -lt 2 ]; then
  echo "usage: $0 AUTHORS_CHECKOUT OUT_DIR [STEPS]" >&2
  exit 2
fi
authors=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
steps=${3:-300}
attnlab=${ATTNLAB:-$repo/build-cuda/runner/attnlab}
python=${PYTHON:-python3}
threads=${THREADS:-$(nproc)}
methods=${METHODS:-"softmax:softmax skyformer:skyformer"}
eval_batches=${EVAL_BATCHES:-15}
conf=${CONF:-$repo/conf/skyformer-lra.toml}
authors_seed=${AUTHORS_SEED:-42}
attnlab_seed=${ATTNLAB_SEED:-1}
eval_every=50
max_len=256
# The generated data: LRA's generator rules (depth 10, up to 10 arguments) with lengths cut to
# fit 256 tokens; small splits, so a run fits a few minutes of a 2-core machine.
generator="train_size = 4000
val_size = 500
test_size = 500
max_depth = 10
max_args = 10
min_length = 100
max_length = 256
generator_seed = 0"

fail() { echo "side-by-side: $*" >&2; exit 1; }
say() { echo "== $*"; }
[ -f "$authors/src/main.py" ] || fail "$authors/src/main.py: not a Skyformer checkout"
[ -x "$attnlab" ] || fail "$attnlab: no attnlab binary (set ATTNLAB)"
[ -f "$conf" ] || fail "$conf: no such conf file"
if [[ ! $steps =~ ^[0-9]+$ ]] || (( steps < 2 * eval_every || steps % eval_every != 0 )); then
  fail "STEPS must be a multiple of $eval_every, at least $((2 * eval_every)) (got $steps)"
fi
revision=$(git -C "$authors" rev-parse HEAD 2>/dev/null || echo unknown)
case $revision in
  1a677cb*) ;;
  *) echo "side-by-side: warning: $authors is at $revision, not 1a677cb; the changes to main.py may not apply" >&2 ;;
esac

# Their code's Python: torch, numpy, tqdm, tensorboard (main.py's imports; src/requirements.txt
# pins torch 1.8.0, and 2.11 runs it). Without a torch of its own, attnlab's .deps/torch2 serves.
if ! "$python" -c 'import torch' 2>/dev/null; then
  export PYTHONPATH=$repo/.deps/python:$repo/.deps/torch2${PYTHONPATH:+:$PYTHONPATH}
fi
"$python" -c 'import sys, tomllib, torch, numpy, tqdm; from torch.utils.tensorboard import SummaryWriter' ||
  fail "$python lacks a module their main.py imports (Python >= 3.11 with torch, numpy, tqdm, tensorboard: README.md, Requirements)"

rm -rf "$out/generated" "$out/cache" "$out/authors" "$out/attnlab.db"* "$out"/authors-*.out "$out/side-by-side.txt"
start=$SECONDS

say "1. generate ListOps with attnlab's generator"
printf '[experiment]\nname = "side-by-side-generate"\n[datasets.listops]\nsource = "generate"\nmax_len = %s\n%s\n[methods.softmax]\n' \
  "$max_len" "$generator" >"$out/generate.toml"
"$attnlab" data "$out/generate.toml" --cache-dir "$out/generated"
train_tsv=$(find "$out/generated" -maxdepth 2 -path '*/listops-*/basic_train.tsv' | head -n 1)
[ -n "$train_tsv" ] || fail "no basic_train.tsv under $out/generated"
data=$(dirname "$train_tsv")
echo "files: $data"

say "2. their copy of src/, changed to run on the CPU, and set short"
mkdir -p "$out/authors"
cp -r "$authors/src" "$out/authors/src"
mkdir -p "$out/authors/src/data/lra_processed"
"$python" "$here/attnlab_conf.py" "$conf" "$out/attnlab.toml" --dataset listops \
  --methods "$(for m in $methods; do printf '%s,' "${m%%:*}"; done | sed 's/,$//')" --path "$data" \
  --steps "$steps" --eval-every "$eval_every" --eval-batches "$eval_batches" --max-len "$max_len" --seed "$attnlab_seed"
warmup=$("$python" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["train"]["warmup"])' "$out/attnlab.toml")
"$python" "$here/patch_authors.py" "$out/authors/src" --steps "$steps" --warmup "$warmup" \
  --eval-every "$eval_every" --eval-batches "$eval_batches" --max-len "$max_len"
diff -ru "$authors/src" "$out/authors/src" -x data >"$out/authors-changes.diff" || [ $? -eq 1 ] ||
  fail "diff of their src/ and the copy failed"
echo "changes: $out/authors-changes.diff"

say "3. the files tokenised their way, into their pickles"
"$python" "$here/listops_to_pickle.py" "$data" "$out/authors/src/data/lra_processed" --max-len "$max_len"

say "4. attnlab reads the same files; the same integers?"
"$attnlab" data "$out/attnlab.toml" --cache-dir "$out/cache"
"$python" "$here/check_inputs.py" "$out/authors/src/data/lra_processed" "$out/cache" "$data"

say "5. their src/main.py ($steps steps, $threads threads, CPU)"
compare_args=()
for m in $methods; do
  ours=${m%%:*} theirs=${m#*:}
  t0=$SECONDS
  (cd "$out/authors/src" && CUDA_VISIBLE_DEVICES="" OMP_NUM_THREADS=$threads PYTHONWARNINGS=ignore \
    "$python" main.py --mode train --attn "$theirs" --task lra-listops --checkpoint "$ours" --random "$authors_seed") \
    >"$out/authors-$ours.out" 2>&1 || fail "their $theirs run failed: $out/authors-$ours.out"
  echo "$theirs: $((SECONDS - t0)) s, log $out/authors/src/log-$authors_seed/lra-listops/train.$ours.log"
  compare_args+=("$ours=$out/authors/src/log-$authors_seed/lra-listops/train.$ours.log")
done

say "6. attnlab run ($steps steps, $threads threads, CPU)"
t0=$SECONDS
status=0
"$attnlab" run "$out/attnlab.toml" --db "$out/attnlab.db" --cache-dir "$out/cache" --threads "$threads" \
  >"$out/attnlab-run.log" 2>&1 || status=$?
echo "attnlab: $((SECONDS - t0)) s, exit status $status, log $out/attnlab-run.log"

say "7. side by side ($((SECONDS - start)) s in all)"
"$python" "$here/compare.py" "$out/attnlab.db" --their-seed "$authors_seed" "${compare_args[@]}" | tee "$out/side-by-side.txt"
