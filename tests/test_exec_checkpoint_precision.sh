#!/bin/sh
# dtexec --checkpoint/--resume under mixed precision: a run that checkpoints mid-epoch and a run
# resumed from that checkpoint end with bit-identical parameters (cmp of --dump-params), the
# same loss scale and skipped-step count, as one uninterrupted run: bf16 and fp16 (ring, Adam),
# bf16 with --zero 1 and with a pipeline (gpipe --pp 2). Each run overflows at step 10 (the
# scale halves, its clean-step counter restarts) and runs past step 2010, where the scale
# doubles again only if the counter was restored. Controls: the same resume with the master
# weights or the loss scaler left out of the checkpoint would differ (seen by hand; here: a
# resume with another seed differs). A checkpoint of another precision, a truncated rank file,
# and a version-1 (float32) checkpoint of the previous format.
. "${top_srcdir:=..}/tests/testlib.sh"
dtexec="$top_builddir/dtexec"

# 1000 steps per epoch (global batch 64 of 64000 samples: 2 replicas of 32, or a pipeline of 64); a checkpoint every 1500 steps
# falls mid-epoch 2; the runs stop after 3 epochs (3000 steps).
base="--model $top_srcdir/tests/data/tiny-mlp.yaml --synthetic 64000 --batch 32 --seed 5"

# run NAME ARGS...: dtexec on 2 ranks, output in $tmp/NAME.out; its status.
run() {
  out=$1; shift
  # shellcheck disable=SC2086
  timeout 300 $MPIEXEC -n 2 "$dtexec" $base "$@" >"$tmp/$out.out" 2>&1
}
scale_line() { grep 'mixed precision .*loss scale' "$tmp/$1.out"; }

# resumed NAME ARGS...: checkpoints for 2 epochs, resumes to 3, compares with 3 epochs in one go.
resumed() {
  name=$1; shift
  set -- --overflow-at 10 "$@"
  run "$name-ck" --epochs 2 --checkpoint "$tmp/$name" --checkpoint-every 1500 "$@" &&
    run "$name-ref" --epochs 3 --dump-params "$tmp/$name-ref.bin" "$@" &&
    run "$name-res" --epochs 3 --resume "$tmp/$name" --dump-params "$tmp/$name-res.bin" "$@" ||
    { bad "$name: a run failed: $(cat "$tmp/$name"-*.out)"; return; }
  at=$(grep -o 'resumed from .*' "$tmp/$name-res.out")
  want=$(scale_line "$name-ref") have=$(scale_line "$name-res")
  case $at in *"(epoch 2, iteration 500)") ;; *) bad "$name: not resumed mid-epoch: '$at'" ;; esac
  case $want in *"loss scale 65536, 1 step skipped"*) ;; *) bad "$name: reference: '$want'" ;; esac
  if cmp -s "$tmp/$name-ref.bin" "$tmp/$name-res.bin"; then
    ok "$name: $at: bit-identical to 3 uninterrupted epochs"
  else bad "$name: $at: parameters differ from the uninterrupted run"; fi
  if [ -n "$want" ] && [ "$want" = "$have" ]; then ok "$name: $have"
  else bad "$name: the scaler differs: '$want' and '$have' after resuming"; fi
}
resumed bf16 --strategy ring --precision bf16
resumed fp16 --strategy ring --precision fp16
resumed bf16-z1 --strategy ring --zero 1 --precision bf16
resumed bf16-gpipe --strategy gpipe --pp 2 --micro-batches 2 --batch 64 --precision bf16 \
  --optimizer sgd --momentum 0.9

# Control: a resumed run of another seed ends elsewhere (the comparison can fail).
if ! run ctl --epochs 3 --resume "$tmp/bf16" --dump-params "$tmp/ctl.bin" --strategy ring \
     --precision bf16 --overflow-at 10 --seed 6; then bad "control: $(cat "$tmp/ctl.out")"
elif cmp -s "$tmp/bf16-ref.bin" "$tmp/ctl.bin"; then bad "control: another seed reached the weights"
else ok "control: a resumed run with another seed differs"; fi

# expect NAME WANTED-TEXT ARGS...: exit 2, the output holds the text.
expect() {
  name=$1 want=$2; shift 2
  run "$name" "$@"
  st=$?
  if [ $st -eq 2 ] && grep -qF -- "$want" "$tmp/$name.out"; then ok "$name"
  else bad "$name (exit $st: $(cat "$tmp/$name.out"))"; fi
}
manifest="$tmp/bf16/step-000000001500.manifest"
expect "a bf16 checkpoint resumed in fp16" \
  "$manifest was written by another kind of run (it has: precision=bf16; this run has: precision=fp16)" \
  --epochs 3 --strategy ring --precision fp16 --resume "$tmp/bf16"
expect "a bf16 checkpoint resumed in fp32" \
  "$manifest was written by another kind of run (it has: precision=bf16; this run has: -)" \
  --epochs 3 --strategy ring --resume "$tmp/bf16"

# A truncated rank file: the step is skipped with a warning naming it; none left: exit 2.
r1="$tmp/torn/step-000000001500.rank-00001.ckpt"
mkdir "$tmp/torn" && cp "$tmp/bf16"/* "$tmp/torn/" && head -c 3000 "$tmp/bf16/${r1##*/}" >"$r1"
expect "a truncated bf16 rank file" "no valid checkpoint (1 skipped)" \
  --epochs 3 --strategy ring --precision bf16 --resume "$tmp/torn"
grep -qF "skipping step 1500: $r1: checksum mismatch" "$tmp/a truncated bf16 rank file.out" ||
  bad "a truncated bf16 rank file: no warning naming it: $(cat "$tmp/a truncated bf16 rank file.out")"

# A version-1 checkpoint (float32, written by the previous format's dtexec at step 7 of a
# 10-step epoch, model tests/data/ckpt-v1.yaml) still resumes: within 1e-6 of a run without
# a stop. Not bit-identical: its first 7 steps were computed on the machine that wrote it, and
# OpenBLAS picks its kernels by CPU, so a run here rounds those steps by an ulp or so (3e-8
# seen on an AMD EPYC). Control: the same resume with another seed ends farther away than
# that. (Its files are in this machine's byte order: little-endian.)
v1="--model $top_srcdir/tests/data/ckpt-v1.yaml --synthetic 640 --batch 32 --strategy ring
    --epochs 2"
params_diff="$top_builddir/tests/params_diff"
cp -r "$top_srcdir/tests/data/ckpt-v1" "$tmp/v1" && chmod -R u+w "$tmp/v1"
# shellcheck disable=SC2086
if timeout 120 $MPIEXEC -n 2 "$dtexec" $v1 --seed 5 --dump-params "$tmp/v1-ref.bin" \
     >"$tmp/v1-ref.out" 2>&1 &&
   timeout 120 $MPIEXEC -n 2 "$dtexec" $v1 --seed 5 --resume "$tmp/v1" \
     --dump-params "$tmp/v1.bin" >"$tmp/v1.out" 2>&1 &&
   timeout 120 $MPIEXEC -n 2 "$dtexec" $v1 --seed 6 --resume "$tmp/v1" \
     --dump-params "$tmp/v1-seed6.bin" >"$tmp/v1-seed6.out" 2>&1 &&
   grep -q "resumed from $tmp/v1 at step 7 (epoch 1, iteration 7)" "$tmp/v1.out"
then
  if "$params_diff" "$tmp/v1-ref.bin" "$tmp/v1.bin" 1e-6 >"$tmp/v1.diff"; then
    ok "a version-1 checkpoint resumes: $(cat "$tmp/v1.diff")"
  else bad "a version-1 checkpoint: $(cat "$tmp/v1.diff")"; fi
  if "$params_diff" "$tmp/v1-ref.bin" "$tmp/v1-seed6.bin" 1e-6 >"$tmp/v1-seed6.diff"; then
    bad "control: a version-1 resume with another seed reached the reference"
  else ok "control: a version-1 resume with another seed differs"; fi
else bad "a version-1 checkpoint: $(cat "$tmp/v1.out" "$tmp/v1-seed6.out")"; fi

finish
