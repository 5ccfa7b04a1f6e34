#!/bin/sh
# Waiting ranks that share a CPU sleep between their polls (exec/idle.h): 4 ranks pinned to
# one CPU (taskset), 24 steps of tiny-cnn, DTEXEC_WAIT unset (auto: fewer CPUs than ranks, so
# they sleep) and DTEXEC_WAIT=poll, must reach the same weights (only the waiting differs).
# When auto sleeps is tests/test_idle's (deterministic); the CPU time it saves is a
# benchmark's figure, not this test's.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
command -v taskset >/dev/null || { echo "SKIP: no taskset"; exit 77; }
common="$sgd_flags --max-iters 24"
cpu=$(awk '/^Cpus_allowed_list/ { split($2, a, "[,-]"); print a[1] }' /proc/self/status)

# one_cpu NAME MODE: the run under DTEXEC_WAIT=MODE ("": unset) on one CPU
one_cpu() {
  name=$1 mode=$2
  if [ -n "$mode" ]; then DTEXEC_WAIT=$mode; export DTEXEC_WAIT; else unset DTEXEC_WAIT; fi
  MPIEXEC="taskset -c $cpu ${MPIEXEC:-mpiexec}" \
    exec_ok "$name" 4 --model "$top_srcdir/tests/data/tiny-cnn.yaml" --batch 4 --strategy ring
}
one_cpu poll poll && one_cpu auto "" || exit 1
TOL=0 weights_same poll auto
finish
