#!/usr/bin/env bash
# Installs, builds, and runs the quickstart experiment (softmax on generated ListOps, two seeds).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/runner/attnlab run conf/quickstart.toml --db quickstart.db
