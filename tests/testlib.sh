# Sourced by the shell tests (`. "${top_srcdir:=..}/tests/testlib.sh"`): the build and source
# trees, the MPI and sanitizer environment, a scratch directory removed at exit, and the
# ok/bad tally that `finish` turns into the exit status.
set -u
: "${top_builddir:=..}" "${top_srcdir:=..}" "${MPIEXEC:=mpiexec}"
# One BLAS thread per rank: the tests run several ranks on few cores.
export OPENBLAS_NUM_THREADS=1
# Under AddressSanitizer: MPICH's UCX modules leak at exit (tests/lsan.supp); the programs that
# start MPI unwind their allocations the slow way so that it can match them (exec/san_mpi.c).
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$top_srcdir/tests/lsan.supp}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }

# expect_error NAME TEXT COMMAND...: the command exits 2 and its stderr holds TEXT (as is).
expect_error() {
  name=$1 want=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$want" "$tmp/err"; then ok "$name"
  else bad "$name (exit $rc, stderr: $(cat "$tmp/err"))"; fi
}

# The test's status: 0 when no check failed.
finish() {
  echo "$fails failed"
  [ "$fails" -eq 0 ]
}
