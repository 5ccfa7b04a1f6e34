#!/bin/sh
# Tensor parallelism (--tp T, Shoeybi et al. 2019): dense pairs split column- then row-parallel
# over a tensor group must reach the one-rank weights, alone and inside data parallelism (dp 2
# x tp 2 on 4 ranks, oversubscribed); without their f/g allreduces (--drop-op coll) they must
# not. The plans have the closed form of the paper: per pair one allreduce of B x h floats
# forward (g, after the row-parallel layer) and one backward (f, of the column-parallel layer's
# input gradient, where that gradient is needed). Every rank allocates its plan's buffer table.
#
# Tolerance: as in test_exec_equivalence.sh, the runs differ only in the order float32 sums are
# taken (a GEMM over the whole hidden width against two over halves plus an allreduce): a few
# ulp per step, under 1e-7 after 8 SGD steps here. TOL = 1e-5; without the allreduces the
# weights move by 1e-3 or more.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
dtsim="$top_builddir/dtsim"

# tests/data/tp-mlp.yaml: two pairs, (h1, h2) and (h3, out); the second's input gradient is
# needed (f allreduce).
common="$sgd_flags --max-iters 8"

mlp="--model $top_srcdir/tests/data/tp-mlp.yaml"
exec_ok seq 1 $mlp --batch 32 || exit 1
exec_ok tp2 2 $mlp --batch 32 --strategy ring --tp 2 && weights_same seq tp2
exec_ok tp4 4 $mlp --batch 32 --strategy ring --tp 4 && weights_same seq tp4
# dp 2 x tp 2: replicas of 16 rows; tensor ranks innermost
for s in ring rabenseifner mpi-allreduce ps-sharded reduce-bcast; do
  exec_ok "dp2-tp2-$s" 4 $mlp --batch 16 --strategy "$s" --tp 2 && weights_same seq "dp2-tp2-$s"
done
exec_ok dp2-tp2-bucket 4 $mlp --batch 16 --strategy ring --tp 2 --bucket 1KiB &&
  weights_same seq dp2-tp2-bucket
exec_ok dp2-tp2-accumulate 4 $mlp --batch 8 --accumulate 2 --strategy ring --tp 2 &&
  weights_same seq dp2-tp2-accumulate
# dropout inside a pair (mlp-fmnist: dense, relu, dropout, dense): the group draws the one-rank
# run's masks, so tensor parallelism alone reaches its weights
fm="--model $top_srcdir/models/mlp-fmnist.yaml"
exec_ok fm-seq 1 $fm --batch 32 && exec_ok fm-tp2 2 $fm --batch 32 --strategy ring --tp 2 &&
  weights_same fm-seq fm-tp2
# controls: without the f/g allreduces each shard trains on its partial sums
exec_ok ctl-coll 2 $mlp --batch 32 --strategy ring --tp 2 --drop-op coll && weights_differ seq ctl-coll
exec_ok ctl-fm-coll 2 $fm --batch 32 --strategy ring --tp 2 --drop-op coll &&
  weights_differ fm-seq ctl-fm-coll

# tiny-gpt: attention split by heads (q|k|v column-parallel by heads, 2 of the 4 heads per
# rank, the output projection row-parallel), the MLP cut, and the vocabulary (each rank looks
# up its 32 of the 64 token rows, the tied head gives its 32 logits per token, the loss
# allreduces the maximum, the target's logit and the sum of exponentials); tp 2 alone, tp 4
# and dp 2 x tp 2. Seen: max |a-b| 3e-8 after 8 steps. Controls: without the f/g allreduces
# (max |a-b| 1e7), without the loss's allreduces only (--drop-op loss-coll: 0.05).
gpt="--model $top_srcdir/models/tiny-gpt.yaml"
exec_ok gpt-seq 1 $gpt --batch 16 || exit 1
exec_ok gpt-tp2 2 $gpt --batch 16 --strategy ring --tp 2 && weights_same gpt-seq gpt-tp2
exec_ok gpt-dp2-tp2 4 $gpt --batch 8 --strategy ring --tp 2 && weights_same gpt-seq gpt-dp2-tp2
exec_ok gpt-tp4 4 $gpt --batch 16 --strategy ring --tp 4 && weights_same gpt-seq gpt-tp4
exec_ok ctl-gpt-coll 2 $gpt --batch 16 --strategy ring --tp 2 --drop-op coll &&
  weights_differ gpt-seq ctl-gpt-coll
exec_ok ctl-gpt-loss 2 $gpt --batch 16 --strategy ring --tp 2 --drop-op loss-coll &&
  weights_differ gpt-seq ctl-gpt-loss
# A vocabulary T does not divide (63 tokens over 2 ranks): rank 1's 32 rows hold one of
# padding, never looked up and left out of its softmax; the one-rank run's weights all the same.
sed 's/vocab: 64/vocab: 63/g; s/^classes: 64/classes: 63/' "$top_srcdir/models/tiny-gpt.yaml" \
  >"$tmp/gpt63.yaml"
g63="--model $tmp/gpt63.yaml"
exec_ok g63-seq 1 $g63 --batch 16 && exec_ok g63-tp2 2 $g63 --batch 16 --strategy ring --tp 2 &&
  weights_same g63-seq g63-tp2
exec_ok ctl-g63-loss 2 $g63 --batch 16 --strategy ring --tp 2 --drop-op loss-coll &&
  weights_differ g63-seq ctl-g63-loss
mem g63-tp2 2 $g63 --batch 16 --strategy ring --tp 2
mem gpt-tp2 2 $gpt --batch 16 --strategy ring --tp 2 --optimizer adam
mem gpt-dp2-tp2 4 $gpt --batch 8 --strategy ring --tp 2

# Dropout in a transformer under tp 2 (tests/data/gpt-dropout.yaml: tiny-gpt's shape with
# GPT-2's embedding and residual dropouts, replicated, and one inside the MLP pair, split): a
# mask is drawn by (step, layer, row in the global batch, element), so the replicated dropouts
# are equal on both ranks and the split one draws its columns of the one-rank run's masks;
# both reach the one-rank run (seen: 3e-8). So do two replicas, each drawing its rows' masks.
gd="--model $top_srcdir/tests/data/gpt-dropout.yaml"
exec_ok gd-seq 1 $gd --batch 16 && exec_ok gd-tp2 2 $gd --batch 16 --strategy ring --tp 2 &&
  weights_same gd-seq gd-tp2
same gd-seq gd-dp2 2 $gd --batch 8 --strategy ring
exec_ok gd-dp2-accumulate 2 $gd --batch 4 --accumulate 2 --strategy ring &&
  weights_same gd-seq gd-dp2-accumulate
# control: the masks matter (the same model with rate 0 ends elsewhere)
sed 's/rate: 0\.1/rate: 0/' "$top_srcdir/tests/data/gpt-dropout.yaml" >"$tmp/gpt-rate0.yaml"
exec_ok gd-rate0 1 --model "$tmp/gpt-rate0.yaml" --batch 16 && weights_differ gd-seq gd-rate0
exec_ok ctl-gd-coll 2 $gd --batch 16 --strategy ring --tp 2 --drop-op coll &&
  weights_differ gd-seq ctl-gd-coll

# Memory: allocated bytes per rank (record) = the plan's buffer table (--dump-plan).
mem tp2 2 $mlp --batch 16 --strategy ring --tp 2 --optimizer adam
mem dp2-tp2 4 $mlp --batch 16 --strategy ps-sharded --tp 2
mem fm-tp2 2 $fm --batch 16 --strategy ring --tp 2

# Closed form (Shoeybi et al.): the allreduces of rank 0's step, from dtsim's plan.
# colls MODEL TP TOPOLOGY: rank 0's step allreduces, one per line
colls() {
  "$dtsim" -m "$1" -s ring --tp "$2" -t "$3" -b 32 --dump-plan |
    sed -n '/^rank 0:/,/eval/p' | sed -n 's/.*COLL \(allreduce[^ ]*\) group \([0-9]*\) (\([0-9]*\) ranks) root 0 \(.*\)/\1 \3 \4/p'
}
# tp-mlp, layers: flat 0, h1 1, h1_relu 2, h2 3, h2_relu 4, h3 5, h3_relu 6, out 7: g after
# h2 (32 x 32 floats) and out (32 x 10), f of h2_relu's gradient (32 x 32); h1's input (the
# model's) needs none
want="allreduce/ring 2 act(3)[0+1024]
allreduce/ring 2 act(7)[0+320]
allreduce/ring 2 dact(4)[0+1024]"
got=$(colls "$top_srcdir/tests/data/tp-mlp.yaml" 2 "$top_srcdir/topologies/1n2p.yaml")
if [ "$got" = "$want" ]; then ok "closed form tp-mlp: 2 pairs, 2 forward + 1 backward allreduce"
else bad "closed form tp-mlp: got [$got]"; fi
# mlp-wide on 4 ranks, tp 2: one pair (dense, dense_1), 32 x 2048 forward, no f (its input is
# the model's), and the data-parallel allreduce of rank 0's 2,923,530 parameters over 2 ranks:
# 784x1024+1024 + 2048x1024+2048 + 2048x10+10
want="allreduce/ring 2 act(3)[0+65536]
allreduce/ring 2 grads[0+2923530]"
got=$(colls mlp-wide 2 "$top_srcdir/topologies/1n4p.yaml")
if [ "$got" = "$want" ]; then ok "closed form mlp-wide dp 2 x tp 2"
else bad "closed form mlp-wide dp 2 x tp 2: got [$got]"; fi

# Bad configurations: exit 2 and why.
expect_error "tp does not divide the ranks" "--tp 3 does not divide the 4 ranks" \
  "$dtsim" -m mlp-wide -s ring --tp 3 -t "$top_srcdir/topologies/1n4p.yaml"
expect_error "tp without a pair that divides" "no dense pair" \
  "$dtsim" -m resnet18-cifar10 -s ring --tp 2 -t "$top_srcdir/topologies/1n2p.yaml"
expect_error "tp with hierarchical" "--tp composes" \
  "$dtsim" -m mlp-wide -s hierarchical --tp 2 -t "$top_srcdir/topologies/2n2p.yaml"
expect_error "dtexec tp does not divide the ranks" "--tp 2 does not divide the 3 ranks" \
  timeout 60 $MPIEXEC -n 3 "$dtexec" $mlp --synthetic 64 --strategy ring --tp 2
finish
