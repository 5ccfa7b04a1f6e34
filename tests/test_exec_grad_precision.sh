#!/bin/sh
# dtexec --grad-precision fp32 under mixed precision (bf16, fp16): the parameters, outputs and
# what layers keep stay 2-byte, the gradients are float32 buffers that the backward kernels
# add into directly, and their allreduce sends 4 bytes per element (MPI_FLOAT), as PyTorch's
# autocast + GradScaler (fp32 parameters, so fp32 .grad and a DDP allreduce of fp32) and
# Megatron-LM's --accumulate-allreduce-grads-in-fp32 do. Each run tracks its fp32 twin,
# allocates its plan's buffer table (GRADS and the receive pool in f32), skips an overflowing
# step on every rank, and sends the fp32 run's gradient bytes, twice the bf16 run's.
#
# Tolerance: TOL = 0.01 against fp32, as in test_exec_precision.sh (bf16 still rounds weights
# and activations; seen below 0.004 on mlp-fmnist after 8 SGD steps at lr 0.1). Control: the
# same run with 2-byte gradients is not bit-identical to it (its gradients round to bf16).
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
common="$sgd_flags --max-iters 8"
mlp="--model mlp-fmnist --batch 32 --strategy ring"
g32="--grad-precision fp32"
TOL=0.01
exec_ok fp32 2 $mlp || exit 1
same fp32 bf16-g32 2 $mlp --precision bf16 $g32
same fp32 fp16-g32 2 $mlp --precision fp16 $g32
# the library's allreduce, ZeRO-2 (its gradient shard and staging in f32), a pipeline with
# tensor parallelism (the stages' activations stay 2-byte, the gradients f32)
same fp32 lib-g32 2 $mlp --strategy mpi-allreduce --precision bf16 $g32
exec_ok z2-fp32 2 $mlp --zero 2 && same z2-fp32 z2-g32 2 $mlp --zero 2 --precision bf16 $g32
tpm="--model $top_srcdir/tests/data/tp-mlp.yaml --batch 32"
exec_ok pp-fp32 4 $tpm --strategy 1f1b --pp 2 --tp 2 &&
  same pp-fp32 pp-g32 4 $tpm --strategy 1f1b --pp 2 --tp 2 --precision bf16 $g32
# control: 2-byte gradients give other weights (TOL 0: not bit-identical)
TOL=0
exec_ok bf16 2 $mlp --precision bf16 && weights_differ bf16-g32 bf16
# a dropped UPDATE leaves the initial weights
TOL=0.01
differs fp32 ctl-update 2 $mlp --precision bf16 $g32 --drop-op update

# an overflow at step 8 (rank 0's float32 gradient): the step is skipped on every rank
TOL=0
common="$(echo "$sgd_flags" | sed 's/--quiet//') --max-iters 8"
exec_ok seven 2 $mlp --precision bf16 $g32 --max-iters 7 &&
  exec_ok overflow 2 $mlp --precision bf16 $g32 --overflow-at 8 && weights_same seven overflow
if grep -q "loss scale 32768, 1 step skipped on overflow" "$tmp/overflow.out"; then
  ok "scale halved"
else bad "scale: $(grep 'loss scale' "$tmp/overflow.out")"; fi

# bytes the ring allreduce of the gradients sent (the ops CSV): fp32 gradients the fp32 run's,
# twice bf16's
common="$sgd_flags"
sent() {
  n=$1; shift
  exec_ok "$n" 2 $mlp --max-iters 2 --ops-csv "$tmp/$n.csv" "$@" >/dev/null &&
    awk -F, '$10 == "ring" { s += $16 } END { print s + 0 }' "$tmp/$n.csv"
}
b32=$(sent wire32) b16=$(sent wire16 --precision bf16) bg=$(sent wireg --precision bf16 $g32)
if [ -n "$b16" ] && [ "$b16" -gt 0 ] && [ "$bg" = "$b32" ] && [ $((2 * b16)) -eq "$bg" ]; then
  ok "ring allreduce bytes sent: fp32 $b32, bf16 $b16, bf16 with fp32 gradients $bg"
else bad "ring allreduce bytes sent: fp32 '$b32', bf16 '$b16', bf16 with fp32 gradients '$bg'"; fi

# refused with exit status 2, naming the flag
refused() {
  want=$1; shift
  expect_error "refused: $*" "$want" timeout 60 $MPIEXEC -n 2 "$dtexec" --model mlp-fmnist \
    --synthetic 64 "$@"
}
refused "--grad-precision: expected fp32, bf16 or fp16" --grad-precision fp8
refused "--grad-precision bf16: 16-bit gradients need mixed precision" --grad-precision bf16
refused "--grad-precision fp16 under --precision bf16" --precision bf16 --grad-precision fp16
finish
