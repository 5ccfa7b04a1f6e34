#!/bin/sh
# dtexec learns: a synthetic task (always) and one epoch of the Fashion-MNIST MLP on the real
# data set (when Debian's dataset-fashion-mnist is installed), each on 2 MPI ranks. Also checks
# what a run writes: the JSON record, the per-op CSV and the Chrome trace.
. "${top_srcdir:=..}/tests/testlib.sh"
dtexec="$top_builddir/dtexec"
model="$top_srcdir/models/mlp-fmnist.yaml"

# accuracy FILE: the last test accuracy in dtexec's output
accuracy() { sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p' "$1" | tail -n 1; }
# at_least A B: A >= B as decimals
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }

# Synthetic: labels from a random linear teacher of 8 latent factors, which the MLP learns to
# more than 80% in one epoch of 8192 samples (chance is 10%; this build measures about 90%).
if timeout 60 $MPIEXEC -n 2 "$dtexec" --model "$model" --synthetic 8192 --batch 32 \
     --strategy ring --record "$tmp/run.jsonl" --ops-csv "$tmp/ops.csv" --trace "$tmp/trace.json" \
     --trace-iters 3 >"$tmp/syn.out" 2>&1; then
  a=$(accuracy "$tmp/syn.out")
  if at_least "$a" 0.80; then ok "synthetic task learnt: test accuracy $a"
  else bad "synthetic task: test accuracy $a < 0.80"; fi
else
  bad "synthetic run failed: $(cat "$tmp/syn.out")"
fi

# The record: one line with the configuration and the measurements.
if [ "$(wc -l <"$tmp/run.jsonl")" -eq 1 ] &&
   grep -q '"strategy": "ring"' "$tmp/run.jsonl" &&
   grep -q '"ranks": 2' "$tmp/run.jsonl" &&
   grep -q '"samples_per_s": [0-9]' "$tmp/run.jsonl" &&
   grep -q '"mpi_library": "MPICH' "$tmp/run.jsonl" &&
   grep -q '"params_agree": true' "$tmp/run.jsonl"; then
  ok "record"
else
  bad "record: $(cat "$tmp/run.jsonl")"
fi
# --bind: each of 2 ranks pinned to its own block of the CPUs this test may use (one CPU
# each on a 2-CPU machine; the same CPU for both only when a single one is usable).
if timeout 60 $MPIEXEC -n 2 "$dtexec" --model "$model" --synthetic 1024 --max-iters 3 --epochs 1 \
     --bind --record "$tmp/bind.jsonl" >"$tmp/bind.out" 2>&1; then
  usable=$(nproc)
  line=$(grep '^dtexec: pinned:' "$tmp/bind.out")
  c0=$(echo "$line" | sed -n 's/.*rank 0 -> CPU \([0-9-]*\),.*/\1/p')
  c1=$(echo "$line" | sed -n 's/.*rank 1 -> CPU \([0-9-]*\)$/\1/p')
  if [ -n "$c0" ] && [ -n "$c1" ] && { [ "$usable" -lt 2 ] || [ "$c0" != "$c1" ]; } &&
     grep -q "\"bound_cpus\": \"$c0\"" "$tmp/bind.jsonl"
  then ok "--bind: $line"
  else bad "--bind: '$line' (usable CPUs $usable), record: $(cat "$tmp/bind.jsonl")"; fi
else
  bad "--bind run failed: $(cat "$tmp/bind.out")"
fi
# The CSV: a header and, for 3 sampled iterations, every op of both ranks (the plan lists the
# op count: 3 x (ops of rank 0 + ops of rank 1)).
nops=$(timeout 60 $MPIEXEC -n 2 "$dtexec" --model "$model" --strategy ring --dump-plan |
       sed -n 's/^rank [0-9]*:.* \([0-9]*\) ops$/\1/p' | awk '{ s += $1 } END { print s }')
rows=$(($(wc -l <"$tmp/ops.csv") - 1))
if [ -n "$nops" ] && [ "$rows" -eq $((3 * nops)) ] && head -n 1 "$tmp/ops.csv" | grep -q '^rank,epoch,iteration,op,kind'
then ok "ops csv: $rows rows"
else bad "ops csv: $rows rows, expected 3 x $nops"; fi
# The trace: JSON with one track per rank and the simulator's op names.
if grep -q '"name": "allreduce/ring"' "$tmp/trace.json" && grep -q '"tid": 1,' "$tmp/trace.json" &&
   { ! command -v python3 >/dev/null || python3 -m json.tool "$tmp/trace.json" >/dev/null; }
then ok "trace"
else bad "trace"; fi

# Fashion-MNIST, one epoch, each rank reading its shard: Keras' tutorial MLP reaches about 83%
# test accuracy after one epoch; 80% is the bar.
data=/usr/share/datasets/fashion-mnist
if [ ! -r "$data/train-images-idx3-ubyte.gz" ] && [ ! -r "$data/train-images-idx3-ubyte" ]; then
  echo "SKIP: $data is missing (apt-get install dataset-fashion-mnist)"
  [ $fails -eq 0 ] && exit 77
  exit 1
fi
if timeout 60 $MPIEXEC -n 2 "$dtexec" --model "$model" --batch 32 --strategy ring \
     --data "$data" >"$tmp/fm.out" 2>&1; then
  a=$(accuracy "$tmp/fm.out")
  if at_least "$a" 0.80; then ok "fashion-mnist: test accuracy $a after one epoch"
  else bad "fashion-mnist: test accuracy $a < 0.80"; fi
else
  bad "fashion-mnist run failed: $(cat "$tmp/fm.out")"
fi
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
