#!/usr/bin/env bash
# Installs everything attnlab needs from Debian 12's packages, plus any packages named as
# arguments (scripts/test.sh adds the SLURM test's). Runs apt-get as root (or via sudo).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev            # LibTorch 1.13 (CPU)
  libopenblas0-openmp     # without it LibTorch runs on the reference BLAS, ~3x slower per step
  libboost-dev libboost-program-options-dev
  libtomlplusplus-dev libsqlite3-dev sqlite3 nettle-dev
  libgoogle-perftools-dev # tcmalloc: glibc's malloc re-faults LibTorch's large tensors at every step
  libpng-dev zlib1g-dev   # Pathfinder's PNG images; gzip-compressed IDX files
  dataset-fashion-mnist   # real data that needs no download (Fashion-MNIST, IDX files)
  gnuplot-nox fonts-liberation  # attnlab curves / report pictures (PNG through cairo, SVG)
  libcpp-httplib-dev nlohmann-json3-dev libjs-chart.js  # attnlab serve: HTTP, JSON, the page's charts served locally
  libgtest-dev
  "$@"
)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "attnlab: dependencies installed"
