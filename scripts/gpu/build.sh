#!/usr/bin/env bash
# The fallback of the GPU round: scripts/gpu/round.sh runs it when the tree carried from here
# (scripts/gpu/pack.sh) does not load there. Run ON the GPU machine, in the project root, with
# .gpu-debs/ carried there (scripts/gpu/fetch-debs.sh fills it here). The image has CUDA, CMake,
# ninja and python3 with PyTorch 2.x, whose LibTorch (with CUDA) the build links; it cannot install
# anything and has no network. So: unpack the carried Debian packages under $DEBROOT (/opt/debroot;
# never over /, which they could break), point CMake at them and at torch.utils.cmake_prefix_path,
# configure build-gpu/ (Release, Ninja) and build with every core. Extra arguments go to CMake's
# configure. Writes build-gpu/gpu-env.sh: source it before running build-gpu's binaries or tests by
# hand. GPU_INSTALL_PREFIX=DIR installs the runtime there too. With $OUT set the output is also
# kept in $OUT/build.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$(date +%s)  # round.sh times the rest of the device call from here (gpu-env.sh keeps it)
root=${DEBROOT:-/opt/debroot}
build=${BUILD_DIR:-build-gpu}
py=${PYTHON:-python3}
lib=$root/usr/lib/x86_64-linux-gnu
[ -z "${OUT:-}" ] || { mkdir -p "$OUT"; exec > >(tee -a "$OUT/build.log") 2>&1; }
say() { echo "gpu-build: $*"; }

# --- the machine, first: if the build fails, this is what the report needs
say "$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"'), $(ldd --version 2>/dev/null | head -1), $(nproc) cores"
"$py" -c 'import torch; print("gpu-build: torch", torch.__version__, "CUDA", torch.version.cuda,
  "cxx11 ABI", torch.compiled_with_cxx11_abi(), "GPU seen", torch.cuda.is_available())'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || say "nvidia-smi failed"
say "$(cmake --version | head -1), ninja $(ninja --version), $(c++ --version | head -1)"

# --- the carried packages
debs=(.gpu-debs/*.deb)
[ -e "${debs[0]}" ] || { say "no .gpu-debs/*.deb: run scripts/gpu/fetch-debs.sh on the CPU machine and carry .gpu-debs"; exit 1; }
mkdir -p "$root"
for f in "${debs[@]}"; do
  if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$f" "$root"
  else ar p "$f" data.tar.xz | tar -xJf - -C "$root"  # a .deb is an ar archive; Debian 12's hold data.tar.xz
  fi
done
# Debian 12 is not merged-/usr: zlib1g-dev's libz.so is an absolute link to
# /lib/x86_64-linux-gnu/libz.so.1.2.13. Under $root that points out of the tree, at a file the
# image need not have (its zlib is its own version), so CMake skipped the dangling link and took
# the non-PIC libz.a, which the dataset plugins cannot link. (On a Debian 12 host the link happens
# to resolve, which hides this.) Re-point every absolute link into $root, relative, so a rerun
# leaves it be.
find "$root" -type l -lname '/*' -print0 | while IFS= read -r -d '' l; do
  ln -sfnr "$root$(readlink "$l")" "$l"
done
# The .pc files name /usr (prefix=/usr, and gtest.pc's libdir=/usr/... without a prefix): point
# every such path at $root (dpkg-deb rewrites the files on each run, so this is no double rewrite).
find "$root" -name '*.pc' -exec sed -i -E "s#(=|-I|-L)/usr(/|\$| )#\1$root/usr\2#g" {} +
for f in "$lib/libz.so" "$lib/libpng16.so" "$lib/libboost_program_options.so" "$lib/libtcmalloc_minimal.so" \
         "$root/usr/include/boost/version.hpp" "$lib/pkgconfig/nettle.pc" "$lib/cmake/GTest/GTestConfig.cmake"; do
  [ -e "$f" ] || { say "missing after unpacking: $f"; exit 1; }
done

# --- the environment the build and the programs it makes need (also for later commands)
torch_dir=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
torch_cmake=$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
# LibTorch's CMake files enable CUDA through nvcc: find it if it is not on PATH
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$nvcc" ] || say "warning: no nvcc found: LibTorch's CMake config may fail to enable CUDA"
mkdir -p "$build"
cat > "$build/gpu-env.sh" <<EOF
# Written by scripts/gpu/build.sh: 'source $build/gpu-env.sh' before running $build's programs and tests.
# The unpacked Debian libraries (the binaries carry their paths too, but libpkgconf, the libraries
# those libraries need, and installed copies do not) and LibTorch's own folder.
export LD_LIBRARY_PATH="$lib:$root/lib/x86_64-linux-gnu:$torch_dir/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
# CMake runs made by the tests (tests/sdk_test.sh builds a plugin against the installed attnlab);
# the unpacked packages first (torch's folder holds only LibTorch's own CMake files)
export CMAKE_PREFIX_PATH="$root/usr:$torch_cmake\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$root/usr/share/pkgconfig"
export PATH="\$PATH:$root/usr/bin"
# the H100/H200 (sm_90): spares LibTorch's CMake config from probing the GPU's architecture
export TORCH_CUDA_ARCH_LIST="\${TORCH_CUDA_ARCH_LIST:-9.0}"
# when this build began: scripts/gpu/round.sh ends the round in time for the device call's limit
export GPU_BUILD_STARTED=$started
EOF
[ -z "$nvcc" ] || echo "export CUDACXX=\"$nvcc\" PATH=\"\$PATH:${nvcc%/*}\"" >> "$build/gpu-env.sh"
# shellcheck source=/dev/null
. "$build/gpu-env.sh"

# --- configure and build
# Every dependency named explicitly in the unpacked tree: nothing silently from the image, zlib
# and libpng as shared libraries (the plugins are shared objects), the debroot's pkgconf.
# CMAKE_CUDA_ARCHITECTURES: LibTorch's config enables CUDA (attnlab itself has no CUDA sources).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPKG_CONFIG_EXECUTABLE="$root/usr/bin/pkgconf" \
  -DBOOST_ROOT="$root/usr" -DBoost_NO_SYSTEM_PATHS=ON \
  -DZLIB_LIBRARY="$lib/libz.so" -DZLIB_INCLUDE_DIR="$root/usr/include" \
  -DPNG_LIBRARY="$lib/libpng16.so" -DPNG_PNG_INCLUDE_DIR="$root/usr/include" \
  -DGTest_DIR="$lib/cmake/GTest" \
  "$@"
say "found:"
grep -E '^(Torch_DIR|Boost_DIR|boost_program_options_DIR|GTest_DIR|ZLIB_LIBRARY|PNG_LIBRARY|pkgcfg_lib_[A-Z0-9]+_[a-z_0-9]+):' \
  "$build/CMakeCache.txt" | sed 's/^/  /'
# GPU_CONFIGURE_ONLY=1 stops here: checks that every dependency is found, without building
[ -z "${GPU_CONFIGURE_ONLY:-}" ] || exit 0
# -k 0: a target that fails does not stop the others (the plugins and the runner can still be checked);
# GPU_BUILD_TARGETS="attnlab attn_plugins data_plugins" builds only those (the round's, without tests).
# shellcheck disable=SC2086  # the targets are words
if ! cmake --build "$build" -j"$(nproc)" ${GPU_BUILD_TARGETS:+--target $GPU_BUILD_TARGETS} -- -k 0; then
  say "build FAILED after $(( $(date +%s) - started ))s (what did build is still in $build)"
  exit 1
fi
plugins=("$build"/plugins/attn_*.so)
say "built in $(( $(date +%s) - started ))s: $build/runner/attnlab, ${#plugins[@]} attention plugins; next: source $build/gpu-env.sh"
# GPU_INSTALL_PREFIX: install the runtime there too (round.sh's fallback: the tree it runs)
[ -z "${GPU_INSTALL_PREFIX:-}" ] || cmake --install "$build" --prefix "$GPU_INSTALL_PREFIX" --component runtime >/dev/null
