#!/bin/sh
# Benchmark: seed 002's grid (nodes 1,2,4 x ppn 1,2,4,8) x every strategy, simulated by dtsim
# from one command. Prints wall time, simulations, events and flows per second; with a second
# argument (a strategy list), only those strategies: the ten data-parallel ones give a figure
# comparable with binaries from before the pipelines.
set -eu
dtsim=${1:-./dtsim}
only=${2:-}
top=${top_srcdir:-.}
reps=20
out=$(mktemp)
trap 'rm -f "$out"' EXIT
t0=$(date +%s.%N)
i=0
while [ $i -lt $reps ]; do
  "$dtsim" -t "$top/topologies/1n1p.yaml" -m "$top/models/cnn690k.yaml" ${only:+-s "$only"} \
    --sweep nodes=1,2,4 ppn=1,2,4,8 -f csv -o "$out" 2>/dev/null
  i=$((i + 1))
done
t1=$(date +%s.%N)
awk -F, -v t0="$t0" -v t1="$t1" -v reps="$reps" -v what="${only:-all strategies}" 'NR > 1 { ev += $25; fl += $26; n++ }
  END { w = (t1 - t0) / reps;
        printf "dtsim seed-002 grid x %s: %d simulations, %.1f ms wall per sweep (mean of %d), %d events, %d flows, %.2f M events/s, %.2f M flows/s\n",
               what, n, w * 1e3, reps, ev, fl, ev / w / 1e6, fl / w / 1e6 }' "$out"
