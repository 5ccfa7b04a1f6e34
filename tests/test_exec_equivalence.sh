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
. "$top_srcdir/tests/execlib.sh"
common="--model $top_srcdir/tests/data/tiny-cnn.yaml --synthetic 512 --read-whole --optimizer sgd
        --lr 0.1 --no-lr-scale --seed 7 --max-iters 8 --quiet --check-sync"

if ! exec_run seq 1 --batch 32; then
  bad "sequential reference run: $(cat "$tmp/seq.out")"
  exit 1
fi

for s in reduce-bcast-linear reduce-bcast ring recursive-doubling rabenseifner mpi-allreduce \
         ps-central ps-sharded tree; do
  if exec_run "$s" 2 --batch 16 --strategy "$s"; then weights_same seq "$s"
  else bad "$s: exit $? $(cat "$tmp/$s.out")"; fi
done

# hierarchical needs two nodes: one rank on each node of 2n1p.
if exec_run hierarchical 2 --batch 16 --strategy hierarchical --topology "$top_srcdir/topologies/2n1p.yaml"
then weights_same seq hierarchical
else bad "hierarchical: $(cat "$tmp/hierarchical.out")"; fi

# Gradient buckets: non-blocking allreduces overlapped with backward, completed at WAIT.
for s in ring rabenseifner mpi-allreduce; do
  if exec_run "bucket-$s" 2 --batch 16 --strategy "$s" --bucket 256B; then weights_same seq "bucket-$s"
  else bad "bucket-$s: $(cat "$tmp/bucket-$s.out")"; fi
done

# Strong scaling: a global batch of 32 split in two is the same step.
if exec_run strong 2 --batch 32 --scaling strong --strategy ring; then weights_same seq strong
else bad "strong: $(cat "$tmp/strong.out")"; fi

# NCCL's double binary tree on 4 ranks (oversubscribed): inner nodes in both trees, the
# global batch of 32 split in four.
if exec_run tree4 4 --batch 32 --scaling strong --strategy tree; then weights_same seq tree4
else bad "tree4: $(cat "$tmp/tree4.out")"; fi

# The multi-level ring on 2 "nodes" of 2 ranks (2n2p): ring reduce-scatter in the node,
# allreduce of each rank's half along its rail (ranks 0-2 and 1-3), allgather in the node;
# every rank allocates its plan's buffers. Control: without its collectives the ranks'
# weights part (--check-sync stops the run).
same seq rail-ring 4 --batch 32 --scaling strong --strategy rail-ring \
  --topology "$top_srcdir/topologies/2n2p.yaml"
if exec_run rail-ring-nocoll 4 --batch 32 --scaling strong --strategy rail-ring \
     --topology "$top_srcdir/topologies/2n2p.yaml" --drop-op coll; then
  bad "control rail-ring-nocoll: trained to the end without its collectives"
elif grep -q "different parameters" "$tmp/rail-ring-nocoll.out"; then
  ok "control rail-ring-nocoll: $(cat "$tmp/rail-ring-nocoll.out")"
else bad "control rail-ring-nocoll: $(cat "$tmp/rail-ring-nocoll.out")"; fi

# Control: another seed gives other weights, and the comparison says so.
exec_ok control 1 --batch 32 --seed 8 && weights_differ seq control

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
