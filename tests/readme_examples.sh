#!/usr/bin/env bash
# Runs the command lines of README.md's "Using it" block exactly as written, in order, so that the
# README and the program cannot drift apart. Usage: readme_examples.sh SOURCE_DIR BUILD_DIR
#
# The lines run in a scratch folder that holds `build` (a link to BUILD_DIR) and `conf` (a link to
# SOURCE_DIR/conf), so `./build/runner/attnlab ...` and `conf/...` resolve as they do from a
# checkout, and the default database `attnlab.db` is the scratch folder's. Generated data goes to
# a scratch cache (ATTNLAB_CACHE_DIR). Each line must exit 0 and print something; lines that need
# gnuplot or sqlite3 are skipped, saying so, when those are missing.
set -uo pipefail

source_dir=$(cd "$1" && pwd) || exit 2
build_dir=$(cd "$2" && pwd) || exit 2
readme="$source_dir/README.md"

# The first ```sh block after "## Using it", continuation lines (ending in \) joined.
mapfile -t lines < <(awk '
  /^## Using it/ { section = 1; next }
  section && !inside && /^```sh/ { inside = 1; next }
  inside && /^```/ { exit }
  inside {
    if (sub(/\\$/, "")) { pending = pending $0; next }
    print pending $0; pending = ""
  }' "$readme")
if [ "${#lines[@]}" -lt 10 ]; then
  echo "readme_examples: found ${#lines[@]} command lines in $readme's \"Using it\" block (expected more): has it moved?" >&2
  exit 1
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-readme-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
ln -s "$build_dir" "$scratch/build"
ln -s "$source_dir/conf" "$scratch/conf"
export ATTNLAB_CACHE_DIR="$scratch/cache"
# One intra-op thread: on a busy 2-core machine (other builds and suites beside this one) two
# threads per job trained at 0.9 steps/s where one thread gave 26 to 33 (measured while writing this).
export ATTNLAB_THREADS=1
cd "$scratch" || exit 2

failed=0 ran=0 skipped=0
for line in "${lines[@]}"; do
  command=${line%%#*}  # bash would drop the comment too; this is for the skip checks only
  if [[ $command == sqlite3* ]] && ! command -v sqlite3 >/dev/null; then
    echo "SKIP (no sqlite3): $line"; skipped=$((skipped + 1)); continue
  fi
  if [[ $command == *" curves "*"--format png"* || $command == *" report "* ]] && ! command -v gnuplot >/dev/null; then
    echo "SKIP (no gnuplot): $line"; skipped=$((skipped + 1)); continue
  fi
  echo "RUN  $line"
  start=$SECONDS
  output=$(bash -c "$line" 2>&1)
  status=$?
  ran=$((ran + 1))
  printf '%s\n' "$output" | tail -n 12 | sed 's/^/     | /'
  if [ "$status" -ne 0 ]; then
    echo "FAIL exit status $status after $((SECONDS - start)) s: $line"; failed=$((failed + 1))
  elif [ -z "${output//[[:space:]]/}" ]; then
    echo "FAIL no output: $line"; failed=$((failed + 1))
  else
    echo "ok   $((SECONDS - start)) s"
  fi
done

# What the block promises beyond exit statuses: every job done, the picture and the report written.
if command -v sqlite3 >/dev/null; then
  not_done=$(sqlite3 attnlab.db "SELECT count(*) FROM jobs WHERE state <> 'done'")
  if [ "$not_done" != "0" ]; then echo "FAIL $not_done job(s) of the example experiment did not end done"; failed=$((failed + 1)); fi
fi
if command -v gnuplot >/dev/null; then
  for f in val-acc.png report/README.md; do
    if [ ! -s "$f" ]; then echo "FAIL $f was not written"; failed=$((failed + 1)); fi
  done
fi

echo "readme_examples: $ran lines run, $skipped skipped, $failed failed"
[ "$failed" -eq 0 ]
