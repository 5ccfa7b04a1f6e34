#!/bin/sh
# dtexec --precision bf16 / fp16 (mixed precision on the CPU, 2 ranks): training tracks the
# fp32 run, a dropped UPDATE does not (the control), an injected overflow skips its step and
# halves the loss scale, every rank allocates its plan's buffer table, the gradient allreduce
# sends half the bytes, and what dtexec does not execute is refused.
#
# Tolerance: SGD lr 0.1 (mlp-fmnist, 8 steps) and 0.05 (cnn690k, 6 steps): the runs differ by
# bf16's rounding of weights, activations and gradients (8 significant bits: ~0.4% of each
# value). Seen: max |w_bf16 - w_fp32| 0.0035 (mlp-fmnist), 0.0009 (cnn690k), fp16 0.0021;
# TOL = 0.01. The control (bf16 without UPDATE: the initial weights) is 0.06 away on mlp-fmnist.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
common="--synthetic 512 --read-whole --optimizer sgd --lr 0.1 --no-lr-scale --seed 7
        --max-iters 8 --check-sync --strategy ring"
TOL=0.01
mlp="--model mlp-fmnist --batch 32"
exec_ok fp32 2 $mlp || exit 1
exec_ok bf16 2 $mlp --precision bf16 && weights_same fp32 bf16
exec_ok fp16 2 $mlp --precision fp16 && weights_same fp32 fp16
exec_ok no-update 2 $mlp --precision bf16 --drop-op update && weights_differ fp32 no-update
alloc_is_plan bf16 2 $mlp --precision bf16
alloc_is_plan fp16 2 $mlp --precision fp16

cnn="--model cnn690k --batch 16 --max-iters 6 --lr 0.05 --strategy mpi-allreduce"
exec_ok cnn-fp32 2 $cnn && exec_ok cnn-bf16 2 $cnn --precision bf16 &&
  weights_same cnn-fp32 cnn-bf16
exec_ok cnn-no-update 2 $cnn --precision bf16 --drop-op update &&
  weights_differ cnn-fp32 cnn-no-update
alloc_is_plan cnn-bf16 2 $cnn --precision bf16

# an overflow at step 8 (rank 0's gradient; the flag's MAX reaches rank 1): the step is skipped,
# so the weights are exactly those of 7 steps, and the scale halves once
TOL=0
exec_ok seven 2 $mlp --precision bf16 --max-iters 7
exec_ok overflow 2 $mlp --precision bf16 --overflow-at 8 && weights_same seven overflow
if grep -q "loss scale 32768, 1 step skipped on overflow" "$tmp/overflow.out" &&
   grep -q "loss scale 65536, 0 steps skipped" "$tmp/bf16.out"; then ok "scale halved"
else bad "scale: $(grep 'loss scale' "$tmp/overflow.out" "$tmp/bf16.out")"; fi

# --recompute in bf16: the recomputed forward reads the same 2-byte inputs and rounds the same
# float32 results, so the weights equal --recompute none's in bf16 exactly (tiny-gpt: attention
# scores in the workspace; cnn21k: dropout replaying its masks); allocations = plan; control
# without the recompute ops
gpt="--model tiny-gpt --batch 8 --max-iters 4 --precision bf16"
drop="--model cnn21k --batch 16 --max-iters 4 --precision bf16"
exec_ok gpt-none 2 $gpt
for rc in full selective; do
  exec_ok "gpt-$rc" 2 $gpt --recompute $rc && weights_same gpt-none "gpt-$rc"
done
alloc_is_plan gpt-full 2 $gpt --recompute full
exec_ok gpt-ctl 2 $gpt --recompute full --drop-op recompute && weights_differ gpt-none gpt-ctl
exec_ok drop-none 2 $drop && exec_ok drop-full 2 $drop --recompute full &&
  weights_same drop-none drop-full
alloc_is_plan drop-full 2 $drop --recompute full

# bytes the ring allreduce of the gradients sent (the ops CSV): bf16 half of fp32's
sent() {
  n=$1; shift
  exec_ok "$n" 2 $mlp --max-iters 2 --ops-csv "$tmp/$n.csv" "$@" >/dev/null &&
    awk -F, '$10 == "ring" { s += $16 } END { print s + 0 }' "$tmp/$n.csv"
}
b32=$(sent wire32) b16=$(sent wire16 --precision bf16)
if [ -n "$b16" ] && [ "$b16" -gt 0 ] && [ $((2 * b16)) -eq "$b32" ]; then
  ok "ring allreduce bytes sent: fp32 $b32, bf16 $b16"
else bad "ring allreduce bytes sent: fp32 '$b32', bf16 '$b16'"; fi

# refused: fp8 and tf32 (dtsim only), --overflow-at in fp32
# (bf16 with --zero, --tp and pipelines: tests/test_exec_precision_parallel.sh; checkpoints:
# tests/test_exec_checkpoint_precision.sh)
refused() {
  want=$1; shift
  timeout 60 $MPIEXEC -n 2 "$dtexec" --model mlp-fmnist --synthetic 64 "$@" >"$tmp/r.out" 2>&1
  st=$?
  if [ $st -eq 2 ] && grep -q -- "$want" "$tmp/r.out"; then ok "refused: $*"
  else bad "$* exit $st: $(cat "$tmp/r.out")"; fi
}
refused "fp8 is simulated only" --precision fp8
refused "tf32 is simulated only" --precision tf32
refused "--overflow-at: needs --precision" --overflow-at 3
refused "--overflow-at" --precision bf16 --overflow-at 0
finish
