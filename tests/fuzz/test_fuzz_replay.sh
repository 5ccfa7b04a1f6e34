#!/bin/sh
# Replays every fuzz harness (tests/fuzz/fuzz_*.c, built with tests/fuzz/replay.c) over its
# seed corpus and over the inputs that once crashed, hung or broke an invariant
# (tests/fuzz/regress/TARGET/): each must pass the harness's checks, under the sanitizers of
# the build. Run by make check; by hand:
#   top_builddir=_build top_srcdir=. sh tests/fuzz/test_fuzz_replay.sh
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}"
# records and tables name models and topologies of the source tree
DTSIM_DATADIR=$(cd "$top_srcdir" && pwd)
export DTSIM_DATADIR
fails=0
for t in topology model calibration units records table idx cifar; do
  dirs=
  for d in "$top_srcdir/tests/fuzz/corpus/$t" "$top_srcdir/tests/fuzz/regress/$t"; do
    if [ -d "$d" ]; then dirs="$dirs $d"; fi
  done
  if [ -z "$dirs" ]; then echo "FAIL: $t: no corpus"; fails=$((fails + 1)); continue; fi
  # shellcheck disable=SC2086 # $dirs: a list of paths without blanks
  if out=$(timeout 300 "$top_builddir/tests/fuzz/fuzz_$t" $dirs 2>&1); then
    echo "ok: $t: $(echo "$out" | tail -n 1)"
  else
    echo "FAIL: $t: $(echo "$out" | tail -n 30)"
    fails=$((fails + 1))
  fi
done
[ "$fails" -eq 0 ]
