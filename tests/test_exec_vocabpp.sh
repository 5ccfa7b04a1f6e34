#!/bin/sh
# The vocabulary-parallel embedding, tied head and loss inside pipelines (Megatron-LM): with
# --pp 2 --tp 2 each first-stage rank holds ceil(V/T) rows of tiny-gpt's token table, each
# last-stage rank its copy of the same shard; the lookups' partial sums, the head's input
# gradient and the loss's statistics (maximum, target logit, sum of exponentials) are
# allreduced over the stage's tensor group, the shard's gradient between the two stages.
# gpipe, 1f1b and interleaved at -n 4 (oversubscribed) must reach the one-rank weights, each
# rank allocating its plan's buffer table. Controls: without the loss's allreduces
# (--drop-op loss-coll) each shard's softmax normalises over its own logits only.
# (tests/test_tensor.c vocabulary_parallel_in_pipelines has the plans' closed forms.)
#
# Tolerance: the runs differ from one rank only in the order float32 sums are taken; TOL = 1e-5.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
dtsim="$top_builddir/dtsim"

common="$sgd_flags --max-iters 8"
gpt="--model $top_srcdir/models/tiny-gpt.yaml"
pp="--pp 2 --tp 2 --batch 16"
exec_ok gpt-seq 1 $gpt --batch 16 || exit 1
same gpt-seq vocab-gpipe 4 $gpt $pp --strategy gpipe --micro-batches 4
same gpt-seq vocab-1f1b 4 $gpt $pp --strategy 1f1b
same gpt-seq vocab-interleaved 4 $gpt $pp --strategy interleaved --micro-batches 4
differs gpt-seq ctl-loss-coll 4 $gpt $pp --strategy 1f1b --drop-op loss-coll

# the plan: the tied allreduce moves the 32 x 32 shard (not the 64 x 32 table) between the
# ranks of one tensor index, 0-2 and 1-3
tied=$("$dtsim" -m tiny-gpt -s 1f1b --pp 2 --tp 2 -b 16 -t "$top_srcdir/topologies/1n4p.yaml" \
       --dump-plan | sed -n 's/.*COLL allreduce[^ ]* group [0-9]* (2 ranks) root 0 grads\[[0-9]*+\([0-9]*\)\]$/\1/p' |
       tr '\n' ' ')
if [ "$tied" = "1024 1024 1024 1024 " ]; then ok "tied shard allreduce: $tied"
else bad "tied shard allreduce: [$tied]"; fi
finish
