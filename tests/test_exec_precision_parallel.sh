#!/bin/sh
# dtexec mixed precision (bf16, fp16) with the sharded and split plans: ZeRO stages 1-3,
# tensor parallelism (--tp), pipelines (gpipe, 1f1b, interleaved) and 3D.
# Each run must track its fp32 twin (same plan, same seed) within the bf16 tolerance, equal
# the mixed-precision run of whole replicas exactly where the sums are the same, keep its
# replicas' 2-byte parameters identical (--check-sync), allocate its plan's buffer table, and
# skip an overflowing step on every rank.
#
# Tolerances: TOL = 0.01 against fp32, as in test_exec_precision.sh (bf16 rounds weights,
# activations and gradients to 8 significant bits; seen 0.0035 on mlp-fmnist after 8 SGD
# steps at lr 0.1). Against bf16 whole replicas: 0 on 2 ranks (a reduce-scatter of two
# members adds the same two values as the allreduce); on 4 ranks stage 3 reduces each
# layer's unit on its own, so a value's four terms are added in another order and may round
# to the neighbouring bf16 value: seen 0.000977 (one bf16 step at 0.17); TOL = 0.002.
# Tensor parallelism and pipelines on tests/data/tp-mlp.yaml and tiny-gpt (no dropout, so
# every plan has the one-rank run's arithmetic in fp32, within 1.2e-7): against fp32 TOL =
# 0.01 (seen: tp-mlp <= 0.0046, one rank 0.0022; tiny-gpt 0.0033, one rank 0.0033); not
# exact against one rank in bf16, as the plans round where one rank does not: a row-parallel
# layer's partial outputs are rounded to bf16 before their sum (Megatron-LM's bf16 allreduce
# does the same), micro-batches add their gradients into 2-byte buffers (seen <= 0.0049).
# gpipe and 1f1b run the same micro-batches in another order: equal exactly.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
common="$sgd_flags --max-iters 8"
mlp="--model mlp-fmnist --batch 32 --strategy ring"
tiny="--model $top_srcdir/tests/data/tiny-cnn.yaml --strategy mpi-allreduce"

exec_ok ring-bf16 2 $mlp --precision bf16 || exit 1
exec_ok n4-bf16 4 $mlp --precision bf16 || exit 1
for z in 1 2 3; do
  TOL=0.01
  exec_ok "z$z-fp32" 2 $mlp --zero $z &&
    same "z$z-fp32" "z$z-bf16" 2 $mlp --zero $z --precision bf16
  TOL=0
  weights_same ring-bf16 "z$z-bf16"
done
TOL=0.002
exec_ok n4-z3-bf16 4 $mlp --zero 3 --precision bf16 && weights_same n4-bf16 n4-z3-bf16
alloc_is_plan n4-z3-bf16 4 $mlp --zero 3 --precision bf16
TOL=0.01
# fp16; Adam (two moments beside the master shard: equal to whole replicas' Adam exactly, as
# Adam's step after 8 steps is too close to its lr x steps bound for a test against fp32);
# 4 ranks with 256 B units and accumulation
exec_ok z3-fp32 2 $mlp --zero 3 &&
  same z3-fp32 z3-fp16 2 $mlp --zero 3 --precision fp16
TOL=0
adam="--optimizer adam --lr 0.001 --precision bf16"
exec_ok ring-adam 2 $mlp $adam && same ring-adam z3-adam 2 $mlp --zero 3 $adam
TOL=0.01
acc="--batch 4 --accumulate 2 --bucket 256B"
exec_ok tiny-z2-fp32 4 $tiny --zero 2 $acc &&
  same tiny-z2-fp32 tiny-z2-bf16 4 $tiny --zero 2 $acc --precision bf16

# control: without UPDATE the weights stay the initial ones
differs z2-fp32 ctl-update 2 $mlp --zero 2 --precision bf16 --drop-op update

# tensor parallelism, pipelines and 3D against their fp32 twins
TOL=0.01
tpm="--model $top_srcdir/tests/data/tp-mlp.yaml --batch 32"
gpt="--model tiny-gpt --batch 8 --max-iters 4"
split() { # (exec_run sets $name and $np: names of their own here)
  sn=$1 snp=$2; shift 2
  exec_ok "$sn-fp32" "$snp" "$@" && same "$sn-fp32" "$sn-bf16" "$snp" "$@" --precision bf16
}
split ps-central 2 $tpm --strategy ps-central  # one rank updates: the others hold no master
split tp2 2 $tpm --strategy ring --tp 2
split gpipe 2 $tpm --strategy gpipe
split pp2-tp2 4 $tpm --strategy 1f1b --pp 2 --tp 2
split pp2-dp2-z1 4 $tpm --batch 16 --strategy gpipe --pp 2 --zero 1
split gpt-pp2 2 $gpt --strategy 1f1b --pp 2
# the vocabulary-parallel loss (tiny-gpt's tied head under --tp): 2-byte logits shard, float32
# statistics and their allreduces, 8 steps (seen: bf16 0.0039, fp16 0.00049 from fp32; the
# control without the statistics' allreduces 0.053 away)
gpt8="--model tiny-gpt --batch 8 --strategy ring --tp 2"
split gpt-tp2 2 $gpt8
same gpt-tp2-fp32 gpt-tp2-fp16 2 $gpt8 --precision fp16
differs gpt-tp2-fp32 ctl-gpt-tp2-loss 2 $gpt8 --precision bf16 --drop-op loss-coll
TOL=0 # recomputing converts the same 2-byte inputs: the same bf16 weights
exec_ok gpt-tp2-rcmp 2 $gpt8 --precision bf16 --recompute full && weights_same gpt-tp2-bf16 gpt-tp2-rcmp
# (gpipe and 1f1b: the same micro-batches in another order)
exec_ok 1f1b-bf16 2 $tpm --strategy 1f1b --precision bf16 && weights_same gpipe-bf16 1f1b-bf16
TOL=0.01
differs tp2-fp32 ctl-tp2-coll 2 $tpm --strategy ring --tp 2 --precision bf16 --drop-op coll
differs gpipe-fp32 ctl-gpipe-update 2 $tpm --strategy gpipe --precision bf16 --drop-op update

# an overflow at step 8 on rank 0 (its shard's gradients): the MAX over all ranks makes every
# rank skip it, so the weights are exactly those of 7 steps, and the scale halves once (the
# summary line that says so is not printed under --quiet)
TOL=0
common="$(echo "$sgd_flags" | sed 's/--quiet//') --max-iters 8"
# (a pipeline's last stage, which rank 0 is not, skips it too)
overflow() {
  on=$1; shift
  exec_ok "seven-$on" "$@" --precision bf16 --max-iters 7 &&
    exec_ok "overflow-$on" "$@" --precision bf16 --overflow-at 8 &&
    weights_same "seven-$on" "overflow-$on"
  if grep -q "loss scale 32768, 1 step skipped on overflow" "$tmp/overflow-$on.out"; then
    ok "$on: scale halved"
  else bad "$on scale: $(grep 'loss scale' "$tmp/overflow-$on.out")"; fi
}
overflow z1 2 $mlp --zero 1
overflow z3 2 $mlp --zero 3
overflow pp2-tp2 4 $tpm --strategy 1f1b --pp 2 --tp 2
finish
