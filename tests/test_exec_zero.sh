#!/bin/sh
# dtexec, ZeRO stages 1-3 (Rajbhandari et al. 2020): 2 ranks with batch B each (and 4 ranks,
# oversubscribed, with B/2) must reach the weights of 1 rank with batch 2B, for ring,
# mpi-allreduce and ps-sharded, with buckets (several layers per unit) and accumulation; a
# stage that skips its ZERO or its COPY ops must not (the controls); --tp 2 with stages 1-3
# on 4 ranks likewise, and stage 3 with --recompute. And every rank must
# allocate exactly its plan's buffer table (ZeRO's shards and staging buffers included).
#
# Tolerance: as in test_exec_equivalence.sh, the runs differ only in the order float32
# gradients are summed (a few ulp per step); 8 SGD steps stay within 1e-6 (seen: 1e-8 on
# mlp-wide), TOL = 1e-5. A dropped ZERO carries gradients over (staging or shard), a dropped
# COPY leaves a rank's chunk out of the gathered parameters or of its gradient shard: weights
# move by ~lr x gradient, far above TOL. Models: mlp-wide and a small CNN.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
common="$sgd_flags --max-iters 8"

wide="--model mlp-wide" tiny="--model $top_srcdir/tests/data/tiny-cnn.yaml"
exec_ok wide 1 $wide --batch 32 --momentum 0.9 || exit 1
exec_ok tiny 1 $tiny --batch 32 || exit 1
exec_ok tiny-acc 1 $tiny --batch 16 --accumulate 2 || exit 1

# every stage with each of ring, mpi-allreduce and ps-sharded on 2 ranks (on mlp-wide with
# momentum: its state is what stage 1 shards, and the memory check sees it)
for z in 1 2 3; do
  same wide "wide-z$z-ring" 2 $wide --batch 16 --momentum 0.9 --strategy ring --zero "$z"
done
same tiny tiny-z1-ps 2 $tiny --batch 16 --strategy ps-sharded --zero 1
same tiny tiny-z2-library 2 $tiny --batch 16 --strategy mpi-allreduce --zero 2
same tiny tiny-z3-ps 2 $tiny --batch 16 --strategy ps-sharded --zero 3
same tiny tiny-z3-library 2 $tiny --batch 16 --strategy mpi-allreduce --zero 3
# 4 ranks (oversubscribed), 256 B buckets (units of several layers), accumulation (stages 2-3
# reduce every micro-batch)
same tiny-acc tiny-z1-n4 4 $tiny --batch 4 --accumulate 2 --strategy ring --zero 1 --bucket 256B
same tiny-acc tiny-z2-n4 4 $tiny --batch 4 --accumulate 2 --strategy mpi-allreduce --zero 2 \
  --bucket 256B
same tiny-acc tiny-z3-n4 4 $tiny --batch 4 --accumulate 2 --strategy ring --zero 3 --bucket 256B

# controls
differs tiny ctl-zero1 2 $tiny --batch 16 --strategy ring --zero 1 --drop-op zero
differs tiny ctl-zero2 2 $tiny --batch 16 --strategy ring --zero 2 --drop-op zero
differs tiny ctl-copy2 2 $tiny --batch 16 --strategy ring --zero 2 --drop-op copy
differs tiny ctl-copy3 2 $tiny --batch 16 --strategy ring --zero 3 --drop-op copy
differs tiny ctl-seed 2 $tiny --batch 16 --strategy ring --zero 3 --seed 8

# --tp 2 with --zero 1 and 2 (dp 2 x tp 2 on 4 ranks, oversubscribed): each tensor rank's
# packed shards are sharded over its 2 data-parallel peers. tp-mlp with momentum (two pairs;
# its state is what stage 1 shards), stage 2 under ps-sharded with 1 KiB buckets, tiny-gpt
# (vocabulary-parallel, tied). Seen: 3e-8. Control: stage 2 without COPY.
tpm="--model $top_srcdir/tests/data/tp-mlp.yaml" gpt="--model $top_srcdir/models/tiny-gpt.yaml"
exec_ok tpm 1 $tpm --batch 32 --momentum 0.9 || exit 1
for z in 1 2; do
  same tpm "tpm-tp2-z$z" 4 $tpm --batch 16 --momentum 0.9 --strategy ring --tp 2 --zero "$z"
done
same tpm tpm-tp2-z2-ps 4 $tpm --batch 16 --momentum 0.9 --strategy ps-sharded --tp 2 --zero 2 \
  --bucket 1KiB
exec_ok gpt 1 $gpt --batch 16 || exit 1
same gpt gpt-tp2-z1 4 $gpt --batch 8 --strategy mpi-allreduce --tp 2 --zero 1
# tied table (lm_head reads wte) at stages 2 and 3: wte's unit has a staging of its own from
# the head's backward (stage 3: from wte's forward) to its reduce-scatter
same gpt gpt-z2-tied 2 $gpt --batch 8 --strategy ring --zero 2
same gpt gpt-z3-tied 2 $gpt --batch 8 --strategy mpi-allreduce --zero 3
same gpt gpt-z3-tied-bucket 2 $gpt --batch 8 --strategy ring --zero 3 --bucket 4KiB
same gpt gpt-tp2-z2-tied 4 $gpt --batch 8 --strategy ring --tp 2 --zero 2
# stage 3 with --tp 2 (dp 2 x tp 2): each tensor rank's packed shards (the vocabulary-parallel
# table and head, the column/row pairs) gathered per layer from its 2 data-parallel peers;
# and ring with 4 KiB buckets and accumulation in one run (--batch 4 --accumulate 2: gpt's
# global batch of 16; 4 oversubscribed ranks cost ~6 s of CPU a run, mostly polling).
# Seen: 2.98e-8 each. Controls: without the ZERO before a unit's
# backward (gradients carried over: NaN seen), without the COPY of the shard into staging.
same gpt gpt-tp2-z3 4 $gpt --batch 8 --strategy mpi-allreduce --tp 2 --zero 3
same gpt gpt-tp2-z3-bucket-acc 4 $gpt --batch 4 --accumulate 2 --strategy ring --tp 2 --zero 3 \
  --bucket 4KiB
differs gpt ctl-tp2-z3-zero 4 $gpt --batch 8 --strategy ring --tp 2 --zero 3 --drop-op zero
differs gpt ctl-tp2-z3-copy 4 $gpt --batch 8 --strategy ring --tp 2 --zero 3 --drop-op copy
# stage 3 with --recompute: the recomputed forward gathers its layers' parameters again
# before the backward's own gather (full: every block layer; selective: the attention cores,
# which have none), and with 1 KiB buckets on tp-mlp a unit cut by a segment's end is gathered
# once more after the recomputation (without that: 0.33 off, seen). Seen: 3e-8, 8.9e-8.
# Control: without the recomputation's gathers (--drop-op recompute-gather: 0.042 off, seen).
same gpt gpt-z3-full 2 $gpt --batch 8 --strategy ring --zero 3 --recompute full
same gpt gpt-z3-selective 2 $gpt --batch 8 --strategy mpi-allreduce --zero 3 --recompute selective
same gpt gpt-tp2-z3-full 4 $gpt --batch 8 --strategy ring --tp 2 --zero 3 --recompute full
same tpm tpm-z3-full-bucket 2 $tpm --batch 16 --momentum 0.9 --strategy ring --zero 3 \
  --recompute full --bucket 1KiB
differs gpt ctl-z3-full-gather 2 $gpt --batch 8 --strategy ring --zero 3 --recompute full \
  --drop-op recompute-gather
differs tpm ctl-z3-full-bucket-gather 2 $tpm --batch 16 --momentum 0.9 --strategy ring \
  --zero 3 --recompute full --bucket 1KiB --drop-op recompute-gather
differs gpt ctl-z2-tied-zero 2 $gpt --batch 8 --strategy ring --zero 2 --drop-op zero
differs tpm ctl-tp2-copy2 4 $tpm --batch 16 --momentum 0.9 --strategy ring --tp 2 --zero 2 \
  --drop-op copy

[ "$fails" -eq 0 ] && echo "all ZeRO checks passed"
exit $((fails > 0))
