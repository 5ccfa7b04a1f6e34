#!/bin/sh
# Benchmark: one ring iteration of mlp-fmnist on h100-128n-fattree (1,024 ranks, every flow
# simulated) by dtsim end to end, 5 runs, median wall time. A second binary as argument (an
# older build) runs alternately with the first, for a before/after on the same machine state.
set -eu
top=${top_srcdir:-.}
run() { # binary -> wall seconds
  t0=$(date +%s.%N)
  # an epoch needs a full global batch (128 x 1,024): ImageNet's size, not the default 60,000
  "$1" -t "$top/topologies/h100-128n-fattree.yaml" -m "$top/models/mlp-fmnist.yaml" -s ring \
    --dataset-size 1281167 -f csv -o /dev/null
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}
report() { # label, file of wall times
  sort -n "$2" | awk -v l="$1" '{ w[NR] = $1 }
    END { printf "%s: median %.3f s (min %.3f, max %.3f, %d runs)\n", l, w[int((NR + 1) / 2)],
          w[1], w[NR], NR }'
}
a=$(mktemp) b=$(mktemp)
trap 'rm -f "$a" "$b"' EXIT
for i in 1 2 3 4 5; do
  run "$1" >>"$a"
  if [ $# -gt 1 ]; then run "$2" >>"$b"; fi
done
report "dtsim: one ring iteration on 1,024 ranks ($1)" "$a"
if [ $# -gt 1 ]; then report "the same with $2" "$b"; fi
