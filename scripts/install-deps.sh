#!/usr/bin/env bash
# Installs everything attnlab needs from Debian 12's packages, plus any packages named as
# arguments (scripts/test.sh adds the SLURM test's). Runs apt-get as root (or via sudo).
#   --torch2  also installs PyPI's LibTorch 2.11 with CUDA into .deps/torch2 (see install_torch2),
#             and the Python packages the tests' PyTorch scripts import into .deps/python
#             (see install_test_python)
set -euo pipefail
cd "$(dirname "$0")/.."
torch2=""
if [ "${1:-}" = "--torch2" ]; then torch2=1; shift; fi
packages=(
  build-essential cmake ninja-build pkg-config git
  ccache                  # scripts/build.sh compiles through it: a rebuild of unchanged sources is read back
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

# PyPI's torch wheel holds LibTorch 2 built with CUDA (Debian has none). Pinned to 2.11.0, the GPU
# machines' own build (their python3 has torch 2.11.0+cu130): a tree built here runs there against
# their libraries, and a plugin must share the host's LibTorch major.minor. Installed with pip
# --target into a folder of this checkout, never into a Python. --no-deps: the wheel's CUDA
# dependencies are 2.1 GB more to fetch and unpack (2.6 GB in all against 0.76 GB, measured), and
# this machine's CUDA 13.0 toolkit (/usr/local/cuda, on the loader's path) has every library it
# links but three, which come from PyPI at the versions torch 2.11.0 names: cuSPARSELt, NVSHMEM and
# cuFile. LibTorch's libraries find those three beside themselves (their RPATH: ../../nvidia/*/lib).
install_torch2() {
  local target=.deps/torch2
  if [ -d "$target/torch-2.11.0.dist-info" ]; then
    echo "attnlab: LibTorch 2.11.0 already in $target"
    install_wheel_numpy "$target"
    return
  fi
  command -v nvcc >/dev/null || { echo "attnlab: --torch2 needs the CUDA 13.0 toolkit (nvcc on PATH)" >&2; exit 1; }
  rm -rf "$target"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$target" \
    torch==2.11.0 nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 nvidia-cufile==1.15.1.6
  echo "attnlab: LibTorch 2.11.0 (CUDA 13.0) in $target"
  install_wheel_numpy "$target"
}
# NumPy beside the wheel, for the Python that runs it (the 2.11 tree's tests put this folder on
# python3's path): safetensors' torch.save_file converts through NumPy, and torch warns without
# it. A machine's own python3 may have none (a fresh one here had none, and the authors-model test
# failed there). Not in .deps/python, which Debian's python3 reads too: its torch 1.13 is built
# against its own NumPy 1.24 (python3-numpy, a dependency of python3-torch).
install_wheel_numpy() {
  local target=$1
  [ -d "$target/numpy-2.3.5.dist-info" ] && return
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$target" numpy==2.3.5
  echo "attnlab: NumPy 2.3.5 (the wheel's Python) in $target"
}
# The tests' PyTorch scripts (tests/reference/lra_authors_model.py) read and write safetensors files
# with the format's own library: PyPI's safetensors (no Debian package) and its one import,
# packaging, pinned, with pip --target into .deps/python, which the tests put on PYTHONPATH beside
# either build's torch (Debian's python3-torch 1.13, the 2.11 wheel).
install_test_python() {
  local target=.deps/python
  if [ -d "$target/safetensors-0.7.0.dist-info" ]; then echo "attnlab: the tests' Python packages already in $target"; return; fi
  rm -rf "$target"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$target" \
    safetensors==0.7.0 packaging==25.0
  echo "attnlab: safetensors 0.7.0 (the tests' Python) in $target"
}
[ -z "$torch2" ] || { install_torch2; install_test_python; }
