#!/bin/sh
# dtvalidate on run records of plan v2 (validate/README.md, "Records"): config.parallel read
# back with dt_parallel_set (a bad pair is exit 2 with file:line:column at the pair),
# config.bucket_bytes and config.optimizer into the plan options, measurements.alloc_bytes
# against the rebuilt plan's buffer table, pipelines beside data parallelism in the ranking.
# The plan dtvalidate rebuilds from a record must be the one dtsim builds from the same flags:
# its predicted iteration (uncalibrated) is dtsim's, to the 9 digits both print.
# Run by make check; by hand: top_builddir=_build top_srcdir=. sh tests/test_dtvalidate_records.sh
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-$top_srcdir/_build}
. "$top_srcdir/tests/testlib.sh"
dtv="$top_builddir/dtvalidate"
dtsim="$top_builddir/dtsim"
cd "$top_srcdir"


# rec MODEL STRATEGY RANKS BATCH ITER_S [CONFIG-EXTRA [MEASUREMENTS-EXTRA]]: a record as
# dtexec writes it (10 iterations per epoch; CONFIG-EXTRA and MEASUREMENTS-EXTRA start with
# ", ").
rec() {
  e=$(awk -v t="$5" 'BEGIN { print 10 * t }')
  printf '{"tool": "dtexec", "start_utc": "2026-01-01T00:00:00Z", "config": {"model": "%s", "topology": "localhost", "topology_path": "topologies/localhost.yaml", "strategy": "%s", "ranks": %s, "scaling": "weak", "batch": %s, "global_batch": 128, "optimizer": "adam", "momentum": 0, "epochs": 2, "bucket_bytes": 0, "data": "synthetic: 100 train", "train_samples": 100, "test_samples": 20, "iters_per_epoch": 10%s}, "environment": {"host": "h", "git_revision": "x"}, "measurements": {"read_s": 0.01, "epoch_s": [%s, %s], "epoch_median_s": %s, "update_per_batch_s": %s, "total_s": 1%s}}\n' \
    "$1" "$2" "$3" "$4" "${6:-}" "$e" "$e" "$e" "$5" "${7:-}"
}
# pipe STRATEGY M ITER_S...: 2-stage pipeline records of mlp-wide, -b 128, M micro-batches
pipe() {
  s=$1 m=$2; shift 2
  for t in "$@"; do rec mlp-wide "$s" 2 128 "$t" ", \"parallel\": \"pp=2 micro-batches=$m\""; done
}
# field N: the Nth comma-separated field of line 2 of a CSV file
field() { awk -F, -v n="$1" 'NR == 2 { print $n }' "$2"; }

# --- the plan rebuilt from a record is dtsim's: predicted iteration, uncalibrated ---------
# same_iter NAME RECORD DTSIM-FLAGS...: dtvalidate predict's iter_s (column 10) against
# dtsim's iter_s (column 12) for the same configuration
same_iter() {
  name=$1; r=$2; shift 2
  printf '%s\n' "$r" >"$tmp/one.jsonl"
  if ! "$dtv" predict -f csv "$tmp/one.jsonl" >"$tmp/p.csv" 2>"$tmp/p.err"; then
    bad "$name: dtvalidate predict failed: $(cat "$tmp/p.err")"; return
  fi
  if [ ! -x "$dtsim" ]; then echo "skip: $name (no dtsim)"; return; fi
  "$dtsim" -t localhost -f csv "$@" >"$tmp/s.csv" 2>"$tmp/s.err" ||
    { bad "$name: dtsim $*: $(cat "$tmp/s.err")"; return; }
  a=$(field 10 "$tmp/p.csv") b=$(field 12 "$tmp/s.csv")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok "$name ($a s)" ||
    bad "$name: dtvalidate predicts $a s, dtsim $* $b s"
}
same_iter "old record (no parallel): ring" "$(rec mlp-wide ring 2 64 0.07)" -m mlp-wide -s ring -b 64
same_iter "gpipe pp=2 micro-batches=2" \
  "$(rec mlp-wide gpipe 2 128 0.11 ', "parallel": "pp=2 micro-batches=2"')" \
  -m mlp-wide -s gpipe --pp 2 --micro-batches 2 -b 128
same_iter "1f1b pp=2 micro-batches=8" \
  "$(rec cnn690k 1f1b 2 128 0.12 ', "parallel": "pp=2 micro-batches=8"')" \
  -m cnn690k -s 1f1b --pp 2 --micro-batches 8 -b 128
same_iter "bucket_bytes read back" \
  "$(rec mlp-wide ring 2 64 0.07 | sed 's/"bucket_bytes": 0/"bucket_bytes": 1048576/')" \
  -m mlp-wide -s ring -b 64 --bucket '1 MiB'
same_iter "accumulate in parallel" \
  "$(rec mlp-wide ring 2 32 0.07 ', "parallel": "accumulate=2"')" \
  -m mlp-wide -s ring -b 32 --accumulate 2
# the two micro-batch counts are two plans: different predictions
printf '%s\n%s\n' "$(rec mlp-wide gpipe 2 128 0.11 ', "parallel": "pp=2 micro-batches=2"')" \
  "$(rec mlp-wide gpipe 2 128 0.11 ', "parallel": "pp=2 micro-batches=8"')" >"$tmp/two.jsonl"
"$dtv" predict -f csv "$tmp/two.jsonl" >"$tmp/two.csv" 2>&1 &&
  [ "$(awk -F, 'NR > 1 { print $10 }' "$tmp/two.csv" | sort -u | wc -l)" -eq 2 ] &&
  grep -q ',"pp=2 micro-batches=8",0$' "$tmp/two.csv" &&
  ok "micro-batch counts give their own plans; CSV parallel column" ||
  bad "micro-batches: $(cat "$tmp/two.csv")"

# --- ranking: data parallelism against pipelines, repeats kept apart by parallel config ---
{ rec mlp-wide sequential 1 64 0.06
  for t in 0.0700 0.0702 0.0703 0.0705 0.0706; do rec mlp-wide ring 2 64 $t; done
  pipe gpipe 2 0.1150 0.1152 0.1155 0.1157 0.1160
  pipe gpipe 4 0.1080 0.1082 0.1083 0.1085 0.1087
  pipe 1f1b 4 0.1070 0.1072 0.1074 0.1076 0.1078; } >"$tmp/rank.jsonl"
if "$dtv" compare --uncalibrated --fastest -q "$tmp/rank.jsonl" >"$tmp/rank" 2>"$tmp/rank.err"; then
  grep -q "^  mlp-wide 1n2p, 128 samples per step$" "$tmp/rank" &&
    ok "ranking groups data parallelism (-b 64) with pipelines (-b 128): 128 samples per step" ||
    bad "ranking group: $(sed -n '/^Ranking/,$p' "$tmp/rank")"
  grep -q "measured:  \[ring\] < \[1f1b(pp=2,micro-batches=4)\] < \[gpipe(pp=2,micro-batches=4)\] < \[gpipe(pp=2,micro-batches=2)\]$" "$tmp/rank" &&
    ok "repeats kept apart by parallel config; setups named" ||
    bad "ranking order: $(sed -n '/^Ranking/,$p' "$tmp/rank")"
  grep -q "data parallelism vs pipelines: the best data-parallel run (ring) measured faster than the best pipeline (1f1b(pp=2,micro-batches=4)); predicted faster: right" "$tmp/rank" &&
    grep -q "data parallelism against pipelines, in the 1 configurations measured with both: the faster kind told apart in 1 and predicted right in 1 of them; 3 of the 3 data-parallel / pipeline pairs told apart (of 3) ordered right" "$tmp/rank" &&
    ok "data parallelism against pipelines reported" ||
    bad "dp vs pipelines: $(sed -n '/^Ranking/,$p' "$tmp/rank")"
else
  bad "compare of pipeline records failed: $(cat "$tmp/rank.err")"
fi
# selection by parallel config: fit on data parallelism, predict the pipelines
"$dtv" compare --train parallel=none --fit eff_gemm -q "$tmp/rank.jsonl" >"$tmp/split" 2>&1 &&
  grep -q "split: fitted on the 6 runs with 'parallel=none', 15 runs held out" "$tmp/split" &&
  ok "--train parallel=none" || bad "--train parallel=none: $(head -5 "$tmp/split")"

# --- alloc_bytes against the plan's buffer table --------------------------------------------
if [ -x "$dtsim" ]; then
  total() { # DTSIM-FLAGS...: the largest rank's plan bytes
    "$dtsim" -t localhost -f json "$@" 2>/dev/null | sed -n 's/.*"total": \([0-9]*\)}.*/\1/p'
  }
  adam=$(total -m mlp-wide -s ring -b 64) sgd=$(total -m mlp-wide -s ring -b 64 --optimizer sgd)
  { rec mlp-wide ring 2 64 0.07 "" ", \"alloc_bytes\": [$adam, $adam], \"params_l2\": 12.5, \"params_sum\": -3.25"
    rec mlp-wide ring 2 64 0.07 "" ", \"alloc_bytes\": [$sgd, $sgd]" | sed 's/"optimizer": "adam"/"optimizer": "sgd"/'
    rec mlp-wide ring 2 64 0.07 "" ", \"alloc_bytes\": [$adam, $adam]" | sed 's/"optimizer": "adam"/"optimizer": "adam-torch"/'
    rec mlp-wide ring 2 64 0.07 "" ", \"alloc_bytes\": [$adam, $adam]" | sed 's/"optimizer": "adam"/"optimizer": "sgd"/'
  } >"$tmp/alloc.jsonl"
  "$dtv" compare --uncalibrated -q "$tmp/alloc.jsonl" >"$tmp/alloc" 2>&1 &&
    grep -q "every rank agrees in 3 of 4 runs" "$tmp/alloc" &&
    grep -q "line 4 1n2p ring(optimizer=sgd) mlp-wide: rank 0 allocated $adam bytes, the plan has $sgd" "$tmp/alloc" &&
    ok "alloc_bytes against the buffer table (optimizer read back, adam-torch is adam)" ||
    bad "alloc_bytes: $(sed -n '/^Plan buffers/,/^$/p' "$tmp/alloc")"
else
  echo "skip: alloc_bytes (no dtsim)"
fi

# --- bad records: file:line:column, exit 2 --------------------------------------------------
badpar() { # NAME WANTED PARALLEL-VALUE PAIR-TO-POINT-AT [STRATEGY]
  r=$(rec mlp-wide "${5:-gpipe}" 2 128 0.11 ", \"parallel\": \"$3\"")
  printf '%s\n%s\n' "$(rec mlp-wide ring 2 64 0.07)" "$r" >"$tmp/bad.jsonl"
  col=$(printf '%s\n' "$r" | awk -v p="$4" '{ print index($0, "\"parallel\": \"") + 13 + index(substr($0, index($0, "\"parallel\": \"") + 13), p) - 1 }')
  expect_error "$1" "bad.jsonl:2:$col: $2" "$dtv" predict "$tmp/bad.jsonl"
}
badpar "bad value in parallel" "'config.parallel': --pp: expected a whole number" \
  "micro-batches=4 pp=x" "pp=x"
badpar "unknown key in parallel" "'config.parallel': unknown key 'tq' (keys: batch" \
  "pp=2 tq=2" "tq=2"
badpar "pair without =" "'config.parallel': expected key=value pairs such as 'pp=2 micro-batches=4', found 'pp2'" \
  "pp2" "pp2"
r=$(rec mlp-wide ring 2 64 0.07 ', "parallel": "pp=2"')
printf '%s\n' "$r" >"$tmp/bad.jsonl"
expect_error "pipeline flags on ring" "apply to the pipelines" "$dtv" predict "$tmp/bad.jsonl"
grep -q "bad.jsonl:1:" "$tmp/err" && ok "... with file:line" || bad "no file:line: $(cat "$tmp/err")"
rec mlp-wide gpipe 2 128 0.11 | sed 's/^{/{"parallel": "pp=2", /' >"$tmp/bad.jsonl"
expect_error "parallel outside config" "bad.jsonl:1:14: 'parallel' belongs in 'config', found at the top level" "$dtv" predict "$tmp/bad.jsonl"
rec mlp-wide ring 2 64 0.07 "" ', "alloc_bytes": [1]' >"$tmp/bad.jsonl"
expect_error "alloc_bytes of the wrong length" "'measurements.alloc_bytes' has 1 entries for 2 ranks" "$dtv" predict "$tmp/bad.jsonl"
rec mlp-wide ring 2 64 0.07 "" ', "alloc_bytes": [1, "2"]' >"$tmp/bad.jsonl"
expect_error "alloc_bytes not a number" "entry 1 must be a whole number of bytes >= 0, found a string" "$dtv" predict "$tmp/bad.jsonl"
rec mlp-wide ring 2 64 0.07 | sed 's/"optimizer": "adam"/"optimizer": "lamb"/' >"$tmp/bad.jsonl"
expect_error "unknown optimizer" "'config.optimizer': --optimizer: expected adam, adam-torch" "$dtv" predict "$tmp/bad.jsonl"
rec mlp-wide ring 2 64 0.07 | sed 's/"bucket_bytes": 0/"bucket_bytes": 2/' >"$tmp/bad.jsonl"
expect_error "bucket below a float" "a bucket holds at least one float" "$dtv" predict "$tmp/bad.jsonl"

# --- silent accepts refused: fractions of counts, repeated keys, NaN, a directory ------------
# bad_at NAME RECORD NEEDLE MESSAGE: the record alone in a file is refused with exit 2 and
# MESSAGE at line 1, column of NEEDLE's last character (NEEDLE ends with the first character
# of the offending value or key)
bad_at() {
  printf '%s\n' "$2" >"$tmp/bad.jsonl"
  col=$(printf '%s\n' "$2" | awk -v p="$3" '{ i = index($0, p); print i ? i + length(p) - 1 : 0 }')
  expect_error "$1" "bad.jsonl:1:$col: $4" "$dtv" predict "$tmp/bad.jsonl"
}
good=$(rec mlp-wide ring 2 64 0.07)
bad_at "ranks 2.5" "$(printf '%s' "$good" | sed 's/"ranks": 2,/"ranks": 2.5,/')" '"ranks": 2' \
  "'config.ranks' = 2.5 must be a whole number of ranks"
bad_at "batch 64.5" "$(printf '%s' "$good" | sed 's/"batch": 64,/"batch": 64.5,/')" '"batch": 6' \
  "'config.batch' = 64.5 must be a whole number of samples"
bad_at "negative batch" "$(printf '%s' "$good" | sed 's/"batch": 64,/"batch": -64,/')" '"batch": -' \
  "'config.batch' = -64 is out of range"
bad_at "iters_per_epoch 10.5" "$(printf '%s' "$good" | sed 's/"iters_per_epoch": 10/"iters_per_epoch": 10.5/')" \
  '"iters_per_epoch": 1' "'config.iters_per_epoch' = 10.5 must be a whole number of iterations"
bad_at "epochs 1.5" "$(printf '%s' "$good" | sed 's/"epochs": 2,/"epochs": 1.5,/')" '"epochs": 1' \
  "'config.epochs' = 1.5 must be a whole number of epochs"
bad_at "train_samples fraction" "$(printf '%s' "$good" | sed 's/"train_samples": 100,/"train_samples": 99.5,/')" \
  '"train_samples": 9' "'config.train_samples' = 99.5 must be a whole number of samples"
bad_at "bucket_bytes fraction" "$(printf '%s' "$good" | sed 's/"bucket_bytes": 0,/"bucket_bytes": 1048576.5,/')" \
  '"bucket_bytes": 1' "'config.bucket_bytes' = 1048576.5 must be a whole number of bytes"
bad_at "alloc_bytes fraction" "$(rec mlp-wide ring 2 64 0.07 "" ', "alloc_bytes": [10, 10.5]')" \
  '"alloc_bytes": [10, 1' "'measurements.alloc_bytes' entry 1 must be a whole number of bytes >= 0, found a fraction"
bad_at "repeated key" "$(printf '%s' "$good" | sed 's/"ranks": 2,/"ranks": 2, "ranks": 1,/')" \
  '"ranks": 2, "' "not a JSON record: key 'ranks' appears twice in this object (first at column"
printf '%s\n' "$good" | sed 's/^{/{"config": {}, /' >"$tmp/bad.jsonl"
col=$(awk '{ print index($0, "\"config\": {\"model") }' "$tmp/bad.jsonl")
expect_error "repeated section" "bad.jsonl:1:$col: not a JSON record: key 'config' appears twice in this object (first at column 2)" \
  "$dtv" predict "$tmp/bad.jsonl"
bad_at "NaN" "$(printf '%s' "$good" | sed 's/"epoch_median_s": [0-9.]*/"epoch_median_s": NaN/')" \
  '"epoch_median_s": N' "not a JSON record: expected a value"
mkdir "$tmp/dir.jsonl"
expect_error "a directory as INPUT" "dir.jsonl: is a directory, not a records file" \
  "$dtv" compare "$tmp/dir.jsonl"

echo "$fails failed"
[ "$fails" -eq 0 ]
