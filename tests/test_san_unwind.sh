#!/bin/sh
# Under AddressSanitizer (skipped in other builds): the programs that start MPI unwind every
# allocation the slow way, which tests/lsan.supp needs to match leaks inside MPICH's UCX modules
# (exec/san_mpi.c); dtsim, which starts MPI only for a split search, keeps the fast unwinder,
# 3-5x cheaper on its allocations. ASan's help=1 prints each option's value at start-up.
. "${top_srcdir:=..}/tests/testlib.sh"
if ! nm "$top_builddir/dtexec" 2>/dev/null | grep -q __asan_init; then
  echo "SKIP: not an AddressSanitizer build"
  exit 77
fi
# unwinder PROGRAM ARGS...: the program's fast_unwind_on_malloc (true or false) at start-up
unwinder() {
  ASAN_OPTIONS=help=1 "$@" 2>&1 | grep -A1 -w 'fast_unwind_on_malloc' |
    sed -n 's/.*(Current Value: \([a-z]*\)).*/\1/p'
}
for p in dtexec tests/test_exec_collectives; do
  v=$(unwinder "$top_builddir/$p" --version)
  [ "$v" = false ] && ok "$p: slow unwinder" || bad "$p: fast_unwind_on_malloc '$v', want false"
done
v=$(unwinder "$top_builddir/dtsim" --version)
[ "$v" = true ] && ok "dtsim: fast unwinder" || bad "dtsim: fast_unwind_on_malloc '$v', want true"
finish
