#!/bin/sh
# dtexec trains GPT models (loss: language_model): tiny-gpt on synthetic tokens (a random
# Markov chain) at 1 and 2 ranks with its loss falling; 2 ring ranks with batch B reach the
# weights of 1 rank with batch 2B (the tied LM head's gradient reduced with the token table's,
# with and without buckets), with a control that must differ; tiny-gpt-bytes on the shipped
# text file read as bytes at 1 and 2 ranks; bad text files exit 2 with file:line:column.
# DT_LONG_TESTS=1 also trains gpt2-124m on synthetic tokens at 1 and 2 ranks (minutes).
. "${top_srcdir:=..}/tests/testlib.sh"
TOL=1e-5  # as tests/test_exec_equivalence.sh: float32 summation order over 8 SGD steps
. "$top_srcdir/tests/execlib.sh"
text="$top_srcdir/tests/data/tiny-text.txt"

# losses FILE: the first and the last epoch's training loss, "first last"
losses() {
  sed -n 's/^epoch .* - loss: \([0-9.]*\) .*/\1/p' "$1" | sed -n '1p;$p' | tr '\n' ' '
}

# falls NAME FILE: the last epoch's loss is below the first's by at least 10%
falls() {
  set -- "$1" "$2" $(losses "$2")
  if [ $# -eq 4 ] && awk -v a="$3" -v b="$4" 'BEGIN { exit !(b < 0.9 * a) }'; then
    ok "$1: loss $3 -> $4"
  else
    bad "$1: loss did not fall by 10%: $(cat "$2")"
  fi
}

# train NAME NPROCS ARGS...: dtexec under mpiexec, output in $tmp/NAME.out
train() {
  name=$1 np=$2; shift 2
  timeout "${limit:-120}" $MPIEXEC -n "$np" "$dtexec" "$@" >"$tmp/$name.out" 2>&1 ||
    bad "$name: exit $? $(cat "$tmp/$name.out")"
}

# ---- learning ----
train tiny1 1 -m "$top_srcdir/models/tiny-gpt.yaml" --synthetic 512 -b 16 -e 3 --seed 3
falls "tiny-gpt, 1 rank, synthetic" "$tmp/tiny1.out"
train tiny2 2 -m "$top_srcdir/models/tiny-gpt.yaml" --synthetic 512 -b 8 -e 3 --seed 3 -s ring
falls "tiny-gpt, 2 ranks (ring), synthetic" "$tmp/tiny2.out"
train bytes1 1 -m "$top_srcdir/models/tiny-gpt-bytes.yaml" --data "$text" -b 8 -e 4
falls "tiny-gpt-bytes, 1 rank, tests/data/tiny-text.txt" "$tmp/bytes1.out"
train bytes2 2 -m "$top_srcdir/models/tiny-gpt-bytes.yaml" --data "$text" -b 4 -e 4 -s ring
falls "tiny-gpt-bytes, 2 ranks (ring), tests/data/tiny-text.txt" "$tmp/bytes2.out"

# ---- 2 ranks reach the 1-rank weights ----
common="-m $top_srcdir/models/tiny-gpt.yaml --synthetic 256 --read-whole --optimizer sgd
        --lr 0.1 --no-lr-scale --seed 7 --max-iters 8 --quiet --check-sync"
if exec_ok seq 1 --batch 16; then
  exec_ok ring 2 --batch 8 --strategy ring && weights_same seq ring
  exec_ok bucket 2 --batch 8 --strategy ring --bucket 16KiB && weights_same seq bucket
  # control: another seed gives other weights of the same size, and the comparison says so
  exec_run control 1 --batch 16 --seed 8
  "$diff" "$tmp/seq.bin" "$tmp/control.bin" "$TOL" >"$tmp/control.diff"
  if [ $? -eq 1 ] && grep -q "^28032 floats" "$tmp/control.diff"
  then ok "control: a different run fails the comparison ($(cat "$tmp/control.diff"))"
  else bad "control run did not differ from the reference: $(cat "$tmp/control.diff")"; fi
fi

# ---- bad text ----
tiny="-m $top_srcdir/models/tiny-gpt.yaml"
bytes="-m $top_srcdir/models/tiny-gpt-bytes.yaml"
cat >"$tmp/small-vocab.yaml" <<'YAML'
name: small-vocab
source: test (a 7-bit vocabulary)
input: {tokens: 4, vocab: 128}
classes: 128
loss: language_model
layers:
  - {kind: embedding, name: wte, dim: 8}
  - {kind: dense, name: head, tied: wte}
YAML
printf 'short\n' >"$tmp/short.txt"
printf 'abc\ndef\n\001ok\n' >"$tmp/vocab.txt"
mkdir "$tmp/dir"
# shellcheck disable=SC2086
{
  expect_error "a byte outside the vocab" "$tmp/vocab.txt:1:1: byte 0x61 (offset 0) is not a token of the model's vocab 64" "$dtexec" $tiny --data "$tmp/vocab.txt"
  head -c 4000 /dev/zero | tr '\0' 'a' >"$tmp/upper.txt"; printf '\n\n  \377' >>"$tmp/upper.txt"
  expect_error "the line and column of a bad byte" "$tmp/upper.txt:3:3: byte 0xff (offset 4004)" "$dtexec" -m "$tmp/small-vocab.yaml" --data "$tmp/upper.txt"
  expect_error "a file too short" "$tmp/short.txt: 6 bytes hold no training sequence of 65 tokens" "$dtexec" $bytes --data "$tmp/short.txt"
  expect_error "a directory" "$tmp/dir: not a regular file" "$dtexec" $bytes --data "$tmp/dir"
  expect_error "a missing file" "$tmp/none.txt: No such file or directory" "$dtexec" $bytes --data "$tmp/none.txt"
  expect_error "no --data" "model 'tiny-gpt' is a language model: give a text file (--data FILE" "$dtexec" $tiny
}

# ---- gpt2-124m (opt-in: minutes of CPU) ----
if [ "${DT_LONG_TESTS:-0}" = 1 ]; then
  limit=3600
  train gpt2-1 1 -m "$top_srcdir/models/gpt2-124m.yaml" --synthetic 2 -b 1 -e 3
  falls "gpt2-124m, 1 rank, synthetic" "$tmp/gpt2-1.out"
  train gpt2-2 2 -m "$top_srcdir/models/gpt2-124m.yaml" --synthetic 4 -b 1 -e 3 -s ring
  falls "gpt2-124m, 2 ranks (ring), synthetic" "$tmp/gpt2-2.out"
else
  echo "skip: gpt2-124m training (set DT_LONG_TESTS=1; minutes of CPU)"
fi
finish
