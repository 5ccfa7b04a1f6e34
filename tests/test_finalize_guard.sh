#!/bin/sh
# exec/finalize_guard.so's paths, deterministically and without a cluster: tests/guard_prog
# (an MPI program that returns STATUS after MPI_Finalize, declaring it first with --declare)
# runs as an MPI singleton with the guard preloaded, and with tests/finalize_hang.so behind
# it, whose PMPI_Finalize never returns (the MPICH/UCX TCP race of exec/CLUSTER.md item 4).
# Checked: the guard fires after DTC_FINALIZE_GRACE=1 and exits with the declared status
# (3), or 0 when none was declared; the rank's marker in DTC_GUARD_DIR says fired and the
# status; when MPI_Finalize returns the program's own status stands; a bad grace stops the
# program before main with exit 2 naming the variable.
. "${top_srcdir:=..}/tests/testlib.sh"
prog="$top_builddir/tests/guard_prog"
hang="$top_builddir/tests/finalize_hang.so"
guard=${FINALIZE_GUARD:-$top_builddir/exec/finalize_guard.so}   # another build, for a control
for f in "$prog" "$hang" "$guard"; do
  [ -f "$f" ] || { echo "SKIP: $f not built"; exit 77; }
done
# Under AddressSanitizer the sanitizer's runtime must come first; the preloads come before it.
export ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"

# run NAME PRELOAD ARGS...: guard_prog with PRELOAD, its markers in $tmp/NAME.d; the status
# in $rc, stdout and stderr in $tmp/NAME.out (30 s at most: a guard that never fires fails).
run() {
  name=$1 preload=$2; shift 2
  mkdir -p "$tmp/$name.d"
  DTC_GUARD_DIR="$tmp/$name.d" LD_PRELOAD="$preload" timeout 30 "$prog" "$@" \
    >"$tmp/$name.out" 2>&1
  rc=$?
}
# marker NAME: rank 0's marker of run NAME.
marker() { cat "$tmp/$1.d/rank.0" 2>/dev/null; }

export DTC_FINALIZE_GRACE=1
run hang3 "$guard:$hang" 3 --declare
if [ $rc -eq 3 ] && [ "$(marker hang3)" = "rank=0 fired=1 status=3" ] &&
   grep -q '^finalize_guard: rank 0: .* within 1 s .*status 3 (declared' "$tmp/hang3.out"; then
  ok "hung finalize, status 3 declared: exit 3, marker '$(marker hang3)'"
else bad "hung finalize, status 3 declared: exit $rc, marker '$(marker hang3)': $(cat "$tmp/hang3.out")"; fi

run hang_none "$guard:$hang" 3
if [ $rc -eq 0 ] && [ "$(marker hang_none)" = "rank=0 fired=1 status=0" ] &&
   grep -q 'status 0 (the program declared none)' "$tmp/hang_none.out"; then
  ok "hung finalize, nothing declared: exit 0, marker '$(marker hang_none)'"
else bad "hung finalize, nothing declared: exit $rc, marker '$(marker hang_none)': $(cat "$tmp/hang_none.out")"; fi

run hang0 "$guard:$hang" 0 --declare
if [ $rc -eq 0 ] && [ "$(marker hang0)" = "rank=0 fired=1 status=0" ]; then
  ok "hung finalize, status 0 declared: exit 0"
else bad "hung finalize, status 0 declared: exit $rc, marker '$(marker hang0)': $(cat "$tmp/hang0.out")"; fi

# MPI_Finalize returns: the guard stays silent and the program's status stands.
run clean3 "$guard" 3 --declare
if [ $rc -eq 3 ] && [ "$(marker clean3)" = "rank=0 fired=0 status=3" ] &&
   ! grep -q finalize_guard "$tmp/clean3.out"; then
  ok "finalize returns: exit 3, marker '$(marker clean3)', guard silent"
else bad "finalize returns: exit $rc, marker '$(marker clean3)': $(cat "$tmp/clean3.out")"; fi

# Without DTC_GUARD_DIR no marker is written (and nothing else changes).
DTC_GUARD_DIR= LD_PRELOAD="$guard:$hang" timeout 30 "$prog" 4 --declare >"$tmp/nodir.out" 2>&1
rc=$?
[ $rc -eq 4 ] && ok "no DTC_GUARD_DIR: exit 4" || bad "no DTC_GUARD_DIR: exit $rc: $(cat "$tmp/nodir.out")"

# dtexec declares its status: a bad option (exit 2) stays 2 when the guard fires.
if [ -x "$top_builddir/dtexec" ]; then
  mkdir -p "$tmp/dtexec.d"
  DTC_GUARD_DIR="$tmp/dtexec.d" LD_PRELOAD="$guard:$hang" timeout 30 "$top_builddir/dtexec" \
    --no-such-option >"$tmp/dtexec.out" 2>&1
  rc=$?
  if [ $rc -eq 2 ] && grep -q 'status 2 (declared' "$tmp/dtexec.out"; then
    ok "dtexec, bad option, hung finalize: exit 2"
  else bad "dtexec, bad option, hung finalize: exit $rc: $(cat "$tmp/dtexec.out")"; fi
fi

# A bad grace: exit 2 before main, naming the variable.
for g in abc 0 3601 '' -1 5s ' 5'; do
  DTC_FINALIZE_GRACE="$g" LD_PRELOAD="$guard" timeout 30 "$prog" 0 >"$tmp/grace.out" 2>&1
  rc=$?
  if [ $rc -eq 2 ] && grep -q "DTC_FINALIZE_GRACE='$g' is not" "$tmp/grace.out" &&
     ! grep -q '^guard_prog' "$tmp/grace.out"; then ok "DTC_FINALIZE_GRACE='$g' refused"
  else bad "DTC_FINALIZE_GRACE='$g': exit $rc: $(cat "$tmp/grace.out")"; fi
done
DTC_FINALIZE_GRACE=3600 LD_PRELOAD="$guard" timeout 30 "$prog" 0 >"$tmp/grace.out" 2>&1
rc=$?
[ $rc -eq 0 ] && ok "DTC_FINALIZE_GRACE=3600 accepted" || bad "DTC_FINALIZE_GRACE=3600: exit $rc: $(cat "$tmp/grace.out")"

finish
