#!/bin/sh
# Waiting ranks that share a CPU sleep between their polls (exec/idle.h): 4 ranks pinned to
# one CPU (taskset), 24 steps of tiny-cnn. DTEXEC_WAIT unset (auto: fewer CPUs than ranks, so
# sleep) must cost less than half the CPU time of DTEXEC_WAIT=poll (the control: waiting
# ranks poll and hold the CPU the rank they wait for needs; seen at load ~27: 4.4 CPU s poll,
# 0.8 s auto), and reach the same weights (only the waiting differs).
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
command -v taskset >/dev/null || { echo "SKIP: no taskset"; exit 77; }
common="$sgd_flags --max-iters 24"
cpu=$(awk '/^Cpus_allowed_list/ { split($2, a, "[,-]"); print a[1] }' /proc/self/status)

# cpu_run NAME MODE: the run under DTEXEC_WAIT=MODE ("": unset) on one CPU; its CPU seconds
# (user + system, mpiexec and the ranks) in $tmp/NAME.cpu.
cpu_run() {
  name=$1 mode=$2
  if [ -n "$mode" ]; then DTEXEC_WAIT=$mode; export DTEXEC_WAIT; else unset DTEXEC_WAIT; fi
  MPIEXEC="/usr/bin/time -f %U+%S -o $tmp/$name.time taskset -c $cpu ${MPIEXEC:-mpiexec}" \
    exec_ok "$name" 4 --model "$top_srcdir/tests/data/tiny-cnn.yaml" --batch 4 --strategy ring ||
    return 1
  awk -F+ '{ print $1 + $2 }' "$tmp/$name.time" >"$tmp/$name.cpu"
}
cpu_run poll poll && cpu_run auto "" || exit 1
p=$(cat "$tmp/poll.cpu") a=$(cat "$tmp/auto.cpu")
if awk -v a="$a" -v p="$p" 'BEGIN { exit !(a < p / 2) }'; then
  ok "4 ranks on one CPU: auto (sleeping) $a CPU s, poll $p CPU s"
else bad "4 ranks on one CPU: auto $a CPU s is not under half of poll's $p CPU s"; fi
TOL=0 weights_same poll auto
finish
