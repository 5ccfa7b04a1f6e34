#!/bin/sh
# Benchmark: the 128 x 8 ring allreduce of 1e8 bytes (h100-128n-fattree, sim/bench_allreduce.yaml,
# one sample per rank), one iteration end to end by dtsim and by the SimGrid peer
# (sim/peer_simgrid.c: same plan, same flows, SimGrid 3.32 CM02). Prints both predictions,
# their relative difference and the ratio of CPU times. Usage: bench_peer_simgrid.sh DTSIM PEER
set -eu
top=${top_srcdir:-.}
topo=$top/topologies/h100-128n-fattree.yaml model=$top/sim/bench_allreduce.yaml
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# dtsim's CPU time (user + system) from `times` in a shell that runs only it
dcpu=$(sh -c '"$@" >"$0"; times' "$out" "$1" -t "$topo" -m "$model" -s ring -b 1 \
         --dataset-size 2000000 -f csv |
       awk 'NR == 2 { gsub(/s/, ""); split($1, u, "m"); split($2, s, "m");
                      printf "%.3f\n", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
d=$(cut -d, -f12 "$out" | tail -1)
case $d in [0-9]*) ;; *) echo "bench-peer-simgrid: dtsim printed no iteration time" >&2; exit 1 ;; esac
g=$("$2" "$topo" "$model" ring 1 2000000) # "simgrid iter_s T cpu_s C"
echo "$d $dcpu $g" | awk '{ dt = $2; sg = $7; rel = ($5 - $1) / $1
  printf "128 x 8 ring allreduce of 1e8 bytes, one iteration:\n"
  printf "  dtsim    %.9g s predicted, %.3f s CPU\n", $1, dt
  printf "  SimGrid  %.9g s predicted, %.3f s CPU (peer_simgrid)\n", $5, sg
  printf "  difference %.2e (relative); SimGrid / dtsim CPU time: %.1fx\n", rel, sg / dt }'
