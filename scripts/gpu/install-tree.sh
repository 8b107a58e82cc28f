#!/usr/bin/env bash
# install-tree.sh BUILD TREE: the runtime part of BUILD (a build against PyPI's LibTorch 2.11 with
# CUDA) installed, stripped, into TREE, with TREE/lib/system holding the Debian libraries it links
# that the GPU image lacks (Boost.Program_options, toml++, SQLite, Nettle, libpng, tcmalloc, ...):
# not glibc's or GCC's, nor LibTorch's and CUDA's, which the round takes from the machine's own
# torch 2.11.0+cu130. Then TREE must load here against BUILD's LibTorch, as it will there against
# the machine's. scripts/gpu/pack.sh and tests/gpu_round_test.sh make the round's tree with it.
set -euo pipefail
build=$1 tree=$2
torch_lib=$(sed -n 's/^Torch_DIR:PATH=\(.*\)\/share\/cmake\/Torch$/\1\/lib/p' "$build/CMakeCache.txt")
rm -rf "$tree"
cmake --install "$build" --prefix "$tree" --component runtime --strip >/dev/null
mkdir -p "$tree/lib/system"
mapfile -t elves < <(find "$tree/bin" "$tree/lib" -type f \( -name attnlab -o -name '*.so*' \))
ldd "${elves[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case $lib in
    */libc.so.* | */libm.so.* | */libstdc++.so.* | */libgcc_s.so.* | */libpthread.so.* | */libdl.so.* | */librt.so.* | */libutil.so.* | */ld-linux*) ;;  # glibc, GCC
    "${torch_lib%/torch/lib}"/* | /usr/local/*) ;;  # LibTorch, its NVIDIA libraries, the CUDA toolkit: the GPU machine's own
    "$tree"/*) ;;                                    # libattnlab_core
    *) cp -L "$lib" "$tree/lib/system/" ;;
  esac
done
{
  echo "attnlab $(git -C "$(dirname "$0")" describe --always --dirty 2>/dev/null || echo unknown), built $(date -u '+%F %T UTC') on $(hostname)"
  echo "LibTorch $(sed -n 's/^__version__ = .\(.*\).$/\1/p' "$torch_lib/../version.py") ($torch_lib), $(nvcc --version | tail -1)"
} >"$tree/BUILD"
LD_LIBRARY_PATH="$tree/lib/system:$torch_lib" "$tree/bin/attnlab" env | grep -E '^(LibTorch|CUDA|devices) '
echo "install-tree: $tree: $(du -sh "$tree" | cut -f1) ($(ls "$tree/lib/attnlab/plugins" | wc -l) attention and $(ls "$tree/lib/attnlab/datasets" | wc -l) dataset plugins; copied: $(ls "$tree/lib/system" | tr '\n' ' '))"
