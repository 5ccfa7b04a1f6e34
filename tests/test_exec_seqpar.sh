#!/bin/sh
# Sequence parallelism (--sequence-parallel on, Korthikanti et al. 2022) executed: tiny-gpt's
# layernorms and residual adds run on 1/t of the tokens between reduce-scatters and allgathers
# (tests/test_seqpar.c has the plans' closed forms). Each run must reach the one-rank weights:
# tp 2 at -n 2, tp 4 and dp 2 x tp 2 at -n 4 (also with --accumulate, --bucket, --zero 1 and 2),
# pp 2 x tp 2 (gpipe, 1f1b, interleaved), --recompute full and selective, and a transformer with
# dropout in the sequence-parallel regions (the chunk keeps its part of the one-rank run's
# masks). Control: without the tensor group's allreduces of the layernorms'
# gradients (--drop-op seq-grads) each rank's gains and biases see only its tokens and the
# weights must not reach the one-rank run's. Every rank allocates its plan's buffer table.
#
# Tolerance: the runs differ from one rank only in the order float32 sums are taken (seen: max
# |a-b| 3e-8 after 8 SGD steps); TOL = 1e-5. The control is 5e-3 off.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"

common="$sgd_flags --max-iters 8"
gpt="--model $top_srcdir/models/tiny-gpt.yaml"
sp="--strategy ring --sequence-parallel on"
exec_ok gpt-seq 1 $gpt --batch 16 || exit 1
same gpt-seq sp-tp2 2 $gpt --batch 16 $sp --tp 2
same gpt-seq sp-tp4 4 $gpt --batch 16 $sp --tp 4
same gpt-seq sp-dp2-tp2 4 $gpt --batch 8 $sp --tp 2
exec_ok sp-accumulate 4 $gpt --batch 4 --accumulate 2 $sp --tp 2 &&
  weights_same gpt-seq sp-accumulate
exec_ok sp-bucket 4 $gpt --batch 8 $sp --tp 2 --bucket 1KiB && weights_same gpt-seq sp-bucket
same gpt-seq sp-zero1 4 $gpt --batch 8 $sp --tp 2 --zero 1
same gpt-seq sp-zero2 4 $gpt --batch 8 $sp --tp 2 --zero 2
exec_ok sp-library 2 $gpt --batch 16 --strategy mpi-allreduce --sequence-parallel on --tp 2 &&
  weights_same gpt-seq sp-library
differs gpt-seq ctl-seq-grads 2 $gpt --batch 16 $sp --tp 2 --drop-op seq-grads
differs gpt-seq ctl-dp2-seq-grads 4 $gpt --batch 8 $sp --tp 2 --drop-op seq-grads

# tests/data/gpt-dropout.yaml: dropout after the embedding and each row-parallel projection
# (sequence-parallel regions: each chunk keeps its tokens' masks) and one inside the MLP
# pair (tensor-parallel: its columns' masks)
gd="--model $top_srcdir/tests/data/gpt-dropout.yaml"
exec_ok gd-seq 1 $gd --batch 16 && same gd-seq gd-sp-tp2 2 $gd --batch 16 $sp --tp 2

# Inside pipeline stages (3D: --pp 2 x --tp 2 at -n 4, oversubscribed): a stage's embedding is
# split, the LM head gathered, the stages send the residual stream's chunk; with --recompute
# (data-parallel and pipeline) the recomputed blocks gather their input again. Control: the
# pipeline without the layernorms' gradient allreduces.
pp="--sequence-parallel on --pp 2 --tp 2"
same gpt-seq sp-1f1b 4 $gpt --batch 16 --strategy 1f1b $pp
same gpt-seq sp-gpipe 4 $gpt --batch 16 --strategy gpipe $pp --micro-batches 4
same gpt-seq sp-interleaved 4 $gpt --batch 16 --strategy interleaved $pp --micro-batches 4
same gpt-seq sp-recompute 2 $gpt --batch 16 $sp --tp 2 --recompute full
same gpt-seq sp-1f1b-recompute 4 $gpt --batch 16 --strategy 1f1b $pp --recompute full
same gpt-seq sp-gpipe-selective 4 $gpt --batch 16 --strategy gpipe $pp --recompute selective
differs gpt-seq ctl-1f1b-seq-grads 4 $gpt --batch 16 --strategy 1f1b $pp --drop-op seq-grads
# with dropout: masks are counter-based (step, layer, the row in the global batch), so a
# pipeline, with tensor and sequence parallelism inside its stages or not, draws the one-rank
# run's masks and reaches its weights
same gd-seq gd-1f1b 2 $gd --batch 16 --strategy 1f1b --pp 2
same gd-seq gd-interleaved 2 $gd --batch 16 --strategy interleaved --pp 2 --micro-batches 4
same gd-seq gd-sp-1f1b 4 $gd --batch 16 --strategy 1f1b $pp

# bad input: --sequence-parallel without a tensor group is refused with exit 2
# shellcheck disable=SC2086
expect_error "sp without --tp" "needs --tp 2 or more" \
  $MPIEXEC -n 2 "$dtexec" $common $gpt --batch 16 --strategy ring --sequence-parallel on
finish
