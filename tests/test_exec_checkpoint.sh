#!/bin/sh
# dtexec --checkpoint/--resume: a run whose ranks are SIGKILLed mid-epoch (after at least one
# checkpoint) and resumed ends with bit-identical parameters (cmp of --dump-params) to an
# uninterrupted run with the same seed, for data parallelism (ring, Adam, dropout), a pipeline
# (gpipe --pp 2, SGD with momentum) and a pipeline over a model with batchnorm (1f1b: running
# statistics); a corrupted or torn rank file or manifest is found by its checksum, skipped
# with a warning naming it, and the previous checkpoint used (or an error when none is left);
# the directory keeps the newest two steps; bad flags and directories exit 2 on every rank.
. "${top_srcdir:=..}/tests/testlib.sh"
dtexec="$top_builddir/dtexec"
victims=""
# shellcheck disable=SC2154
trap 'for p in $victims; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
mlp="$top_srcdir/models/mlp-fmnist.yaml"

# A small CNN with batchnorm (running statistics: the STATE buffer) and dropout.
cat >"$tmp/bn.yaml" <<'YAML'
name: tiny-bn
source: dtexec's checkpoint test (batchnorm running statistics, dropout)
input: {shape: [1, 8, 8]}
classes: 10
layers:
  - {kind: conv2d, name: conv, filters: 4, kernel: 3, padding: same}
  - {kind: batchnorm, name: bn}
  - {kind: relu, name: act}
  - {kind: flatten, name: flat}
  - {kind: dense, name: hidden, units: 32, activation: relu}
  - {kind: dropout, name: drop, rate: 0.25}
  - {kind: dense, name: out, units: 10, activation: softmax}
YAML

# 60 steps per epoch (global batch 64 of 3840 samples); a checkpoint every 25 steps falls on
# no epoch's end below 5 epochs, so that a resume starts mid-epoch.
ITERS=60
EVERY=25

# newest DIR: the newest step with a manifest in DIR.
newest() {
  ls "$1" | sed -n 's/^step-0*\([0-9][0-9]*\)\.manifest$/\1/p' | sort -n | tail -n 1
}

# killed NAME ARGS...: a run that checkpoints into $tmp/NAME, its ranks SIGKILLed as soon as
# its first checkpoint is complete (a manifest exists). It is given 1000 epochs so that it is
# still running whatever the poll's delay; the epochs are not part of what a checkpoint holds,
# so its checkpoints are those of a shorter run. Each rank writes its pid (its shell execs
# dtexec: the same process) so that the test kills exactly its own processes.
killed() {
  name=$1; shift
  dir="$tmp/$name"
  timeout 300 $MPIEXEC -n 2 sh -c 'echo $$ >"$0.pid.$PMI_RANK"; exec "$@"' "$tmp/$name" \
    "$dtexec" --epochs 1000 --seed 5 --checkpoint "$dir" --checkpoint-every $EVERY "$@" \
    >"$tmp/$name.killout" 2>&1 &
  job=$!
  n=0
  while [ -z "$(newest "$dir" 2>/dev/null)" ]; do
    n=$((n + 1))
    if [ $n -gt 6000 ] || ! kill -0 $job 2>/dev/null; then
      bad "$name: no checkpoint appeared: $(cat "$tmp/$name.killout")"
      wait $job
      return 1
    fi
    sleep 0.01
  done
  victims=$(cat "$tmp/$name.pid.0" "$tmp/$name.pid.1")
  # shellcheck disable=SC2086
  kill -KILL $victims
  wait $job
  victims=""
}

# kill_and_resume NAME ARGS...: killed, then the uninterrupted reference and the resumed run
# (checkpointing on into the same directory) for the epochs up to the one after the killed
# run's newest checkpoint: bit-identical parameters.
kill_and_resume() {
  name=$1; shift
  killed "$name" "$@" || return
  epochs=$(($(newest "$tmp/$name") / ITERS + 2))
  [ "$name" = ring ] && ring_epochs=$epochs
  if ! timeout 300 $MPIEXEC -n 2 "$dtexec" --epochs $epochs --seed 5 \
       --dump-params "$tmp/$name.ref" "$@" >"$tmp/$name.refout" 2>&1; then
    bad "$name reference: $(cat "$tmp/$name.refout")"
    return
  fi
  if ! timeout 300 $MPIEXEC -n 2 "$dtexec" --epochs $epochs --seed 5 --resume "$tmp/$name" \
       --checkpoint "$tmp/$name" --checkpoint-every $EVERY --dump-params "$tmp/$name.bin" "$@" \
       >"$tmp/$name.out" 2>&1; then
    bad "$name resumed: $(cat "$tmp/$name.out")"
    return
  fi
  at=$(grep -o 'resumed from .*' "$tmp/$name.out")
  iter=$(echo "$at" | sed -n 's/.*iteration \([0-9]*\))$/\1/p')
  # the figures of the epochs it ran: the resumed epoch's running sums are in the checkpoint,
  # and the test loss reads batchnorm's running statistics (which never reach the parameters)
  have=$(sed -n 's/.* - loss:/loss:/p' "$tmp/$name.out")
  want=$(sed -n 's/.* - loss:/loss:/p' "$tmp/$name.refout" | tail -n "$(echo "$have" | wc -l)")
  if [ -z "$iter" ] || [ "$iter" -eq 0 ] || [ "$iter" -ge $ITERS ]; then
    bad "$name: not resumed mid-epoch: '$at'"
  elif cmp -s "$tmp/$name.ref" "$tmp/$name.bin"; then
    ok "$name: SIGKILLed, $at: bit-identical to $epochs uninterrupted epochs"
  else
    bad "$name: SIGKILLed, $at: parameters differ from the uninterrupted run"
  fi
  if [ -n "$want" ] && [ "$want" = "$have" ]; then ok "$name: the same losses and accuracies"
  else bad "$name: the epochs' figures differ: '$want' and '$have' after resuming"; fi
}

ring="--model $mlp --synthetic 3840 --batch 32 --strategy ring"
# shellcheck disable=SC2086
kill_and_resume ring $ring
# shellcheck disable=SC2086
kill_and_resume gpipe --model "$mlp" --synthetic 3840 --batch 64 --strategy gpipe --pp 2 \
  --micro-batches 2 --optimizer sgd --momentum 0.9
kill_and_resume 1f1b --model "$tmp/bn.yaml" --synthetic 3840 --batch 64 --strategy 1f1b \
  --micro-batches 4

# The ring run's directory after its resumed run: the newest two steps, nothing else.
ring_epochs=${ring_epochs:-2}
last=$((ring_epochs * ITERS / EVERY * EVERY))
prev=$((last - EVERY))
name_of() { printf 'step-%012d.%s' "$1" "$2"; }
want=""
for s in $prev $last; do
  for f in manifest rank-00000.ckpt rank-00001.ckpt; do want="$want $(name_of $s $f)"; done
done
have=$(ls "$tmp/ring" | tr '\n' ' ')
if [ "$have" = "${want# } " ]; then ok "the directory keeps the newest two steps ($prev, $last)"
else bad "the directory holds: $have (want${want})"; fi

# expect NAME WANTED-TEXT ARGS...: every rank exits 2, stderr holds the text.
expect() {
  name=$1 want=$2; shift 2
  timeout 120 $MPIEXEC -n 2 sh -c '"$0" "$@"; echo "rank-exit $?" >&2' "$dtexec" --quiet "$@" \
    >"$tmp/out" 2>"$tmp/err"
  rc=$?
  n2=$(grep -c '^rank-exit 2$' "$tmp/err")
  if [ $rc -ne 124 ] && [ "$n2" -eq 2 ] && grep -v '^rank-exit' "$tmp/err" | grep -q -- "$want"
  then ok "$name"
  else bad "$name (mpiexec $rc, $n2 of 2 ranks exited 2; stderr: $(cat "$tmp/err"))"; fi
}

# resume_from NAME DIR WANTED-WARNING: resumes the ring run from DIR (a damaged copy of its
# directory): a warning with the text, and the reference's parameters bit for bit.
resume_from() {
  name=$1 dir=$2 warning=$3
  # shellcheck disable=SC2086
  if timeout 300 $MPIEXEC -n 2 "$dtexec" $ring --epochs $ring_epochs --seed 5 --quiet --resume "$dir" \
       --dump-params "$tmp/$name.bin" >"$tmp/$name.out" 2>&1 &&
     grep -q -- "warning: --resume: skipping step $last: $warning" "$tmp/$name.out" &&
     cmp -s "$tmp/ring.ref" "$tmp/$name.bin"
  then ok "$name: skipped with a warning, resumed from step $prev, bit-identical"
  else bad "$name: $(cat "$tmp/$name.out")"; fi
}
# flip FILE OFFSET: inverts the bits of one byte.
flip() {
  b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "\\$(printf %03o $((255 - b)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
r1=$(name_of $last rank-00001.ckpt)
cp -r "$tmp/ring" "$tmp/flip" && flip "$tmp/flip/$r1" 100000
resume_from "flipped byte in a rank's buffers" "$tmp/flip" "$tmp/flip/$r1: checksum mismatch"
cp -r "$tmp/ring" "$tmp/head" && flip "$tmp/head/$r1" 20
resume_from "flipped byte in a rank's header" "$tmp/head" "$tmp/head/$r1: checksum mismatch"
cp -r "$tmp/ring" "$tmp/torn" && head -c 50000 "$tmp/ring/$r1" >"$tmp/torn/$r1"
resume_from "torn rank file" "$tmp/torn" "$tmp/torn/$r1: checksum mismatch"
cp -r "$tmp/ring" "$tmp/gone" && rm "$tmp/gone/$r1"
resume_from "missing rank file" "$tmp/gone" "$tmp/gone/$r1: cannot read"
cp -r "$tmp/ring" "$tmp/man" && flip "$tmp/man/$(name_of $last manifest)" 64
resume_from "flipped byte in a manifest" "$tmp/man" \
  "$tmp/man/$(name_of $last manifest): checksum mismatch"
# a rank file of another step put in place of this step's (valid on its own)
cp -r "$tmp/ring" "$tmp/swap" && cp "$tmp/ring/$(name_of $prev rank-00001.ckpt)" "$tmp/swap/$r1"
resume_from "another step's rank file" "$tmp/swap" "$tmp/swap/$r1: its header"

# No valid step left: an error naming the count, after a warning for each.
cp -r "$tmp/flip" "$tmp/none" && flip "$tmp/none/$(name_of $prev rank-00000.ckpt)" 3000
expect "every step corrupt" "no valid checkpoint (2 skipped)" $ring --resume "$tmp/none"
grep -q "skipping step $prev: $tmp/none/$(name_of $prev rank-00000.ckpt): checksum mismatch" \
  "$tmp/err" || bad "every step corrupt: no warning for step $prev: $(cat "$tmp/err")"

# Bad flags and directories.
expect "checkpoint-every 0" "--checkpoint-every" --checkpoint "$tmp/x" --checkpoint-every 0
expect "checkpoint-every not a number" "--checkpoint-every" --checkpoint "$tmp/x" \
  --checkpoint-every ten
expect "checkpoint without every" "go together" $ring --checkpoint "$tmp/x"
expect "every without checkpoint" "go together" $ring --checkpoint-every 5
touch "$tmp/file"
expect "unwritable directory" "--checkpoint $tmp/file/dir: cannot create" $ring \
  --checkpoint "$tmp/file/dir" --checkpoint-every 5
if [ "$(id -u)" != 0 ]; then # root writes anywhere
  mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
  expect "read-only directory" "--checkpoint $tmp/ro: cannot write" $ring \
    --checkpoint "$tmp/ro" --checkpoint-every 5
fi
expect "directory of another run" "already holds checkpoints" $ring \
  --checkpoint "$tmp/ring" --checkpoint-every 5
mkdir "$tmp/empty"
expect "resume from an empty directory" "--resume $tmp/empty: no checkpoint there" $ring \
  --resume "$tmp/empty"
expect "resume from a missing directory" "--resume $tmp/nowhere: cannot read" $ring \
  --resume "$tmp/nowhere"
expect "resume with another strategy" "written by another kind of run" \
  --model "$mlp" --synthetic 3840 --batch 32 --strategy rabenseifner --resume "$tmp/ring"
expect "resume with another optimizer" "optimizer=sgd" $ring --optimizer sgd \
  --resume "$tmp/ring"
expect "resume past --epochs" "give --epochs $ring_epochs or more" $ring \
  --epochs $((ring_epochs - 1)) --resume "$tmp/ring"

# A checkpoint that cannot be written mid-run (its directory replaced by a file after the first
# one): every rank stops with status 4, the file named.
dir="$tmp/vanish"
timeout 300 $MPIEXEC -n 2 sh -c '"$0" "$@"; echo "rank-exit $?" >&2' "$dtexec" $ring --quiet \
  --epochs 1000 --seed 5 --checkpoint "$dir" --checkpoint-every $EVERY >"$tmp/out" 2>"$tmp/err" &
job=$!
n=0
while [ -z "$(newest "$dir" 2>/dev/null)" ] && [ $n -lt 6000 ] && kill -0 $job 2>/dev/null; do
  n=$((n + 1))
  sleep 0.01
done
# a rename is atomic: `rm -rf` could race with the ranks still writing files into it
mv "$dir" "$dir.gone" && touch "$dir"
wait $job
n4=$(grep -c '^rank-exit 4$' "$tmp/err")
if [ "$n4" -eq 2 ] && grep -q "$dir/step-.*cannot write the checkpoint" "$tmp/err"
then ok "an unwritable checkpoint mid-run: status 4 on every rank"
else bad "an unwritable checkpoint mid-run: $n4 of 2 ranks exited 4: $(cat "$tmp/err")"; fi

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
