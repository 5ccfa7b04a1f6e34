#!/bin/sh
# Benchmark: dtsim end to end on H100 fat-trees of 1k to 16k GPUs (h100-128n-fattree with
# 128 ... 2,048 nodes of 8), ResNet-50, hierarchical, rail-ring and ring, one iteration, every flow
# simulated: wall and CPU time and peak RSS per run (GNU time), as a table, and a gnuplot
# plot when gnuplot is there. Usage: bench_scale.sh DTSIM [OUTDIR]
# BENCH_SCALE_NODES (default "128 256 512 1024 2048") and BENCH_SCALE_STRATEGIES (default
# "hierarchical rail-ring ring") choose the runs: the 16k ring moves 5.4e8 flows and takes
# minutes, the rail-ring 6.7e7.
set -eu
top=${top_srcdir:-.}
dtsim=$1 out=${2:-.}
nodes=${BENCH_SCALE_NODES:-128 256 512 1024 2048}
strategies=${BENCH_SCALE_STRATEGIES:-hierarchical rail-ring ring}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
table=$out/bench-scale.dat
echo "# strategy gpus wall_s cpu_s peak_rss_MB flows iter_s" >"$table"
for s in $strategies; do
  for n in $nodes; do
    sed "s/^\( *count:\) 128 /\1 $n /" "$top/topologies/h100-128n-fattree.yaml" >"$tmp/t.yaml"
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$dtsim" -t "$tmp/t.yaml" \
      -m "$top/models/resnet50-imagenet.yaml" -s "$s" -b 32 --dataset-size 1000000000 \
      -f csv -o "$tmp/row.csv"
    read -r wall user sys rss <"$tmp/time"
    row=$(tail -1 "$tmp/row.csv")
    echo "$s $((n * 8)) $wall $user $sys $rss $row" | awk -F'[ ,]' '{
      printf "%s %d %.2f %.2f %.0f %s %s\n", $1, $2, $3, $4 + $5, $6 / 1024, $(6 + 26), $(6 + 12) }' \
      >>"$table"
  done
done
column -t "$table" 2>/dev/null || cat "$table"
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal svg size 900,400
set output "$out/bench-scale.svg"
set multiplot layout 1,2
set logscale xy; set xlabel "GPUs"; set key left top
set ylabel "CPU time (s)"
plot for [s in "$strategies"] "$table" using (strcol(1) eq s ? \$2 : NaN):4 with linespoints title s
set ylabel "peak RSS (MB)"
plot for [s in "$strategies"] "$table" using (strcol(1) eq s ? \$2 : NaN):5 with linespoints title s
GP
  echo "plot: $out/bench-scale.svg"
fi
