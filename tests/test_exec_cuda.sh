#!/bin/sh
# dtexec --device cuda against --device cpu: the same plans walked with the CUDA net reach the
# CPU run's weights after 8 steps (tiny-cnn: conv2d, maxpool, flatten view, dense, fused
# softmax; tp-mlp: a flatten of the input, three dense + relu), at 1 rank, 2 ranks ring and
# 2-stage gpipe, with SGD and with Adam; every rank's GPU holds its plan's buffer table (plus
# the host's receive buffers); a run without its UPDATE ops does not reach the weights.
#
# Needs a GPU: without one (or in a build without the CUDA backend) dtexec refuses --device
# cuda with exit 2, and this test is skipped (77). DT_CUDA_TEST_DEVICE=cpu runs every step
# with --device cpu instead, which checks this script itself on any machine
# (tests/test_dtexec_device.sh does so); then the comparisons hold trivially.
#
# Tolerance 1e-4 (largest |w_gpu - w_cpu|): cuBLAS and OpenBLAS sum the fp32 products in
# different orders, and nvcc contracts into FMAs; not measured yet (no GPU was available
# when this was written). The control (no UPDATE: the initial weights) is ~1e-2 away.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
dev=${DT_CUDA_TEST_DEVICE:-cuda}
case $dev in
  cpu|cuda) ;;
  *) echo "DT_CUDA_TEST_DEVICE: expected cpu or cuda, got '$dev'"; exit 99 ;;
esac
tiny="--model $top_srcdir/tests/data/tiny-cnn.yaml"
mlp="--model $top_srcdir/tests/data/tp-mlp.yaml"
common="$sgd_flags --max-iters 8"
TOL=1e-4

if [ "$dev" = cuda ]; then
  timeout 60 $MPIEXEC -n 1 "$dtexec" $tiny --synthetic 64 --max-iters 1 --quiet \
    --device cuda >"$tmp/probe" 2>&1
  st=$?
  if [ $st -eq 2 ] && grep -qE "no CUDA device|without the CUDA backend" "$tmp/probe"; then
    echo "SKIP: $(cat "$tmp/probe")"
    exit 77
  fi
  [ $st -eq 0 ] || { echo "FAIL: the probe run: exit $st: $(cat "$tmp/probe")"; exit 1; }
fi

# pair NAME NPROCS ARGS...: the CPU run NAME-cpu, then NAME on $dev, which must reach its
# weights with every rank holding its plan's buffers.
pair() {
  pn=$1 pnp=$2; shift 2 # (exec_ok sets name and np)
  exec_ok "$pn-cpu" "$pnp" "$@" --device cpu && same "$pn-cpu" "$pn" "$pnp" "$@" --device "$dev"
}

pair cnn-1 1 $tiny
pair cnn-ring 2 $tiny --strategy ring
pair cnn-gpipe 2 $tiny --strategy gpipe
pair cnn-adam 2 $tiny --strategy ring --optimizer adam --lr 0.01
pair mlp-1 1 $mlp
pair mlp-ring 2 $mlp --strategy ring
exec_ok cnn-no-update 1 $tiny --device "$dev" --drop-op update &&
  weights_differ cnn-1-cpu cnn-no-update
finish
