#!/bin/sh
# dtexec is repeatable with threads: the same seed and flags give bit-identical weights run
# after run (tolerance 0). cnn690k at batch 64 on 2 threads splits each convolution's backward
# into blocks on the kernel pool; the blocks' weight gradients used to be summed per thread,
# and which thread took which block varied, so runs differed by about 1.5e-8 (seen before the
# fix: 3 runs, 3 different results). One rank: the pool, not MPI, is what is tested.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
common="--synthetic 256 --optimizer sgd --lr 0.1 --seed 7 --quiet --max-iters 4"
TOL=0
run="--model cnn690k --batch 64 --threads 2"
exec_ok first 1 $run || exit 1
exec_ok second 1 $run && weights_same first second
exec_ok third 1 $run && weights_same first third
# the control: another seed must not give the same weights
exec_ok other-seed 1 $run --seed 8 && weights_differ first other-seed
finish
