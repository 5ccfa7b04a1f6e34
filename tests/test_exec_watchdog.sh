#!/bin/sh
# dtexec's watchdog (--timeout): one rank of 2 is stopped (kill -STOP) while the job trains;
# the other must end the job within the limit plus the heartbeat grace (plus a margin for a
# loaded machine), with a non-zero status and one line that names the stopped rank as silent.
# Twice: a collective strategy (ring: rank 1 stopped) and a pipeline (gpipe, point-to-point:
# rank 0 stopped). Bad --timeout values exit 2 naming the flag; --timeout 0 and a short limit
# leave a healthy run alone.
#
# Never hangs: every mpiexec runs under timeout(1); the processes of a job are found as the
# descendants of its mpiexec (other jobs may run on the machine), and whatever is left of them
# at the end is continued and killed.
. "${top_srcdir:=..}/tests/testlib.sh"
dtexec="$top_builddir/dtexec"
stopped=""
cleanup() {
  for p in $stopped; do
    kill -CONT "$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
model="$top_srcdir/models/mlp-fmnist.yaml"
T=4          # --timeout in the stop tests
GRACE=4      # the heartbeat exchange: the limit, between 1 and 5 s (man dtexec)
MARGIN=20    # start-up of the abort and a loaded machine

# descendants PID: the processes under PID, one per line.
descendants() {
  for c in $(ps -o pid= --ppid "$1"); do
    echo "$c"
    descendants "$c"
  done
}

# rank_pid JOB RANK: the dtexec process of that rank among JOB's descendants.
rank_pid() {
  for p in $(descendants "$1"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = dtexec ] || continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMI_RANK=$2"; then
      echo "$p"
      return
    fi
  done
}

# stop_one NAME STRATEGY RANK: trains until RANK is stopped; checks how the job ends.
stop_one() {
  name=$1 strategy=$2 victim=$3 other=$((1 - $3))
  rm -f "$tmp/out" "$tmp/err" # the wait below must not see the previous job's output
  timeout -k 10 180 $MPIEXEC -n 2 "$dtexec" --model "$model" --synthetic 16384 \
    --epochs 100000 --strategy "$strategy" --timeout $T >"$tmp/out" 2>"$tmp/err" &
  job=$!
  i=0 # training starts after this line (and the job may be slow to start on a busy machine)
  while ! grep -q 'iterations per epoch' "$tmp/out" 2>/dev/null && [ $i -lt 600 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  sleep 1
  pid=$(rank_pid $job "$victim")
  for p in $(descendants $job); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = dtexec ] && stopped="$stopped $p"
  done
  if [ -z "$pid" ]; then
    kill -TERM $job
    wait $job
    bad "$name: no process of rank $victim found (stdout: $(cat "$tmp/out"))"
    return
  fi
  kill -STOP "$pid"
  t0=$(date +%s)
  wait $job
  rc=$?
  took=$(($(date +%s) - t0))
  line=$(grep "^dtexec: rank $other: no progress for" "$tmp/err")
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && [ $took -ge $((T - 1)) ] &&
    [ $took -le $((T + GRACE + MARGIN)) ] &&
    echo "$line" | grep -q "silent: rank $victim\$"; then
    ok "$name: the job ended $took s after rank $victim stopped (status $rc): $line"
  else
    bad "$name: status $rc after $took s (limit $T s + grace $GRACE s); stderr: $(cat "$tmp/err")"
  fi
  kill -CONT "$pid" 2>/dev/null
}

stop_one "ring, rank 1 stopped" ring 1
stop_one "gpipe, rank 0 stopped" gpipe 0

# Bad values name the flag and exit 2 on every rank.
for v in -1 abc nan inf 1e9 "" 5x; do
  timeout 60 $MPIEXEC -n 2 sh -c '"$0" "$@"; echo "rank-exit $?" >&2' "$dtexec" \
    --timeout "$v" --synthetic 64 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  n2=$(grep -c '^rank-exit 2$' "$tmp/err")
  if [ $rc -ne 124 ] && [ "$n2" -eq 2 ] && grep -q -- "^dtexec: --timeout: .*'$v'" "$tmp/err"
  then ok "--timeout '$v' refused"
  else bad "--timeout '$v' (mpiexec $rc, $n2 of 2 ranks exited 2; stderr: $(cat "$tmp/err"))"; fi
done

# A healthy run: the watchdog off, and a short limit that a run of quick steps never reaches.
for v in 0 $T; do
  timeout 120 $MPIEXEC -n 2 "$dtexec" --model "$model" --synthetic 1024 --epochs 2 \
    --strategy ring --timeout $v -q >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] && ! grep -q 'no progress' "$tmp/err"; then
    ok "--timeout $v: a healthy run succeeds"
  else bad "--timeout $v: a healthy run ended with status $rc: $(cat "$tmp/err")"; fi
done

[ $fails -eq 0 ]
