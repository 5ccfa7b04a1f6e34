#!/bin/sh
# dtexec --device: its flag errors and --device cuda's refusals (exit 2, before any GPU is
# touched, so the same on every machine); without a GPU or the CUDA backend, --device cuda
# is refused by name; --device cpu is the default; and tests/test_exec_cuda.sh's own
# machinery, run with --device cpu in place of cuda (its comparisons then hold trivially:
# this checks the script, not a GPU), and its skip without a GPU.
. "${top_srcdir:=..}/tests/testlib.sh"
. "$top_srcdir/tests/execlib.sh"
tiny="$top_srcdir/tests/data/tiny-cnn.yaml"
run1() { timeout 60 $MPIEXEC -n 1 "$dtexec" --synthetic 64 --max-iters 1 --quiet "$@"; }

expect_error "bad --device" "--device: expected cpu or cuda, got 'gpu'" run1 --device gpu
expect_error "--device without a value" "--device: this option needs a value" run1 --device
expect_error "layer without a kernel" \
  "models/mlp-fmnist.yaml:16:5: --device cuda: layer 'dropout' (dropout) has no CUDA kernel yet" \
  run1 --device cuda --model mlp-fmnist
expect_error "token model" "layer 'transformer.wte' (embedding) has no CUDA kernel yet" \
  run1 --device cuda --model tiny-gpt
expect_error "bf16" "--device cuda: --precision bf16 has no CUDA path yet (fp32 only)" \
  run1 --device cuda --model "$tiny" --precision bf16
expect_error "recompute" "--device cuda: --recompute has no CUDA path yet" \
  run1 --device cuda --model "$tiny" --recompute full
expect_error "checkpoints" "--checkpoint: --device cuda: checkpoints are not written" \
  run1 --device cuda --model "$tiny" --checkpoint "$tmp/ck" --checkpoint-every 1
timeout 60 $MPIEXEC -n 2 "$dtexec" --synthetic 64 --max-iters 1 --quiet --device cuda \
  --model "$tiny" --strategy ring --tp 2 >"$tmp/out" 2>"$tmp/err"
st=$?
if [ $st -eq 2 ] && grep -qF -- "--device cuda: --tp (tensor parallelism) has no CUDA path yet" \
  "$tmp/err"; then ok "tp"; else bad "tp (exit $st: $(cat "$tmp/err"))"; fi

# no GPU here (or no backend): refused by name; both runs of the GPU test skip
gpus=$(run1 --device cuda --model "$tiny" 2>&1 >/dev/null)
st=$?
case $gpus in
  *"no CUDA device on this machine"*|*"built without the CUDA backend"*)
    [ $st -eq 2 ] && ok "no GPU: exit 2: $gpus" || bad "no GPU: exit $st"
    top_srcdir=$top_srcdir top_builddir=$top_builddir sh "$top_srcdir/tests/test_exec_cuda.sh" \
      >"$tmp/skip" 2>&1
    st=$?
    [ $st -eq 77 ] && ok "test_exec_cuda.sh skips: $(tail -n 1 "$tmp/skip")" ||
      bad "test_exec_cuda.sh without a GPU: exit $st: $(cat "$tmp/skip")" ;;
  *) [ $st -eq 0 ] && ok "a GPU is here: --device cuda runs" || bad "--device cuda: exit $st: $gpus" ;;
esac

# --device cpu is the default: the same weights, bit for bit
common="$sgd_flags --max-iters 4 --model $tiny"
TOL=0
exec_ok default 1 && exec_ok cpu 1 --device cpu && weights_same default cpu

# tests/test_exec_cuda.sh with --device cpu: its runs, comparisons and memory checks pass
DT_CUDA_TEST_DEVICE=cpu top_srcdir=$top_srcdir top_builddir=$top_builddir \
  sh "$top_srcdir/tests/test_exec_cuda.sh" >"$tmp/dry" 2>&1
st=$?
if [ $st -eq 0 ] && grep -q "^0 failed" "$tmp/dry"; then
  ok "test_exec_cuda.sh with --device cpu: $(grep -c '^ok:' "$tmp/dry") checks passed"
else bad "test_exec_cuda.sh with --device cpu: exit $st: $(cat "$tmp/dry")"; fi
DT_CUDA_TEST_DEVICE=tpu top_srcdir=$top_srcdir top_builddir=$top_builddir \
  sh "$top_srcdir/tests/test_exec_cuda.sh" >"$tmp/badenv" 2>&1
st=$?
[ $st -eq 99 ] && grep -q "expected cpu or cuda, got 'tpu'" "$tmp/badenv" &&
  ok "test_exec_cuda.sh refuses DT_CUDA_TEST_DEVICE=tpu" ||
  bad "DT_CUDA_TEST_DEVICE=tpu: exit $st: $(cat "$tmp/badenv")"
finish
