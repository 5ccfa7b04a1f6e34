#!/bin/sh
# dtexec, activation recomputation (--recompute full|selective): the recomputed forward is the
# first one bit for bit (same kernels, same inputs, dropout drawing the same masks again), so the
# weights after N steps equal --recompute none's exactly (TOL = 0), on tiny-gpt and tiny-cnn at
# 1 and 2 ranks (against none at the same ranks), with tensor parallelism, pipelines (3
# stages cutting tiny-gpt's blocks) and ZeRO-2, and cnn21k's dropout at 1 rank; every rank allocates its plan's buffer table (the workspace instead of the recomputed layers' outputs and state).
# Controls: without the recompute ops (--drop-op recompute) the backward reads what a later
# segment (or attention layer) left in the shared workspace, and the weights differ.
. "${top_srcdir:=..}/tests/testlib.sh"
TOL=0
. "$top_srcdir/tests/execlib.sh"
common="$sgd_flags --max-iters 4"

gpt="--model tiny-gpt --batch 8" cnn="--model $top_srcdir/tests/data/tiny-cnn.yaml --batch 16"
drop="--model cnn21k --batch 16" # dropout: the recomputed masks must be the first ones
# against NAME-none of the same ranks and flags (the same order of sums: exactly)
check() {
  c_name=$1 c_np=$2 c_modes=$3; shift 3  # (exec_run sets name and np)
  exec_ok "$c_name-none" "$c_np" "$@" || return
  for rc in $c_modes; do same "$c_name-none" "$c_name-$rc" "$c_np" "$@" --recompute "$rc"; done
}
check gpt 1 "full selective" $gpt
check cnn 1 full $cnn
check drop 1 full $drop
check gpt-ring 2 "full selective" $gpt --strategy ring
check gpt-tp 2 "full selective" $gpt --strategy ring --tp 2
check cnn-ring 2 full $cnn --strategy ring
check cnn-zero2 2 full $cnn --strategy ring --zero 2
check cnn-gpipe 2 full $cnn --strategy gpipe --pp 2 --micro-batches 2
# 3 stages cut tiny-gpt's blocks: each stage recomputes its part of a cut block (the layers
# whose outputs go to the next stage kept)
check gpt-1f1b 3 full $gpt --strategy 1f1b --pp 3 --micro-batches 2
# stage boundaries inside a block: each stage recomputes its part (the first ends at the
# attention core, whose probabilities it recomputes; the second at the MLP's GELU); the
# workspace holds one micro-batch of 4
cut1="--strategy 1f1b --pp 2 --micro-batches 4 --stages 0-3,4-23"
cut2="--strategy gpipe --pp 2 --micro-batches 2 --stages 0-8,9-23 --precision bf16"
check gpt-cut1 2 "full selective" $gpt $cut1
check gpt-cut2 2 full $gpt $cut2
# interleaved, 2 stages x 3 chunks of ~4 layers: a block comes back to its rank two chunks
# later; each part is recomputed before its own backward (the workspace holds one part)
check gpt-interleaved 2 full $gpt --strategy interleaved --pp 2 --chunks 3 --micro-batches 4

# controls
differs gpt-none ctl-gpt-full 1 $gpt --recompute full --drop-op recompute
differs gpt-none ctl-gpt-selective 1 $gpt --recompute selective --drop-op recompute
differs cnn-none ctl-cnn-full 1 $cnn --recompute full --drop-op recompute
differs gpt-1f1b-none ctl-gpt-1f1b-full 3 $gpt --strategy 1f1b --pp 3 --micro-batches 2 \
  --recompute full --drop-op recompute
differs gpt-cut1-none ctl-gpt-cut1 2 $gpt $cut1 --recompute full --drop-op recompute
differs drop-none ctl-drop-seed 1 $drop --recompute full --seed 8
exit $((fails > 0))
