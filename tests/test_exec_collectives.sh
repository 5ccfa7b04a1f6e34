#!/bin/sh
# Runs tests/test_exec_collectives (every collective algorithm and point-to-point op walked by
# dtexec's executor, checked against closed forms) on 2 ranks and on 3 (a group that is not a
# power of two exercises the fold-in/fold-out steps of recursive doubling and Rabenseifner).
set -u
: "${top_builddir:=..}" "${top_srcdir:=..}" "${MPIEXEC:=mpiexec}"
export OPENBLAS_NUM_THREADS=1
# Under AddressSanitizer: see test_exec_equivalence.sh.
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$top_srcdir/tests/lsan.supp}"
rc=0
for n in 2 3 4; do
  timeout 60 $MPIEXEC -n $n "$top_builddir/tests/test_exec_collectives" || rc=1
done
exit $rc
