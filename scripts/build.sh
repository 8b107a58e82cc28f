#!/usr/bin/env bash
# Configures and builds attnlab into build/ (Release). Extra arguments go to CMake's configure;
# ATTNLAB_BUILD_TARGETS (space-separated) builds only those targets (the quickstart's three).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
# shellcheck disable=SC2086  # the targets are words
cmake --build build -j"$(nproc)" ${ATTNLAB_BUILD_TARGETS:+--target $ATTNLAB_BUILD_TARGETS}
