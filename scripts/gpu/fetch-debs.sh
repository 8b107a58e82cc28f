#!/usr/bin/env bash
# Run HERE (the CPU machine, which has apt), in the project root. Downloads into .gpu-debs/ the
# Debian 12 packages the GPU image lacks: it has CUDA, CMake, ninja and PyTorch (whose LibTorch the
# build links) but none of Boost, toml++, SQLite, Nettle, libpng, zlib's headers, GoogleTest,
# tcmalloc or pkg-config, and it cannot install anything. scripts/gpu/build.sh unpacks them there.
# Idempotent: a package already downloaded with the right checksum is not fetched again, and
# versions no longer wanted are removed (they would unpack over the new ones).
# EXTRA_DEBS="pkg ..." adds packages.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Each -dev package with its runtime library: dpkg -x ignores dependencies, so name both.
pkgs=(
  libboost1.74-dev                                   # headers (Boost::headers) and BoostConfig.cmake
  libboost-program-options1.74-dev libboost-program-options1.74.0
  libtomlplusplus-dev libtomlplusplus3
  libsqlite3-dev libsqlite3-0
  libgtest-dev libgmock-dev                          # static libs + GTestConfig.cmake, for tests/
  nettle-dev libnettle8 libhogweed6 libgmp-dev libgmp10 libgmpxx4ldbl
  libpng-dev libpng16-16
  zlib1g-dev zlib1g   # zlib1g holds libz.so.1: without it only the non-PIC libz.a links, and the plugins cannot
  libgoogle-perftools-dev libtcmalloc-minimal4 libgoogle-perftools4  # tcmalloc: ATTNLAB_TCMALLOC=ON (the default)
  pkgconf pkgconf-bin libpkgconf3 pkg-config         # pkg_check_modules: toml++, sqlite3, nettle, tcmalloc
)
# shellcheck disable=SC2206  # EXTRA_DEBS is a list of words
pkgs+=(${EXTRA_DEBS:-})

[ -e .gpu-debs ] || mkdir .gpu-debs
git check-ignore -q .gpu-debs/ || echo "fetch-debs: warning: .gpu-debs/ is not ignored by git (add /.gpu-debs/ to .gitignore)" >&2

# amd64 explicitly: the GPU machine is x86-64 whatever this one is.
apt_opts=(-o APT::Architecture=amd64)
# as root, apt's _apt sandbox user cannot write here: download as root without the warning
[ "$(id -u)" -ne 0 ] || apt_opts+=(-o APT::Sandbox::User=root)
# 'URL' FILE SIZE SHA256:HASH, one line per package
uris=$(apt-get "${apt_opts[@]}" download --print-uris "${pkgs[@]}")

cd .gpu-debs
wanted=()
fetched=0
while read -r url file _size hash; do
  url=${url//\'/}
  wanted+=("$file")
  if [ -f "$file" ] && [ "$(sha256sum "$file" | cut -d' ' -f1)" = "${hash#SHA256:}" ]; then
    continue
  fi
  echo "fetch-debs: fetching $file"
  rm -f "$file"
  # apt-get download fetches by package name; the file name carries the version we were shown
  apt-get "${apt_opts[@]}" download "${file%%_*}" >/dev/null
  [ -f "$file" ] || { echo "fetch-debs: apt-get download did not write $file" >&2; exit 1; }
  fetched=$((fetched + 1))
done <<<"$uris"

# drop any .deb not in the list (an older version, or a package no longer wanted)
for f in *.deb; do
  [ -e "$f" ] || continue
  case " ${wanted[*]} " in *" $f "*) ;; *) echo "fetch-debs: removing stale $f"; rm -f "$f" ;; esac
done

echo "fetch-debs: ${#wanted[@]} packages in .gpu-debs/ ($fetched fetched now, $(du -sh . | cut -f1) in all):"
printf '  %s\n' "${wanted[@]}"
