#!/bin/sh
# 3D parallelism: pipelines (--pp) whose stages cut their dense pairs over tensor groups (--tp),
# Megatron-LM's rank order (tensor ranks innermost, then data replicas, then stages). pp 2 x
# tp 2 on 4 ranks (oversubscribed) must reach the one-rank weights with gpipe, 1f1b and
# interleaved, also when the stage boundary falls inside a pair (a column shard crosses from
# tensor rank k to tensor rank k); without the tensor groups' allreduces (--drop-op coll) it
# must not. Tied embeddings across stages (tiny-gpt at --pp 2, and pp 2 x tp 2) reach the
# one-rank weights through the table gradient's allreduce. ZeRO stage 1 over each stage's
# replicas (pp 2 x dp 2) too; stages 2 and 3 are refused with pipelines. Every rank allocates
# its plan's buffer table. The rank layout and the groups of
# dp 2 x pp 2 x tp 2 on 8 ranks are checked on dtsim's plan.
#
# Tolerance: as in test_exec_pipeline.sh and test_exec_tensor.sh, the runs differ only in the
# order float32 sums are taken: under 1e-7 after 8 SGD steps here, TOL = 1e-5; without the
# f/g allreduces the weights move by 1e-3 or more.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
dtsim="$top_builddir/dtsim"

# tests/data/tp-mlp.yaml: two pairs, (h1, h2) and (h3, out). Layers: flat 0, h1 1, h1_relu 2, h2 3, h2_relu 4, h3 5,
# h3_relu 6, out 7, out_softmax 8.
common="$sgd_flags --max-iters 8"
mlp="--model $top_srcdir/tests/data/tp-mlp.yaml" tiny="--model $top_srcdir/tests/data/tiny-cnn.yaml"

# references: one rank, the pipelines' micro-batches accumulated
exec_ok seq2 1 $mlp --batch 16 --accumulate 2 || exit 1
exec_ok seq4 1 $mlp --batch 8 --accumulate 4 || exit 1
exec_ok tiny2 1 $tiny --batch 16 --accumulate 2 || exit 1

for s in gpipe 1f1b interleaved; do
  exec_ok "pp2-tp2-$s" 4 $mlp --batch 32 --strategy "$s" --pp 2 --tp 2 &&
    weights_same seq2 "pp2-tp2-$s"
done
# the boundary after h1_relu: stage 1 receives the column shard of h1's output
exec_ok pp2-tp2-inside 4 $mlp --batch 32 --strategy 1f1b --pp 2 --tp 2 --micro-batches 4 \
  --stages 0-2,3-8 && weights_same seq4 pp2-tp2-inside
exec_ok tiny-pp2-tp2 4 $tiny --batch 32 --strategy gpipe --pp 2 --tp 2 &&
  weights_same tiny2 tiny-pp2-tp2
# controls: without the f/g allreduces each shard trains on its partial sums
exec_ok ctl-coll 4 $mlp --batch 32 --strategy gpipe --pp 2 --tp 2 --drop-op coll &&
  weights_differ seq2 ctl-coll
exec_ok ctl-inside 4 $mlp --batch 32 --strategy 1f1b --pp 2 --tp 2 --micro-batches 4 \
  --stages 0-2,3-8 --drop-op coll && weights_differ seq4 ctl-inside

# Memory: allocated bytes per rank (record) = the plan's buffer table (--dump-plan).
alloc_is_plan pp2-tp2-1f1b 4 $mlp --batch 32 --strategy 1f1b --pp 2 --tp 2
mem pp2-tp2-adam 4 $mlp --batch 32 --strategy gpipe --pp 2 --tp 2 --optimizer adam --stages 0-2,3-8

# Tied embeddings across stages (tiny-gpt: wte on stage 0, the tied lm_head on stage 1): the
# last stage holds a copy of the token table, and the two allreduce its gradient after the
# backward (Megatron-LM), then update it identically. Without that allreduce (--drop-op coll:
# the only collective at pp 2) each copy trains on its half of the gradient.
gpt="--model tiny-gpt"
exec_ok gpt-seq2 1 $gpt --batch 8 --accumulate 2 || exit 1
exec_ok gpt-pp2 2 $gpt --batch 16 --strategy gpipe --pp 2 && weights_same gpt-seq2 gpt-pp2
exec_ok gpt-pp2-tp2 4 $gpt --batch 16 --strategy 1f1b --pp 2 --tp 2 &&
  weights_same gpt-seq2 gpt-pp2-tp2
exec_ok ctl-gpt-tied 2 $gpt --batch 16 --strategy gpipe --pp 2 --drop-op coll &&
  weights_differ gpt-seq2 ctl-gpt-tied
alloc_is_plan gpt-pp2 2 $gpt --batch 16 --strategy gpipe --pp 2
# the plan: one allreduce of the 64 x 32 table's gradient between ranks 0 and 1
tied=$("$dtsim" -m tiny-gpt -s gpipe --pp 2 -b 16 -t "$top_srcdir/topologies/1n2p.yaml" --dump-plan |
       sed -n 's/.*COLL allreduce[^ ]* group [0-9]* (\([0-9]*\) ranks) root 0 grads\[[0-9]*+\([0-9]*\)\]/\1 \2/p' |
       tr '\n' ' ')
if [ "$tied" = "2 2048 2 2048 " ]; then ok "tied table allreduce: $tied"
else bad "tied table allreduce: [$tied]"; fi

# ZeRO stage 1 with pipelines: each stage's optimizer state sharded over its replicas
# (reduce-scatter, update of the chunk, allgather), also with tensor groups (the replicas of
# each tensor rank) and with the tied table. Momentum: its state is what stage 1 shards.
exec_ok seq2-m 1 $mlp --batch 16 --accumulate 2 --momentum 0.9 || exit 1
exec_ok pp2-dp2-z1 4 $mlp --batch 16 --strategy 1f1b --pp 2 --dp 2 --zero 1 --momentum 0.9 &&
  weights_same seq2-m pp2-dp2-z1
alloc_is_plan pp2-dp2-z1 4 $mlp --batch 16 --strategy 1f1b --pp 2 --dp 2 --zero 1 --momentum 0.9
exec_ok gpt-seq4 1 $gpt --batch 16 --accumulate 2 || exit 1
exec_ok gpt-pp2-dp2-z1 4 $gpt --batch 16 --strategy gpipe --pp 2 --dp 2 --zero 1 &&
  weights_same gpt-seq4 gpt-pp2-dp2-z1
# (its replicas drift apart, which dtexec's end-of-epoch check reports: exit 5)
if exec_run ctl-z1 4 $mlp --batch 16 --strategy 1f1b --pp 2 --dp 2 --zero 1 --momentum 0.9 \
  --drop-op coll; then weights_differ seq2-m ctl-z1
elif grep -q "ranks hold different parameters" "$tmp/ctl-z1.out"; then
  ok "control ctl-z1 fails: $(cat "$tmp/ctl-z1.out")"
else bad "control ctl-z1: $(cat "$tmp/ctl-z1.out")"; fi
expect_error "zero 2 with a pipeline" "ZeRO stages 2 and 3 with pipelines are not implemented" \
  "$dtsim" -m "$top_srcdir/tests/data/tp-mlp.yaml" -s gpipe --pp 2 --zero 2 -t "$top_srcdir/topologies/1n4p.yaml"
expect_error "dtexec zero 3 with a pipeline" "ZeRO stages 2 and 3 with pipelines" \
  timeout 60 $MPIEXEC -n 4 "$dtexec" $mlp --synthetic 64 --strategy 1f1b --pp 2 --zero 3

# Layout of dp 2 x pp 2 x tp 2 on 8 ranks (dtsim's plan): rank r is tensor rank r % 2 of
# replica r / 2 % 2 of stage r / 4; the tensor group of rank 0 is {0, 1}, its replicas {0, 2},
# and its activations go to rank 4 (stage 1, replica 0, tensor rank 0).
plan=$("$dtsim" -m "$top_srcdir/tests/data/tp-mlp.yaml" -s gpipe --pp 2 --dp 2 --tp 2 -t "$top_srcdir/topologies/2n4p.yaml" \
       -b 16 --dump-plan)
heads=$(echo "$plan" | sed -n 's/^rank \([0-9]*\): stage \([0-9]*\), replica \([0-9]*\) of 2.*/\1:\2.\3/p' |
        tr '\n' ' ')
if [ "$heads" = "0:0.0 1:0.0 2:0.1 3:0.1 4:1.0 5:1.0 6:1.1 7:1.1 " ]; then ok "3D rank order: $heads"
else bad "3D rank order: [$heads]"; fi
peers=$(echo "$plan" | sed -n '/^rank 0:/,/^rank 1:/p' | sed -n 's/.*SEND peer \([0-9]*\).*/\1/p' | sort -u)
if [ "$peers" = "4" ]; then ok "3D: rank 0 sends its activations to rank 4"
else bad "3D: rank 0 sends to [$peers]"; fi

# Bad configurations: exit 2 and why.
expect_error "pp x dp x tp does not match the ranks" \
  "2 stages x 0 replicas x 3 tensor ranks (--pp x --dp x --tp) must equal the 4 ranks" \
  "$dtsim" -m "$top_srcdir/tests/data/tp-mlp.yaml" -s gpipe --pp 2 --tp 3 -t "$top_srcdir/topologies/1n4p.yaml"
expect_error "3D without a pair that divides" "no dense pair" \
  "$dtsim" -m resnet18-cifar10 -s gpipe --pp 2 --tp 2 -t "$top_srcdir/topologies/1n4p.yaml"
finish
