#!/usr/bin/env bash
# Run HERE (a machine of the project, no GPU needed), in the project root: the tree the GPU round
# runs, so that the device only runs what was built and tested here. Builds build-cuda/ against
# PyPI's LibTorch 2.11 with CUDA 13.0 (scripts/build.sh --torch2; only the executable and the
# plugins unless more is built already), then installs it into .gpu-tree/ with the Debian
# libraries the GPU image lacks (scripts/gpu/install-tree.sh). The device tool carries it:
# `carry: [".gpu-tree"]` (64 MiB at most with the working tree).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .deps/torch2 ] || bash scripts/install-deps.sh --torch2
if [ -x build-cuda/runner/attnlab ] && [ -z "${ATTNLAB_BUILD_TARGETS:-}" ]; then
  bash scripts/build.sh --torch2  # what is there, brought up to date
else
  ATTNLAB_BUILD_TARGETS=${ATTNLAB_BUILD_TARGETS:-"attnlab attn_plugins data_plugins"} bash scripts/build.sh --torch2
fi
bash scripts/gpu/install-tree.sh "$PWD/build-cuda" "$PWD/.gpu-tree"
