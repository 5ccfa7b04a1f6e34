#!/bin/sh
# dtexec: every data-parallel strategy, run by 2 MPI ranks with batch B each, must reach the
# same weights as 1 rank with batch 2B (same seed, same samples: --read-whole makes both see
# one global permutation; SGD without learning-rate scaling, so that the update is exactly
# "minus lr times the global-batch mean gradient" in both cases).
#
# Tolerance: the runs differ only in the order in which float32 gradients are summed (one GEMM
# over 2B rows against two GEMMs over B rows plus one addition), i.e. by a few ulp per step
# (~1e-7 relative); 8 SGD steps on weights of order 0.1-1 stay within 1e-6. TOL = 1e-5 leaves a
# factor 10 of margin while a wrong scaling, a missing reduction or a wrong chunk moves weights
# by 1e-3 or more (a control run with another seed differs by ~1 and must fail the comparison).
. "${top_srcdir:=..}/tests/testlib.sh"
dtexec="$top_builddir/dtexec"
diff="$top_builddir/tests/params_diff"
TOL=1e-5

# A small CNN without dropout (dropout masks would differ between 1 and 2 ranks).
cat >"$tmp/tiny.yaml" <<'YAML'
name: tiny-cnn
source: dtexec's equivalence test (no dropout)
input: {shape: [1, 8, 8]}
classes: 10
layers:
  - {kind: conv2d, name: conv, filters: 4, kernel: 3, activation: relu}
  - {kind: maxpool, name: pool, kernel: 2}
  - {kind: flatten, name: flat}
  - {kind: dense, name: hidden, units: 16, activation: relu}
  - {kind: dense, name: out, units: 10, activation: softmax}
YAML
common="--model $tmp/tiny.yaml --synthetic 512 --read-whole --optimizer sgd --lr 0.1
        --no-lr-scale --seed 7 --max-iters 8 --quiet --check-sync"

# run NAME NPROCS ARGS...: dtexec under mpiexec, parameters dumped to $tmp/NAME.bin
run() {
  name=$1 np=$2; shift 2
  # shellcheck disable=SC2086
  timeout 60 $MPIEXEC -n "$np" "$dtexec" $common --dump-params "$tmp/$name.bin" "$@" \
    >"$tmp/$name.out" 2>&1
}

if ! run seq 1 --batch 32; then
  bad "sequential reference run: $(cat "$tmp/seq.out")"
  exit 1
fi

# same NAME: NAME's weights equal the sequential ones within TOL
same() {
  if "$diff" "$tmp/seq.bin" "$tmp/$1.bin" "$TOL" >"$tmp/$1.diff"; then
    ok "$1: $(cat "$tmp/$1.diff")"
  else
    bad "$1: $(cat "$tmp/$1.diff")"
  fi
}

for s in reduce-bcast-linear reduce-bcast ring recursive-doubling rabenseifner mpi-allreduce \
         ps-central ps-sharded; do
  if run "$s" 2 --batch 16 --strategy "$s"; then same "$s"
  else bad "$s: exit $? $(cat "$tmp/$s.out")"; fi
done

# hierarchical needs two nodes: one rank on each node of 2n1p.
if run hierarchical 2 --batch 16 --strategy hierarchical --topology "$top_srcdir/topologies/2n1p.yaml"
then same hierarchical
else bad "hierarchical: $(cat "$tmp/hierarchical.out")"; fi

# Gradient buckets: non-blocking allreduces overlapped with backward, completed at WAIT.
for s in ring rabenseifner mpi-allreduce; do
  if run "bucket-$s" 2 --batch 16 --strategy "$s" --bucket 256B; then same "bucket-$s"
  else bad "bucket-$s: $(cat "$tmp/bucket-$s.out")"; fi
done

# Strong scaling: a global batch of 32 split in two is the same step.
if run strong 2 --batch 32 --scaling strong --strategy ring; then same strong
else bad "strong: $(cat "$tmp/strong.out")"; fi

# Control: another seed gives other weights, and the comparison says so.
if run control 1 --batch 32 --seed 8 && ! "$diff" "$tmp/seq.bin" "$tmp/control.bin" "$TOL" >/dev/null
then ok "control: a different run fails the comparison"
else bad "control run did not differ from the reference"; fi

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
