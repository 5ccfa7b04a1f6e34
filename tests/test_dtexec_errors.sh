#!/bin/sh
# dtexec refuses bad input on EVERY rank: a bad flag, a bad model or topology, a strategy that
# does not fit, and broken dataset files (including one that only the rank reading the end of
# the file can see) make each of the 2 ranks exit with status 2 within the timeout, and one
# message names the flag or the file. A hang fails the test (timeout exits 124).
. "${top_srcdir:=..}/tests/testlib.sh"
dtexec="$top_builddir/dtexec"
model="$top_srcdir/models/mlp-fmnist.yaml"

# expect NAME WANTED-TEXT NPROCS ARGS...: every rank exits 2, stderr holds the text.
# Each rank runs under a shell that reports its own exit status, so that "every rank" is
# checked, not only mpiexec's summary.
expect() {
  name=$1 want=$2 np=$3; shift 3
  timeout 60 $MPIEXEC -n "$np" sh -c '"$0" "$@"; echo "rank-exit $?" >&2' "$dtexec" "$@" \
    >"$tmp/out" 2>"$tmp/err"
  rc=$?
  n2=$(grep -c '^rank-exit 2$' "$tmp/err")
  if [ $rc -ne 124 ] && [ "$n2" -eq "$np" ] && grep -v '^rank-exit' "$tmp/err" | grep -q -- "$want"
  then ok "$name"
  else bad "$name (mpiexec $rc, $n2 of $np ranks exited 2; stderr: $(cat "$tmp/err"))"; fi
}

# Flags: each message names the flag.
expect "bad integer" "--batch" 2 --batch abc
expect "zero batch" "--batch" 2 --batch 0
expect "unknown option" "--frobnicate" 2 --frobnicate
expect "missing value" "--epochs" 2 --model "$model" --epochs
expect "zero test samples" "--test-samples" 2 --test-samples 0
expect "bad test samples" "--test-samples" 2 --test-samples 12x
expect "negative lr" "--lr" 2 --lr -1
expect "bad scaling" "--scaling" 2 --scaling medium
expect "bad optimizer" "--optimizer" 2 --optimizer adagrad
expect "bad bucket unit" "--bucket" 2 --bucket 12
expect "momentum without sgd" "--momentum" 2 --momentum 0.9
expect "stray argument" "unexpected" 2 extra
expect "unknown strategy" "nope" 2 --model "$model" --synthetic 64 --strategy nope
expect "tf32 simulated only" "--precision: tf32 is simulated only" 2 --model "$model" \
  --synthetic 64 --precision tf32
expect "fp8 simulated only" "--precision: fp8 is simulated only" 2 --precision fp8
# The environment: DTEXEC_WAIT (exec/idle.h) names its variable.
saved_wait=${DTEXEC_WAIT-}
DTEXEC_WAIT=spin; export DTEXEC_WAIT
expect "bad DTEXEC_WAIT" "DTEXEC_WAIT: 'spin' is not one of auto, poll, sleep" 2 --model "$model"
DTEXEC_WAIT=$saved_wait

# Model, topology, strategy.
expect "missing model" "no-such-model" 2 --model no-such-model.yaml --synthetic 64
printf 'name: x\nsource: test\ninput: {shape: [4]}\nclasses: 2\nlayers:\n  - {kind: dense, units: -3}\n' \
  >"$tmp/bad.yaml"
expect "bad model" "bad.yaml:6" 2 --model "$tmp/bad.yaml" --synthetic 64
expect "missing topology" "nowhere.yaml" 2 --model "$model" --synthetic 64 --topology nowhere.yaml
expect "sequential on 2 ranks" "sequential" 2 --model "$model" --synthetic 64 --strategy sequential
expect "ring on 1 rank" "at least 2 ranks" 1 --model "$model" --synthetic 64 --strategy ring
expect "hierarchical on 1 node" "2 nodes" 2 --model "$model" --synthetic 64 --strategy hierarchical
expect "rail-ring on 1 node" "at least 2 nodes" 2 --model "$model" --synthetic 64 \
  --strategy rail-ring
expect "rail-ring on uneven nodes" "same number of ranks" 3 --model "$model" --synthetic 64 \
  --strategy rail-ring --topology "$top_srcdir/topologies/2n2p.yaml"
expect "strong batch below ranks" "smaller than" 2 --model "$model" --synthetic 64 --batch 1 \
  --scaling strong --strategy ring
expect "buckets with a parameter server" "buckets" 2 --model "$model" --synthetic 64 \
  --strategy ps-central --bucket 1MiB
# the parallel config (parsed by the core, shared with dtsim)
expect "zero stages" "--pp" 2 --model "$model" --synthetic 64 --strategy gpipe --pp 0
expect "bad micro-batches" "--micro-batches" 2 --strategy gpipe --micro-batches x
expect "stages with a gap" "--stages" 2 --strategy gpipe --stages 0-1,3-5
expect "bad grad-alg" "--grad-alg" 2 --strategy gpipe --grad-alg butterfly
expect "bad drop-op" "--drop-op" 2 --drop-op everything
expect "pp x dp not the ranks" "must equal" 2 --model "$model" --synthetic 64 --strategy gpipe \
  --pp 2 --dp 2
expect "pipeline flag on ring" "apply to the pipelines" 2 --model "$model" --synthetic 64 \
  --strategy ring --micro-batches 4
expect "accumulate on a pipeline" "accumulate" 2 --model "$model" --synthetic 64 \
  --strategy 1f1b --accumulate 2
expect "interleaved M not divisible" "divisible" 2 --model "$model" --synthetic 64 \
  --strategy interleaved --micro-batches 3
expect "stages not ending at the last layer" "last layer" 2 --model "$model" --synthetic 64 \
  --strategy gpipe --stages 0-1,2-3
expect "too few rows for micro-batches" "micro-batches" 2 --model "$model" --synthetic 64 \
  --strategy gpipe --micro-batches 8 --batch 4
expect "too few samples" "no full batch" 2 --model "$model" --synthetic 10 --batch 8 --strategy ring

# Dataset files. A small IDX pair of 4 items of 28x28 (the MLP's input) and its broken
# variants; od/printf build the bytes (header big-endian, then pixels).
idx_images() { # N ROWS COLS: header of an images file
  printf '\000\000\010\003'
  for v in "$1" "$2" "$3"; do
    printf "\\$(printf %03o $((v >> 24 & 255)))\\$(printf %03o $((v >> 16 & 255)))"
    printf "\\$(printf %03o $((v >> 8 & 255)))\\$(printf %03o $((v & 255)))"
  done
}
idx_labels() { # N
  printf '\000\000\010\001'
  v=$1
  printf "\\$(printf %03o $((v >> 24 & 255)))\\$(printf %03o $((v >> 16 & 255)))"
  printf "\\$(printf %03o $((v >> 8 & 255)))\\$(printf %03o $((v & 255)))"
}
pixels() { head -c "$1" /dev/zero; }
labels() { printf '\001\002\003\004\005\006\007\010' | head -c "$1"; }
make_set() { # DIR: a good set, train 8 items, test 4
  mkdir -p "$1"
  { idx_images 8 28 28; pixels $((8 * 784)); } >"$1/train-images-idx3-ubyte"
  { idx_labels 8; labels 8; } >"$1/train-labels-idx1-ubyte"
  { idx_images 4 28 28; pixels $((4 * 784)); } >"$1/t10k-images-idx3-ubyte"
  { idx_labels 4; labels 4; } >"$1/t10k-labels-idx1-ubyte"
}
make_set "$tmp/good"
if timeout 60 $MPIEXEC -n 2 "$dtexec" --model "$model" --data "$tmp/good" --batch 2 --quiet \
     >"$tmp/out" 2>&1
then ok "the good hand-made set trains"
else bad "the good hand-made set: $(cat "$tmp/out")"; fi

make_set "$tmp/magic"
printf 'P5\n28 28\n255\n' >"$tmp/magic/train-images-idx3-ubyte"
expect "wrong magic" "$tmp/magic/train-images-idx3-ubyte" 2 --model "$model" --data "$tmp/magic" --batch 2

make_set "$tmp/trunc"
{ idx_images 8 28 28; pixels $((8 * 784 - 100)); } >"$tmp/trunc/train-images-idx3-ubyte"
expect "truncated plain file" "$tmp/trunc/train-images-idx3-ubyte" 2 --model "$model" \
  --data "$tmp/trunc" --batch 2

# Gzip: the truncation shows only to the rank that reads the end (rank 1's shard); rank 0 must
# not be left waiting.
make_set "$tmp/gz"
rm "$tmp/gz/train-images-idx3-ubyte"
{ idx_images 8 28 28; pixels $((8 * 784 - 100)); } | gzip >"$tmp/gz/train-images-idx3-ubyte.gz"
expect "truncated gzip, seen by one rank" "$tmp/gz/train-images-idx3-ubyte.gz" 2 --model "$model" \
  --data "$tmp/gz" --batch 2

make_set "$tmp/count"
{ idx_labels 7; labels 7; } >"$tmp/count/train-labels-idx1-ubyte"
expect "image/label count mismatch" "$tmp/count/train-labels-idx1-ubyte" 2 --model "$model" \
  --data "$tmp/count" --batch 2

make_set "$tmp/dims"
{ idx_images 8 32 32; pixels $((8 * 1024)); } >"$tmp/dims/train-images-idx3-ubyte"
expect "dimension mismatch" "$tmp/dims/train-images-idx3-ubyte" 2 --model "$model" \
  --data "$tmp/dims" --batch 2

make_set "$tmp/label"
{ idx_labels 8; printf '\001\002\003\004\005\006\007\077'; } >"$tmp/label/train-labels-idx1-ubyte"
expect "label out of range" "$tmp/label/train-labels-idx1-ubyte" 2 --model "$model" \
  --data "$tmp/label" --batch 2

expect "missing data dir" "$tmp/none" 2 --model "$model" --data "$tmp/none"

# A topology of GPU nodes for a run on this machine's CPUs: the record would claim H100s.
expect "GPU topology for a CPU run" "its nodes have GPUs" 2 --model "$model" --synthetic 64 \
  --topology "$top_srcdir/topologies/dgx-h100.yaml"

# A multi-label sigmoid output trains on synthetic data (each output a yes/no label): it used
# to die mid-run with MPI_Abort on a label out of [0, 2).
cat >"$tmp/multilabel.yaml" <<'EOF2'
name: multilabel
source: test
input: {shape: [8]}
classes: 4
layers:
  - {kind: dense, units: 16, activation: relu}
  - {kind: dense, units: 4, activation: sigmoid}
EOF2
if timeout 60 $MPIEXEC -n 2 "$dtexec" -m "$tmp/multilabel.yaml" --synthetic 512 -e 1 -q \
     >"$tmp/out" 2>"$tmp/err"
then ok "multi-label sigmoid on --synthetic"
else bad "multi-label sigmoid on --synthetic: $(cat "$tmp/err")"; fi

# Write errors on every output: exit status 4 and a message, never a silent success.
if [ -w /dev/full ]; then
  for out in record trace ops-csv dump-params; do
    "$dtexec" -m "$model" --synthetic 200 --batch 20 -e 1 -q --$out /dev/full >/dev/null \
      2>"$tmp/err"; rc=$?
    if [ $rc -eq 4 ] && grep -q "cannot write" "$tmp/err"; then ok "--$out to a full disk"
    else bad "--$out /dev/full: exit $rc, $(cat "$tmp/err")"; fi
  done
  "$dtexec" -m "$model" --synthetic 200 --batch 20 -e 1 >/dev/full 2>"$tmp/err"; rc=$?
  if [ $rc -eq 4 ] && grep -q "standard output" "$tmp/err"; then ok "stdout to a full disk"
  else bad "stdout /dev/full: exit $rc, $(cat "$tmp/err")"; fi
fi

# --help and --version succeed on every rank.
if timeout 60 $MPIEXEC -n 2 "$dtexec" --help | grep -q -- '--strategy' &&
   timeout 60 $MPIEXEC -n 2 "$dtexec" --version | grep -q dtexec
then ok "help and version"
else bad "help and version"; fi

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
