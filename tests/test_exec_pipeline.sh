#!/bin/sh
# dtexec, plan v2: accumulation, the pipelines (gpipe, naive-mp, 1f1b, interleaved) and
# pipeline x data parallelism must reach the same weights as 1 rank with the same global batch
# split into the same micro-batches; a stage that skips its ZERO (--drop-op zero) must not.
# And every rank must allocate exactly the bytes of its plan's buffer table (dt_plan_rank_memory,
# printed by --dump-plan), for every registered strategy.
#
# Tolerance: as in test_exec_equivalence.sh, runs differ only in the order float32 gradients
# are summed (a few ulp per step); 8 SGD steps stay within 1e-6, TOL = 1e-5. The reference is
# 1 rank with --accumulate M (M micro-batches of B/M rows, the pipelines' micro-batches), so a
# layer's gradient is summed over the same rows in the same groups. A dropped ZERO adds the
# previous steps' gradients into every update: weights move by ~lr x gradient, far above TOL.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"

# A small CNN without dropout, with a skip connection (add) across the stage boundary.
cat >"$tmp/tiny.yaml" <<'YAML'
name: tiny-skip
source: dtexec's pipeline test (no dropout, a residual that crosses stages)
input: {shape: [1, 8, 8]}
classes: 10
layers:
  - {kind: conv2d, name: conv, filters: 4, kernel: 3, padding: same, activation: relu}
  - {kind: conv2d, name: conv2, filters: 4, kernel: 3, padding: same}
  - {kind: add, name: res, inputs: [conv_relu, conv2]}
  - {kind: maxpool, name: pool, kernel: 2}
  - {kind: flatten, name: flat}
  - {kind: dense, name: hidden, units: 16, activation: relu}
  - {kind: dense, name: out, units: 10, activation: softmax}
YAML
common="--model $tmp/tiny.yaml --synthetic 512 --read-whole --optimizer sgd --lr 0.1
        --no-lr-scale --seed 7 --max-iters 8 --quiet --check-sync --no-shuffle"

for M in 1 2 4; do
  exec_run "ref$M" 1 --batch $((32 / M)) --accumulate "$M" || bad "reference M=$M: $(cat "$tmp/ref$M.out")"
done
# accumulation on 2 ranks: 2 x 2 micro-batches of 8 = 32 per step
if exec_run acc-ring 2 --batch 8 --accumulate 2 --strategy ring; then weights_same ref4 acc-ring
else bad "acc-ring: $(cat "$tmp/acc-ring.out")"; fi
for s in gpipe 1f1b interleaved; do
  for M in 2 4; do
    if exec_run "$s-$M" 2 --batch 32 --strategy "$s" --micro-batches "$M"; then weights_same "ref$M" "$s-$M"
    else bad "$s-$M: $(cat "$tmp/$s-$M.out")"; fi
  done
done
if exec_run naive-mp 2 --batch 32 --strategy naive-mp; then weights_same ref1 naive-mp
else bad "naive-mp: $(cat "$tmp/naive-mp.out")"; fi
# pipeline x data parallel: 2 replicas of 16 rows, 2 micro-batches of 8 each
if exec_run pp-dp 4 --batch 16 --strategy 1f1b --pp 2 --dp 2 --micro-batches 2; then weights_same ref4 pp-dp
else bad "pp-dp: $(cat "$tmp/pp-dp.out")"; fi
# controls: a stage that keeps last step's gradients; a pipeline without its update
exec_run ctl-zero 2 --batch 32 --strategy gpipe --micro-batches 2 --drop-op zero && weights_differ ref2 ctl-zero
exec_run ctl-update 2 --batch 32 --strategy 1f1b --micro-batches 2 --drop-op update && weights_differ ref2 ctl-update

# Memory: allocated bytes per rank (record) = the plan's buffer table (--dump-plan).
for s in reduce-bcast-linear reduce-bcast ring recursive-doubling rabenseifner mpi-allreduce \
         ps-central ps-sharded gpipe 1f1b interleaved naive-mp; do
  mem "$s" 2 --batch 16 --strategy "$s"
done
mem sequential 1 --batch 16
mem hierarchical 2 --batch 16 --strategy hierarchical --topology "$top_srcdir/topologies/2n1p.yaml"
mem bucket 2 --batch 16 --strategy ring --bucket 256B --optimizer adam
mem momentum 2 --batch 8 --accumulate 2 --strategy rabenseifner --momentum 0.9
mem gpipe-m4 2 --batch 16 --strategy gpipe --micro-batches 4 --optimizer adam
mem 1f1b-dp 4 --batch 16 --strategy 1f1b --pp 2 --dp 2 --micro-batches 4

[ "$fails" -eq 0 ] && echo "all pipeline checks passed"
exit $((fails > 0))
