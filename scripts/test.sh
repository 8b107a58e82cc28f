#!/usr/bin/env bash
# Installs, builds and tests both builds (what CI runs, via .ci/run):
#   build-cuda/  LibTorch 2.11 with CUDA (PyPI's; the GPU machines' build): every target, and the
#                whole suite, unit and integration-labelled tests
#   build/       LibTorch 1.13 (Debian's; the quickstart's): the product, and only the test programs
#                it runs (ATTNLAB_TESTS=versions, tests/CMakeLists.txt): what tells the two LibTorch
#                versions apart: the core tests (label core: training, resume, precision, softmax's
#                two paths, TorchScript methods scripted by that build's own PyTorch), every
#                plugin's conformance suite and the methods' formulas (label methods), `attnlab env`
#                and `attnlab run` end to end, fp16 refused at enqueue where no device can autocast
#                it, and the installed SDK with its Debian package
# The whole suite runs on the 2.11 tree because it is the build the GPU machines run; everything
# else the two trees share compiles on both. Then the test against a real single-node SLURM (label
# slurm) as a step of its own with its own time bound, so that it can never eat the suites' time
# (it skips itself unless run as root). At the end, whatever happened: each phase's wall time and
# the 10 slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
results=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-test-XXXXXX")
phases=()
# phase NAME COMMAND...: runs it, keeping its wall time for the report
phase() {
  local name=$1 start=$SECONDS
  shift
  "$@" || { phases+=("$(printf '%-34s %5d s  (failed)' "$name" $((SECONDS - start)))"); return 1; }
  phases+=("$(printf '%-34s %5d s' "$name" $((SECONDS - start)))")
}
report() {
  echo
  echo "test.sh: wall time by phase (${SECONDS} s in all)"
  printf '  %s\n' "${phases[@]}"
  python3 scripts/slowest-tests.py 10 "$results"/*.xml || true
  rm -rf "$results"
}
trap report EXIT

phase "layers" python3 scripts/check-layers.py  # no include climbs a layer (one line each, before anything is built)
# slurmctld, slurmd, slurm-client, munge: only for tests/slurm/, which starts its own cluster on loopback;
# chromium: only for tests/serve_browser_test.cpp, which loads attnlab serve's page headless;
# python3-torch: PyTorch 1.13, which scripts the TorchScript methods the 1.13 build's tests load
# (tests/scripted/methods.py; the 2.11 build's tests script theirs with the wheel in .deps/torch2)
phase "install" bash scripts/install-deps.sh --torch2 slurmctld slurmd slurm-client munge chromium python3-torch
phase "build LibTorch 2.11 (build-cuda)" bash scripts/build.sh --torch2
phase "build LibTorch 1.13 (build)" bash scripts/build.sh -DATTNLAB_TESTS=versions
build-cuda/runner/attnlab env  # the machine the figures below come from (CPU, its kernels, threads, BLAS)
lscpu | grep -E '^(Vendor ID|CPU family|Model|Stepping|Hypervisor vendor|Flags):' || true  # which CPU, exactly
# A test that fails runs once more, alone; the suite fails if it fails again. One that passes alone
# is named FLAKY, its failing output kept above: a flake of a machine we cannot see is reported,
# never absorbed in silence. Every call names its tree first (--test-dir DIR) and the file its
# times go to (a JUnit file each, for the report).
run_tests() {
  local dir=$2 junit=$results/$3.xml
  shift 3
  ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" --timeout 900 --output-junit "$junit" "$@" && return 0
  local failed
  failed=$(cut -d: -f2 "$dir/Testing/Temporary/LastTestsFailed.log" | paste -sd ' ')
  echo "test.sh: failed in $dir: $failed; running them again, alone"
  ctest --output-on-failure --timeout 900 --test-dir "$dir" --rerun-failed || return 1
  echo "test.sh: FLAKY in $dir (failed, then passed alone): $failed"
}
phase "suite, LibTorch 2.11" run_tests --test-dir build-cuda suite-2.11 --label-exclude slurm
phase "suite, LibTorch 1.13" run_tests --test-dir build suite-1.13
phase "SLURM" ctest --test-dir build-cuda --output-on-failure --label-regex slurm --timeout 600 \
  --output-junit "$results/slurm.xml"
