#!/bin/sh
# dtsim --recommend and --sweep split over MPI processes: the same output however the search is split over MPI processes (K = 1, 2,
# 3), a winner equal to the plain simulation of its config, the memory limit honoured, and
# every bad input refused with exit status 2 and the flag's name.
. "${top_srcdir:=..}/tests/testlib.sh"
dtsim="$top_builddir/dtsim"
topo="$top_srcdir/topologies/2n4p.yaml"
model="$top_srcdir/models/mlp-fmnist.yaml"
rec="-t $topo -m $model --recommend --global-batch 512 --top 4"

"$dtsim" $rec >"$tmp/k1.txt" 2>"$tmp/k1.err" || bad "K=1 (exit $?: $(cat "$tmp/k1.err"))"
for k in 2 3; do
  timeout 120 $MPIEXEC -n $k "$dtsim" $rec >"$tmp/k$k.txt" 2>"$tmp/k$k.err"
  if [ $? -eq 0 ] && cmp -s "$tmp/k1.txt" "$tmp/k$k.txt"; then ok "K=$k prints what K=1 prints"
  else bad "K=$k differs: $(diff "$tmp/k1.txt" "$tmp/k$k.txt" | head -5) $(cat "$tmp/k$k.err")"; fi
done
"$dtsim" $rec -f csv >"$tmp/k1.csv" && timeout 120 $MPIEXEC -n 2 "$dtsim" $rec -f csv >"$tmp/k2.csv" &&
  cmp -s "$tmp/k1.csv" "$tmp/k2.csv" && ok "CSV split 2 ways" || bad "CSV split 2 ways"

# The winner, simulated on its own with its flags, takes the iteration the search printed.
row=$(sed -n 2p "$tmp/k1.csv")
strategy=$(echo "$row" | cut -d, -f2) accumulate=$(echo "$row" | cut -d, -f8)
bucket=$(echo "$row" | cut -d, -f9) zero=$(echo "$row" | cut -d, -f10)
tp=$(echo "$row" | cut -d, -f4) iter=$(echo "$row" | cut -d, -f12)
more=""
[ "$bucket" != 0 ] && more="--bucket ${bucket}B"
# shellcheck disable=SC2086
plain=$("$dtsim" -t "$topo" -m "$model" -s "$strategy" --scaling strong -b 512 \
        --accumulate "$accumulate" --zero "$zero" --tp "$tp" $more -f csv | sed -n 2p | cut -d, -f12)
[ -n "$iter" ] && [ "$iter" = "$plain" ] && ok "winner $strategy tp $tp: $iter s as simulated alone" ||
  bad "winner $strategy tp $tp: search $iter s, alone $plain s"
# ... and no strategy simulated alone at the same global batch beats it.
best=$("$dtsim" -t "$topo" -m "$model" --scaling strong -b 512 -f csv 2>/dev/null |
       tail -n +2 | cut -d, -f12 | sort -g | head -1)
awk -v a="$iter" -v b="$best" 'BEGIN { exit !(a <= b) }' && ok "nothing plain beats it ($best s)" ||
  bad "a plain strategy ($best s) beats the recommendation ($iter s)"

# Memory limit: below the smallest config nothing fits (exit 2, said why); the table's rows
# all fit under a limit between.
expect_error "limit below every config" "no configuration of mlp-fmnist fits" \
  "$dtsim" $rec --memory-limit "1 KiB"
"$dtsim" $rec --memory-limit "2.5 MiB" -f csv >"$tmp/lim.csv" 2>/dev/null &&
  tail -n +2 "$tmp/lim.csv" | awk -F, '$14 > 2.5 * 1048576 { bad = 1 } END { exit bad }' &&
  ok "rows under --memory-limit 2.5 MiB" || bad "a row above --memory-limit"
grep -q "over the memory limit" "$tmp/k1.txt" && ok "counts printed" || bad "no counts line"
grep -q "^  ring " "$tmp/k1.txt" && ok "family lines" || bad "no family lines"

# Pruning by the lower bound (sim/bound.h) leaves the table as the exhaustive search prints
# it (--no-prune simulates every config that fits); it prunes some, which --no-prune does not.
table() { sed -n '1,/^[0-9]* configurations/p' "$1" | grep -v "configurations"; }
"$dtsim" $rec --no-prune >"$tmp/np.txt" 2>&1 || bad "--no-prune: $(cat "$tmp/np.txt")"
table "$tmp/k1.txt" >"$tmp/k1.top" && table "$tmp/np.txt" >"$tmp/np.top"
[ -s "$tmp/np.top" ] && cmp -s "$tmp/k1.top" "$tmp/np.top" && ok "pruned table = --no-prune's" ||
  bad "pruning changed the table: $(diff "$tmp/k1.top" "$tmp/np.top" | head -5)"
grep -q " 0 pruned uncompiled" "$tmp/np.txt" && ! grep -q " 0 pruned uncompiled" "$tmp/k1.txt" &&
  ok "the bound prunes; --no-prune does not" || bad "pruned counts: $(grep configurations "$tmp/k1.txt" "$tmp/np.txt")"
# The symmetry modes (sim/symmetry.c) in the search: DTSIM_SYM_MIN_RANKS=4 estimates the
# 8-rank pipelines and data-parallel strategies (rows marked *); the table is still
# --no-prune's, and the same output split over K = 2 processes as K = 1. (The uneven split,
# K = 3, is checked above without the symmetry modes: here its 3 processes on CI's 2 CPUs
# were the test's dearest run, 5.9 of its 21.7 CPU s, for no check K = 2 does not make.)
export DTSIM_SYM_MIN_RANKS=4
"$dtsim" $rec >"$tmp/s1.txt" 2>&1 && "$dtsim" $rec --no-prune >"$tmp/snp.txt" 2>&1 ||
  bad "symmetry mode: $(cat "$tmp/s1.txt" "$tmp/snp.txt")"
grep -q "^ *1 ring .*\*" "$tmp/s1.txt" && grep -q "data-parallel strategies play one rank" \
  "$tmp/s1.txt" && ok "symmetry mode: data-parallel rows estimated, said so" ||
  bad "symmetry mode not said: $(head -8 "$tmp/s1.txt")"
table "$tmp/s1.txt" >"$tmp/s1.top" && table "$tmp/snp.txt" >"$tmp/snp.top"
cmp -s "$tmp/s1.top" "$tmp/snp.top" && ok "symmetry mode: pruned table = --no-prune's" ||
  bad "symmetry mode: pruning changed the table: $(diff "$tmp/s1.top" "$tmp/snp.top" | head -5)"
timeout 120 $MPIEXEC -n 2 "$dtsim" $rec >"$tmp/s2.txt" 2>&1 && cmp -s "$tmp/s1.txt" "$tmp/s2.txt" &&
  ok "symmetry mode: K=2 prints what K=1 prints" ||
  bad "symmetry mode: K=2 differs: $(diff "$tmp/s1.txt" "$tmp/s2.txt" | head -5)"
unset DTSIM_SYM_MIN_RANKS
grep -q "^\*" "$tmp/k1.txt" && bad "8 ranks estimated without DTSIM_SYM_MIN_RANKS" ||
  ok "8 ranks simulated by default"
expect_error "DTSIM_SYM_MIN_RANKS=x" "DTSIM_SYM_MIN_RANKS" env DTSIM_SYM_MIN_RANKS=x "$dtsim" $rec
expect_error "DTSIM_SYM_MIN_RANKS=-1" "DTSIM_SYM_MIN_RANKS" env DTSIM_SYM_MIN_RANKS=-1 "$dtsim" $rec
expect_error "--no-prune without --recommend" "applies to --recommend only" \
  "$dtsim" -t "$topo" -m "$model" --no-prune
expect_error "--top 0" "--top" "$dtsim" $rec --top 0
expect_error "--global-batch x" "--global-batch" "$dtsim" $rec --global-batch x
expect_error "--memory-limit bogus" "--memory-limit" "$dtsim" $rec --memory-limit "lots"
expect_error "--top without --recommend" "applies to --recommend only" \
  "$dtsim" -t "$topo" -m "$model" --top 3
expect_error "--recommend with --sweep" "--recommend" "$dtsim" $rec --sweep nodes=1,2
expect_error "--recommend with -s" "--recommend" "$dtsim" $rec -s ring
expect_error "mpiexec without --recommend" "splits --recommend" \
  timeout 60 $MPIEXEC -n 2 "$dtsim" -t "$topo" -m "$model"

# --sweep: shape k runs on process k % K; table, CSV and JSON as K = 1 (pipelines' per-stage
# arrays included), and a failing shape ends every process with exit status 2.
one="$top_srcdir/topologies/1n1p.yaml"
for f in table csv json; do
  "$dtsim" -t "$one" -m "$model" -s ring,gpipe,1f1b --sweep nodes=1,2,4 ppn=1,2 -f $f \
    >"$tmp/w1.$f" 2>/dev/null
  for k in 2 3; do
    timeout 120 $MPIEXEC -n $k "$dtsim" -t "$one" -m "$model" -s ring,gpipe,1f1b \
      --sweep nodes=1,2,4 ppn=1,2 -f $f >"$tmp/w$k.$f" 2>/dev/null
    cmp -s "$tmp/w1.$f" "$tmp/w$k.$f" && ok "sweep $f K=$k" || bad "sweep $f K=$k differs"
  done
done
grep -q "^Pipelines" "$tmp/w1.table" && ok "sweep has pipeline rows" || bad "no pipeline rows"
# --recompute is searched: with 1.5 GiB per device nothing without it fits gpt2-124m's global
# batch of 32 on 8 devices (accumulation, --tp with its vocabulary split, ZeRO and pooled
# activation gradients included: the smallest, mpi-allreduce with tp 2 and ZeRO-1, needs
# 1.73 GiB), and the winner recomputes the attention scores; with 4 GiB it need not and does
# not (its compute would grow)
for lim in 1.5GiB 4GiB; do
  "$dtsim" --recommend -m "$top_srcdir/models/gpt2-124m.yaml" -t "$top_srcdir/topologies/1n8p.yaml" \
    --global-batch 32 --memory-limit $lim --top 1 -f csv >"$tmp/rc$lim.csv" 2>&1
done
"$dtsim" --recommend -m "$top_srcdir/models/gpt2-124m.yaml" -t "$top_srcdir/topologies/1n8p.yaml" \
  --global-batch 32 --memory-limit 1.5GiB --top 1 -f csv --no-prune >"$tmp/np1.5GiB.csv" 2>&1
cmp -s "$tmp/rc1.5GiB.csv" "$tmp/np1.5GiB.csv" && ok "gpt2-124m 1.5 GiB: pruned = --no-prune" ||
  bad "gpt2-124m 1.5 GiB pruned vs --no-prune: $(diff "$tmp/rc1.5GiB.csv" "$tmp/np1.5GiB.csv")"
win() { sed -n 2p "$tmp/rc$1.csv" | cut -d, -f"$(head -1 "$tmp/rc$1.csv" | tr , '\n' |
        grep -n '^recompute$' | cut -d: -f1)"; }
[ "$(win 1.5GiB)" = selective ] && ok "recompute wins at 1.5 GiB" ||
  bad "1.5 GiB: $(head -2 "$tmp/rc1.5GiB.csv")"
[ "$(win 4GiB)" = none ] && ok "no recompute at 4 GiB" || bad "4 GiB: $(head -2 "$tmp/rc4GiB.csv")"
expect_error "sweep split with a bad shape" "cannot reshape" \
  timeout 60 $MPIEXEC -n 2 "$dtsim" -t "$one" -m "$model" --sweep nodes=1,2 ppn=1,4000
expect_error "sweep split with --trace" "splits --recommend and --sweep" \
  timeout 60 $MPIEXEC -n 2 "$dtsim" -t "$one" -m "$model" --sweep nodes=1,2 --trace "$tmp/t.json"
finish
