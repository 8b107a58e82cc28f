#!/usr/bin/env bash
# Configures and builds attnlab (Release, Ninja). Extra arguments go to CMake's configure;
# ATTNLAB_BUILD_TARGETS (space-separated) builds only those targets (the quickstart's three).
#   scripts/build.sh            build/:      against Debian's LibTorch 1.13 (CPU)
#   scripts/build.sh --torch2   build-cuda/: against .deps/torch2, PyPI's LibTorch 2.11 with CUDA 13.0
#                               (scripts/install-deps.sh --torch2 installs it)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
prefix=()
if [ "${1:-}" = "--torch2" ]; then
  shift
  build=build-cuda
  torch=$PWD/.deps/torch2/torch
  [ -f "$torch/share/cmake/Torch/TorchConfig.cmake" ] || { echo "build: no LibTorch 2 in .deps/torch2: run scripts/install-deps.sh --torch2" >&2; exit 1; }
  # the torch folder itself too, so that LibTorch's libraries are found there before Debian's
  # (its config looks for them in the system folders first); TORCH_CUDA_ARCH_LIST: attnlab has no
  # CUDA sources of its own, and naming Hopper spares LibTorch's config its architecture list
  prefix=("-DCMAKE_PREFIX_PATH=$torch;$torch/share/cmake" "-DTORCH_CUDA_ARCH_LIST=9.0")
fi
# ccache, where installed (scripts/install-deps.sh installs it): a rebuild of unchanged sources,
# in this checkout or a fresh clone of it anywhere, is read back instead of compiled. base_dir
# makes the clone's own paths relative in what is hashed; the sloppiness lets it cache the
# translation units that include the shared precompiled header (ccache's manual, "Precompiled
# headers"). A build without it compiles everything, as before.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$PWD CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${prefix[@]}" "${launcher[@]}" "$@" >/dev/null
# shellcheck disable=SC2086  # the targets are words
cmake --build "$build" -j"$(nproc)" ${ATTNLAB_BUILD_TARGETS:+--target $ATTNLAB_BUILD_TARGETS}
