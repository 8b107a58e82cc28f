#!/usr/bin/env bash
# Run HERE (a machine of the project, no GPU needed), in the project root: the tree the GPU round
# runs, so that the device only runs what was built and tested here. Builds build-cuda/ against
# PyPI's LibTorch 2.11 with CUDA 13.0 (scripts/build.sh --torch2; only the executable and the
# plugins unless more is built already), installs its runtime part (stripped) into .gpu-tree/,
# and copies into .gpu-tree/lib/system the Debian libraries it links that the GPU image lacks
# (Boost.Program_options, toml++, SQLite, Nettle, libpng, tcmalloc, ...): not glibc's or libstdc++'s,
# nor LibTorch's and CUDA's, which the round takes from the machine's own torch 2.11.0+cu130.
# The device tool carries it: `carry: [".gpu-tree"]` (64 MiB at most with the working tree).
set -euo pipefail
cd "$(dirname "$0")/../.."
tree=.gpu-tree
[ -d .deps/torch2 ] || bash scripts/install-deps.sh --torch2
if [ -x build-cuda/runner/attnlab ] && [ -z "${ATTNLAB_BUILD_TARGETS:-}" ]; then
  bash scripts/build.sh --torch2  # what is there, brought up to date
else
  ATTNLAB_BUILD_TARGETS=${ATTNLAB_BUILD_TARGETS:-"attnlab attn_plugins data_plugins"} bash scripts/build.sh --torch2
fi
rm -rf "$tree"
cmake --install build-cuda --prefix "$tree" --component runtime --strip >/dev/null
mkdir -p "$tree/lib/system"
mapfile -t elves < <(find "$tree/bin" "$tree/lib" -type f \( -name attnlab -o -name '*.so*' \))
ldd "${elves[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case $lib in
    */libc.so.* | */libm.so.* | */libstdc++.so.* | */libgcc_s.so.* | */libpthread.so.* | */libdl.so.* | */librt.so.* | */libutil.so.* | */ld-linux*) ;;  # glibc, GCC
    "$PWD"/.deps/* | /usr/local/*) ;;  # LibTorch and the CUDA toolkit: the GPU machine's own
    "$PWD/$tree"/*) ;;                 # libattnlab_core
    *) cp -L "$lib" "$tree/lib/system/" ;;
  esac
done
# the build's identity, for the round's report
{
  echo "attnlab $(git describe --always --dirty 2>/dev/null || echo unknown), built $(date -u '+%F %T UTC') on $(hostname)"
  echo "LibTorch $(sed -n 's/^__version__ = .\(.*\).$/\1/p' .deps/torch2/torch/version.py) (.deps/torch2), $(nvcc --version | tail -1)"
} >"$tree/BUILD"
# it must load here, against the LibTorch it was built with, as it will there against the machine's
LD_LIBRARY_PATH="$tree/lib/system:$PWD/.deps/torch2/torch/lib" "$tree/bin/attnlab" env | grep -E '^(LibTorch|CUDA|devices) '
echo "pack: $tree: $(du -sh "$tree" | cut -f1) ($(ls "$tree/lib/attnlab/plugins" | wc -l) attention and $(ls "$tree/lib/attnlab/datasets" | wc -l) dataset plugins; copied: $(ls "$tree/lib/system" | tr '\n' ' '))"
