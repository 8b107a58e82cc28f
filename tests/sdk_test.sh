#!/usr/bin/env bash
# The outside author's path, end to end, on an installed attnlab and nothing of the build folder:
# install into a scratch prefix (then move it: the tree is relocatable), `attnlab new` an attention
# and a dataset plugin, build both with only find_package(attnlab), see them load, train the new
# method beside softmax on the new dataset, and build the Debian package and read its Depends.
# Then the same for a method written in PyTorch: `new --python`, scripted by the Python torch that
# matches this build, checked, and its experiment queued beside softmax.
# Usage: sdk_test.sh BUILD_DIR TORCH_PYTHON (the command of that Python: tests/CMakeLists.txt)
set -euo pipefail
build_dir=$(cd "$1" && pwd)
torch_python=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-sdk-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
fail() { echo "sdk_test: $*" >&2; exit 1; }

cmake --install "$build_dir" --prefix "$scratch/installed" > install.log
mv "$scratch/installed" "$scratch/prefix"  # relocatable: nothing points into the old path
attnlab="$scratch/prefix/bin/attnlab"
for f in lib/cmake/attnlab/attnlabConfig.cmake lib/cmake/attnlab/attnlabConfigVersion.cmake \
         include/attnlab/attention.hpp include/attnlab/dataset.hpp include/attnlab/dataset_plugin.hpp \
         include/attnlab/random_features.hpp include/attnlab/fastfood.hpp include/attnlab/precision.hpp \
         lib/attnlab/plugins/attn_softmax.so lib/attnlab/datasets/data_listops.so share/attnlab/conf/quickstart.toml \
         share/attnlab/conf/papers/skyformer.toml share/attnlab/conf/papers/kl-transformer.toml; do
  [ -e "prefix/$f" ] || fail "the install lacks $f"
done
# `table --paper NAME` finds the installed papers, and only those
if "$attnlab" table accuracy --paper nosuch --db none.db 2> err.log; then fail "an unknown paper was accepted"; fi
grep -qF "no such paper (bundled: kl-transformer, skyformer; searched $scratch/prefix/share/attnlab/conf/papers;" err.log ||
  fail "--paper lookup: $(cat err.log)"
[ ! -e prefix/include/attnlab/train ] && [ ! -e prefix/include/attnlab/trainer.hpp ] || fail "host-only headers (attnlab/train/) installed"

# `attnlab new`: the folders, and its one-line refusals
"$attnlab" new attention mine --dir mine > new.log
"$attnlab" new dataset bits > new.log
grep -q "CMAKE_PREFIX_PATH=$scratch/prefix" new.log || fail "new does not name the install prefix: $(cat new.log)"
if "$attnlab" new attention Bad-Name 2> err.log; then fail "a bad name was accepted"; fi
grep -qx "attnlab: error: new: 'Bad-Name' is not a plugin name: .*" err.log || fail "bad name: $(cat err.log)"
if "$attnlab" new dataset again --dir mine 2> err.log; then fail "wrote into a folder that is not empty"; fi
grep -qx "attnlab: error: new: mine exists and is not an empty folder; nothing written" err.log || fail "$(cat err.log)"

# Every installed header compiles with only the installed ones beside it: the method includes them all
for h in prefix/include/attnlab/*.hpp; do echo "#include <attnlab/$(basename "$h")>"; done > mine/every_header.hpp
[ "$(wc -l < mine/every_header.hpp)" -ge 10 ] || fail "too few installed headers: $(cat mine/every_header.hpp)"
sed -i '1i #include "every_header.hpp"' mine/mine.cpp

# Built with find_package(attnlab) and nothing else. Through ccache where installed, as
# scripts/build.sh builds (base_dir the scratch folder, whose name changes every run): the two
# LibTorch translation units are read back rather than compiled again in a second run.
launcher=()
if command -v ccache > /dev/null; then
  export CCACHE_BASEDIR=$scratch
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
for p in mine bits; do
  cmake -S $p -B $p/build -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" > $p.configure.log 2>&1 ||
    { cat $p.configure.log; fail "$p: configure failed"; }
  cmake --build $p/build > $p.build.log 2>&1 || { cat $p.build.log; fail "$p: build failed"; }
  ! grep -i "warning" $p.build.log || fail "$p: the template builds with warnings"
done
"$attnlab" plugins --plugins mine/build --plugins bits/build > plugins.log
grep -q "^  mine 0.1 " plugins.log || fail "mine not listed: $(cat plugins.log)"
grep -q "^  bits 0.1 " plugins.log || fail "bits not listed"
! grep -q "^Refused" plugins.log || fail "refused plugins: $(cat plugins.log)"
grep -qx "Searched: mine/build, bits/build, $scratch/prefix/lib/attnlab/plugins, $scratch/prefix/lib/attnlab/datasets" plugins.log ||
  fail "searched elsewhere than the installed tree: $(tail -1 plugins.log)"

# The conformance suite passes on the new method as written, and catches a defect
"$attnlab" check mine/build/attn_mine.so > check.log || { cat check.log; fail "attnlab check fails the template"; }
[ "$(grep -c '^  pass  ' check.log)" = 9 ] || fail "not 9 checks passed: $(cat check.log)"
# --bench: its training step beside softmax's, each measured by a bench process of the installed attnlab
"$attnlab" check mine/build/attn_mine.so --bench --bench-lengths 32,64 > check.log 2>&1 ||
  { cat check.log; fail "attnlab check --bench fails the template"; }
grep -Eq '^  pass  training step \(bench\) +32 tokens .* s/step, .* \(x.* and x.* softmax.s\); 64 tokens ' check.log ||
  fail "no bench line for both lengths beside softmax: $(cat check.log)"
[ "$(grep -c '^mine  *[36][24]  *done' check.log)" = 2 ] || fail "bench's table lacks mine's two rows: $(cat check.log)"
"$attnlab" check bits/build/data_bits.so > check.log || { cat check.log; fail "attnlab check fails the dataset template"; }
[ "$(grep -c '^  pass  ' check.log)" = 5 ] || fail "not 5 dataset checks passed: $(cat check.log)"
defect="$build_dir/tests/defect_plugins/defect_padding.so"
if [ -e "$defect" ]; then
  if "$attnlab" check "$defect" > check.log; then fail "a plugin that ignores padding passed: $(cat check.log)"; fi
  grep -q "^  FAIL  padding invariance " check.log || fail "the padding defect is not named: $(cat check.log)"
fi

# A method written in PyTorch: the Python template's commands, as its README gives them
"$attnlab" new attention pymine --python > new.log
grep -qx "  attnlab check pymine/pymine.pt" new.log || fail "new --python's next steps: $(cat new.log)"
$torch_python pymine/export.py > export.log 2>&1 || { cat export.log; fail "the template's export.py failed"; }
"$attnlab" check pymine/pymine.pt > check.log || { cat check.log; fail "attnlab check fails the Python template"; }
[ "$(grep -c '^  pass  ' check.log)" = 9 ] || fail "not 9 checks passed: $(cat check.log)"
"$attnlab" queue add pymine/experiment.toml --db py.db --cache-dir cache > queue.log 2>&1 || { cat queue.log; fail "queue add"; }
grep -q "2 job(s): 2 added" queue.log || fail "the template's experiment: $(cat queue.log)"
if "$attnlab" new dataset pybits --python 2> err.log; then fail "new dataset --python was accepted"; fi
grep -qx "attnlab: error: new: --python is for attention methods; a dataset plugin is C++" err.log || fail "$(cat err.log)"

# The new method trains beside softmax on the new dataset, through the installed attnlab; the
# template is exact softmax, so on the same seed it matches softmax's accuracy.
cat > try.toml <<'TOML'
[experiment]
name = "sdk"
seeds = [1]
[model]
layers = 1
dim = 16
ffn_dim = 32
heads = 2
[train]
steps = 40
batch_size = 16
lr = 0.003
warmup = 4
eval_every = 20
log_every = 20
[methods.softmax]
[methods.mine]
[datasets.bits]
length = 15
train_size = 320
TOML
ATTNLAB_THREADS=1 "$attnlab" run try.toml --db try.db --plugins mine/build --plugins bits/build --cache-dir cache > run.log 2>&1 ||
  { cat run.log; fail "run failed"; }
"$attnlab" results --db try.db --format csv > results.csv
[ "$(grep -c ',bits,1,1,0,0,' results.csv)" = 2 ] || fail "not both jobs done: $(cat results.csv)"
[ "$(head -1 results.csv | cut -d, -f7)" = test_acc_mean ] || fail "results.csv columns: $(head -1 results.csv)"
acc=$(awk -F, 'NR > 1 { print $7 }' results.csv | sort -u)
[ "$(echo "$acc" | wc -l)" = 1 ] || fail "mine and softmax differ: $(cat results.csv)"

# The Debian package: built, and its Depends name what the binaries link, and OpenBLAS (a build
# against PyPI's LibTorch makes none: cmake/AttnlabPackage.cmake)
if [ ! -f "$build_dir/CPackConfig.cmake" ]; then
  echo "sdk_test: install, new, build, load and run: ok (no .deb: this build's LibTorch is not a Debian package)"
  exit 0
fi
cpack -G DEB -B "$scratch/deb" --config "$build_dir/CPackConfig.cmake" > cpack.log 2>&1 || { cat cpack.log; fail "cpack failed"; }
deb=$(ls "$scratch"/deb/attnlab_*.deb)
depends=$(dpkg-deb -f "$deb" Depends)
for d in libtorch libsqlite3 libboost-program-options libopenblas0 libnettle libpng; do
  [[ $depends == *$d* ]] || fail "the .deb's Depends lacks $d: $depends"
done
dpkg-deb -c "$deb" > deb-contents.txt
grep -q "\./usr/lib/attnlab/plugins/attn_softmax.so$" deb-contents.txt || fail "the .deb lacks the bundled plugins"
echo "sdk_test: install, new, build, load, run and the .deb: ok ($deb: Depends: $depends)"
