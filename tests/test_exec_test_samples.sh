#!/bin/sh
# dtexec --test-samples N evaluates N samples of the test set, each data-parallel replica the
# first of its part (its share of N): on 2 ranks, N = 701 is the first 351 samples of replica
# 0's half and the first 350 of replica 1's. The test loss and accuracy equal those of the same
# training (same train files, same seed) on a test set of only those 701 samples, both ways the
# ranks take the test set: sharded (each reads its half) and --read-whole (each reads all of
# it). Control: the bounded run must differ from the whole evaluation. The run record names
# both counts: read (test_samples) and evaluated (test_evaluated).
# Needs Debian's dataset-fashion-mnist (skipped without it).
. "${top_srcdir:=..}/tests/testlib.sh"
dtexec="$top_builddir/dtexec"
data=/usr/share/datasets/fashion-mnist
if [ ! -r "$data/t10k-images-idx3-ubyte.gz" ] || [ ! -r "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIP: $data is missing (apt-get install dataset-fashion-mnist)"
  exit 77
fi

be32() { # V: V as 4 bytes, big-endian
  printf "\\$(printf %03o $(($1 >> 24 & 255)))\\$(printf %03o $(($1 >> 16 & 255)))"
  printf "\\$(printf %03o $(($1 >> 8 & 255)))\\$(printf %03o $(($1 & 255)))"
}
# pixels FIRST N / labels FIRST N: test samples [FIRST, FIRST + N) of the data set, raw
pixels() {
  gzip -dc "$data/t10k-images-idx3-ubyte.gz" | tail -c +$((17 + $1 * 784)) | head -c $(($2 * 784))
}
labels() { gzip -dc "$data/t10k-labels-idx1-ubyte.gz" | tail -c +$((9 + $1)) | head -c "$2"; }
# shares DIR A B: DIR holds the data set's training files and a test set of its first A test
# samples and the first B of the second half (from sample 5,000)
shares() {
  mkdir -p "$1"
  ln -s "$data/train-images-idx3-ubyte.gz" "$data/train-labels-idx1-ubyte.gz" "$1/"
  { printf '\000\000\010\003'; be32 $(($2 + $3)); be32 28; be32 28
    pixels 0 "$2"; pixels 5000 "$3"; } >"$1/t10k-images-idx3-ubyte"
  { printf '\000\000\010\001'; be32 $(($2 + $3)); labels 0 "$2"; labels 5000 "$3"; } \
    >"$1/t10k-labels-idx1-ubyte"
}
# run NAME ARGS...: 3 steps of the MLP on 2 ranks; NAME.test holds its epoch line's losses
# and accuracies
run() {
  name=$1; shift
  if timeout 120 $MPIEXEC -n 2 "$dtexec" --model mlp-fmnist --strategy ring --max-iters 3 \
       --seed 5 "$@" >"$tmp/$name.out" 2>&1; then
    sed -n 's/^epoch 1\/1: .* - \(loss: .*\)$/\1/p' "$tmp/$name.out" >"$tmp/$name.test"
    [ -s "$tmp/$name.test" ] && return 0
  fi
  bad "$name: $(cat "$tmp/$name.out")"
  return 1
}
# same_as A B: runs A and B printed the same losses and accuracies
same_as() {
  if cmp -s "$tmp/$1.test" "$tmp/$2.test"; then ok "$1 = $2: $(cat "$tmp/$1.test")"
  else bad "$1: $(cat "$tmp/$1.test"), $2: $(cat "$tmp/$2.test")"; fi
}

shares "$tmp/shares" 351 350
for flags in "" --read-whole; do
  how=-sharded
  [ -n "$flags" ] && how=-whole
  run "all$how" $flags --data "$data" &&
    run "bounded$how" $flags --data "$data" --test-samples 701 &&
    run "copy$how" $flags --data "$tmp/shares" || continue
  same_as "bounded$how" "copy$how"
  if cmp -s "$tmp/all$how.test" "$tmp/bounded$how.test"; then
    bad "control: --test-samples 701 evaluated as the whole set did: $(cat "$tmp/all$how.test")"
  else ok "control: the whole set's evaluation differs: $(cat "$tmp/all$how.test")"; fi
done

# The run record says how many were evaluated beside how many were read.
run recorded --data "$data" --test-samples 701 --record "$tmp/rec.json" &&
  if grep -q '"test_samples": 10000' "$tmp/rec.json" && grep -q '"test_evaluated": 701' "$tmp/rec.json"
  then ok "record: 10000 test samples read, 701 evaluated"
  else bad "record: $(grep -o '"test_[a-z]*": [0-9]*' "$tmp/rec.json" | tr '\n' ' ')"; fi
finish
