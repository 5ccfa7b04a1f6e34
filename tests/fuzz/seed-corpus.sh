#!/bin/sh
# Rebuilds the seed corpus tests/fuzz/corpus/TARGET/ (a maintainer's tool; make fuzz and
# make check only read the corpus). Raw seeds:
#  - every input the test suite gives a reader: a separate build in _build-seed/ links each
#    program with tests/fuzz/seed_wrap.c (-Wl,--wrap) and runs make check, which saves each
#    input in the harness's format (files named by a hash of their content; over 64 KiB
#    skipped);
#  - inputs the suite does not write: tests/fuzz/seed_extra.sh.
# The corpus: the zoo (models/, topologies/, validate/data/, names kept), then the raw seeds
# that add coverage to it (libFuzzer's -merge=1 with the harnesses of make fuzz).
# Needs clang (make fuzz). Run from the source tree after autoreconf:
#   sh tests/fuzz/seed-corpus.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
corpus="$top/tests/fuzz/corpus"
build="$top/_build-seed"
out="$build/seeds"
wrap="dt_model_load dt_model_load_string dt_topology_load dt_topology_load_string
      dt_calibration_load dt_calibration_load_string dt_parse_quantity dtv_runset_load
      dtx_idx_load dtx_cifar_load"
ldflags=
for f in $wrap; do ldflags="$ldflags -Wl,--wrap=$f"; done

rm -rf "$build" && mkdir -p "$build" "$out"
cd "$build"
# shellcheck disable=SC2046 # pkg-config's flags are words
cc -std=gnu11 -O1 -c -o seed_wrap.o -I"$top/include" -I"$top/validate" -I"$top/exec" \
  $(pkg-config --cflags yaml-0.1 zlib) "$top/tests/fuzz/seed_wrap.c"
"$top/configure" -q LDFLAGS="$ldflags" LIBS="$build/seed_wrap.o -lz"
make -j2 >/dev/null
DT_SEED_OUT=$out make -j2 check >/dev/null 2>&1 ||
  echo "seed: make check failed in $build (seeds kept)"

make -j2 fuzz-build >/dev/null
sh "$top/tests/fuzz/seed_extra.sh" "$out"
# paths of this checkout made relative to the source tree (where fuzz_runs.c runs)
for f in "$out"/records/* "$out"/table/*; do sed -i "s|$top/||g" "$f"; done

targets="topology model calibration units records table idx cifar"
for t in $targets; do rm -rf "${corpus:?}/$t" && mkdir -p "$corpus/$t"; done
cp "$top"/models/*.yaml "$corpus/model/"
cp "$top"/topologies/*.yaml "$corpus/topology/"
cp "$top"/validate/data/*.csv "$corpus/table/"
for t in $targets; do
  mkdir -p "$out/$t"
  DTSIM_DATADIR=$top "./fuzz/fuzz_$t" -merge=1 "$corpus/$t" "$out/$t" >"$build/merge-$t.log" 2>&1 ||
    { tail "$build/merge-$t.log"; exit 1; }
  echo "seed: $t: $(ls "$corpus/$t" | wc -l) inputs of $(ls "$out/$t" | wc -l) seen"
done
