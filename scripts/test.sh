#!/usr/bin/env bash
# Installs, builds, and runs the whole test suite (unit and integration-labelled tests), then the
# test against a real single-node SLURM (label `slurm`) as a step of its own with its own time
# bound, so that it can never eat the main suite's time (it skips itself unless run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
# slurmctld, slurmd, slurm-client, munge: only for tests/slurm/, which starts its own cluster on loopback;
# chromium: only for tests/serve_browser_test.cpp, which loads attnlab serve's page headless
bash scripts/install-deps.sh slurmctld slurmd slurm-client munge chromium
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900 --label-exclude slurm
ctest --test-dir build --output-on-failure --label-regex slurm --timeout 600
