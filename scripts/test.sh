#!/usr/bin/env bash
# Installs, builds, and runs the whole test suite (unit and integration-labelled tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
