#!/bin/sh
# dtsim as a user runs it: the default job, determinism, formats, sweeps, traces, bad input.
. "${top_srcdir:=..}/tests/testlib.sh"
dtsim="$top_builddir/dtsim"
cd "$top_srcdir"

# dtsim_fails NAME PATTERN ARGS...: dtsim exits 2 and its stderr matches the (grep) pattern
dtsim_fails() {
  name=$1 want=$2; shift 2
  "$dtsim" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/err"; then ok "$name"
  else bad "$name (exit $rc, stderr: $(cat "$tmp/err"))"; fi
}

# The default job: every strategy that fits 2n4p, ranked: the 11 data-parallel ones and the
# 4 pipelines (2 stages x 4 replicas).
if "$dtsim" --topology topologies/2n4p.yaml >"$tmp/default" 2>&1; then
  n=$(grep -cE '^[0-9]+ +[a-z0-9-]+ +8 ' "$tmp/default")
  [ "$n" -eq 15 ] && ok "default run ranks 15 strategies" || bad "default run: $n rows"
else
  bad "default run failed: $(cat "$tmp/default")"
fi

# A 3D pipeline's per-stage compute is per rank of the stage (its replicas x its tensor
# group), so the stages' mean is the table's mean compute per rank (it was summed over the
# tensor group: 2x here).
"$dtsim" -t 1n4p -m tiny-gpt -s 1f1b --pp 2 --tp 2 --micro-batches 4 >"$tmp/3d" 2>&1
awk '$1 == "1" && $2 == "1f1b" { c = $6 }
     $1 == "1f1b" && /stages x/ { split($0, p, ": "); n = split(p[2], st, " [|] ");
       for (i = 1; i <= n; i++) { split(st[i], f, " "); s += f[2] } m = s / n }
     END { exit !(c > 0 && m / c > 0.99 && m / c < 1.01) }' "$tmp/3d" &&
  ok "3D per-stage compute is per rank" || bad "3D per-stage compute: $(grep -E '^1 |stages x' "$tmp/3d")"

# Same inputs, byte-identical output.
"$dtsim" -t 2n4p -f csv >"$tmp/a.csv" && "$dtsim" -t 2n4p -f csv >"$tmp/b.csv" &&
  cmp -s "$tmp/a.csv" "$tmp/b.csv" && ok "deterministic" || bad "two runs differ"

# Seed 002's grid in one command: 3 x 4 shapes, one row per configuration.
"$dtsim" -t 1n1p --strategy reduce-bcast --sweep nodes=1,2,4 ppn=1,2,4,8 -f csv >"$tmp/grid.csv"
rows=$(($(wc -l <"$tmp/grid.csv") - 1))
[ "$rows" -eq 11 ] && ok "sweep rows" || bad "sweep gave $rows rows, want 11 (1x1 has no reduce-bcast)"

# JSON and the Chrome trace parse (when python3 is there to check them).
"$dtsim" -t 2n2p -f json -o "$tmp/r.json" --trace "$tmp/t.json" || bad "json/trace run"
if command -v python3 >/dev/null; then
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['results'])>0" "$tmp/r.json" &&
    ok "json parses" || bad "json does not parse"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert any(e.get('ph')=='X' for e in d['traceEvents'])" "$tmp/t.json" &&
    ok "trace parses" || bad "trace does not parse"
fi

# The model summary.
"$dtsim" --model models/cnn690k.yaml --summary | grep -q "690,590\|690590" &&
  ok "summary" || bad "summary lacks the parameter count"

# Bad flags: the flag's name and exit 2.
dtsim_fails "batch zero" "--batch" -t 2n4p --batch 0
dtsim_fails "batch text" "--batch" -t 2n4p --batch many
dtsim_fails "bad format" "--format" -t 2n4p --format xml
# With no -s, a config no strategy takes says why each was passed over (it said "see the
# messages above" with no message above it).
dtsim_fails "no strategy fits: why, pipelines" \
  "skipped on 2n4p: gpipe, naive-mp, 1f1b, interleaved: 3 stages x 2 replicas" -t 2n4p --pp 3
grep -q "skipped on 2n4p: .*ring.*: --pp, .*not to these" "$tmp/err" &&
  ok "no strategy fits: why, data-parallel" || bad "no strategy fits: $(cat "$tmp/err")"
dtsim_fails "bad strategy" "--strategy" -t 2n4p --strategy nope
dtsim_fails "bad scaling" "--scaling" -t 2n4p --scaling medium
dtsim_fails "bad bucket" "--bucket" -t 2n4p --bucket 25
dtsim_fails "bad sweep" "--sweep" -t 2n4p --sweep cores=1,2
dtsim_fails "unknown option" "unknown option" -t 2n4p --frobnicate
dtsim_fails "missing value" "needs a value" -t 2n4p --batch
dtsim_fails "no topology" "--topology" 
dtsim_fails "stray operand" "unexpected argument" -t 2n4p extra
dtsim_fails "strong batch below ranks" "smaller than" -t 2n4p --scaling strong --batch 4
dtsim_fails "buckets on reduce-bcast" "buckets" -t 2n4p --strategy reduce-bcast --bucket "1 MiB"
# The engine's test knob (dtsim(1), ENVIRONMENT): a value neither on nor off is refused by
# name, not taken as on.
DTSIM_LONE_PATH=of dtsim_fails "bad DTSIM_LONE_PATH" "DTSIM_LONE_PATH: 'of'" -t 2n4p -s ring

# The parallel config's flags: the flag's name and exit 2, for a bad value and for a value
# the chosen strategy cannot use.
dtsim_fails "pp zero" "--pp" -t 1n2p -s gpipe --pp 0
dtsim_fails "pp text" "--pp" -t 1n2p -s gpipe --pp x
dtsim_fails "dp zero" "--dp" -t 1n2p -s gpipe --dp 0
dtsim_fails "micro-batches negative" "--micro-batches" -t 1n2p -s gpipe --micro-batches -1
dtsim_fails "chunks zero" "--chunks" -t 1n2p -s interleaved --chunks 0
dtsim_fails "stages gap" "--stages" -t 1n2p -s gpipe --stages 0-3,5-7
dtsim_fails "stages overlap" "--stages" -t 1n2p -s gpipe --stages 0-3,3-7
dtsim_fails "stages text" "--stages" -t 1n2p -s gpipe --stages a
dtsim_fails "stages past the model" "--stages" -t 1n2p -m mlp-fmnist -s gpipe --stages 0-1,2-9
dtsim_fails "grad-alg unknown" "--grad-alg" -t 1n2p -s gpipe --grad-alg bogus
dtsim_fails "optimizer unknown" "--optimizer" -t 1n2p --optimizer bogus
dtsim_fails "accumulate zero" "--accumulate" -t 1n2p --accumulate 0
dtsim_fails "pp on ring" "--pp" -t 1n2p -s ring --pp 2
dtsim_fails "accumulate on gpipe" "--accumulate" -t 1n2p -s gpipe --accumulate 2

# A pipeline run: both schedules ranked, and their own section.
if "$dtsim" -t 1n2p -m mlp-wide -s gpipe,1f1b --micro-batches 4 >"$tmp/pipe" 2>&1; then
  grep -q "^Pipelines" "$tmp/pipe" && grep -qE '^gpipe +2 stages x +4 micro-batches' "$tmp/pipe" &&
    grep -qE '^1f1b +2 stages x +4 micro-batches' "$tmp/pipe" &&
    ok "pipeline run" || bad "pipeline run lacks its Pipelines section: $(cat "$tmp/pipe")"
else
  bad "pipeline run failed: $(cat "$tmp/pipe")"
fi

# The plan listing of a pipeline: activations sent and received, gradients zeroed at the
# start, the loss on the last stage, the update at the end.
if "$dtsim" --dump-plan -s 1f1b -t 1n2p -m mlp-fmnist >"$tmp/plan" 2>&1; then
  missing=""
  for op in SEND RECV ZERO LOSS UPDATE WAIT COMPUTE LOAD; do
    grep -qE "^ +[0-9]+ $op " "$tmp/plan" || missing="$missing $op"
  done
  [ -z "$missing" ] && ok "dump-plan ops" || bad "dump-plan lacks$missing"
else
  bad "dump-plan failed: $(cat "$tmp/plan")"
fi

# Bad files: file:line:column and exit 2.
printf 'name: x\nsource: y\nnodes: [\n' >"$tmp/broken.yaml"
dtsim_fails "broken topology" "broken.yaml:[0-9]*:[0-9]*:" -t "$tmp/broken.yaml"
dtsim_fails "missing topology file" "nothere.yaml" -t "$tmp/nothere.yaml"
printf 'name: m\nsource: s\ninput: {shape: [1, 3, 3]}\nclasses: 2\nlayers:\n  - {kind: conv2d, filters: 2, kernel: 5}\n' >"$tmp/m.yaml"
dtsim_fails "kernel larger than input" "m.yaml:6:" -t 2n4p -m "$tmp/m.yaml"

# No silent accepts (issue 15): sweeps, conflicting flags, -o everywhere, write errors.
dtsim_fails "sweep empty item" "an empty item" -t 1n1p --sweep "nodes=1,,2"
dtsim_fails "sweep trailing comma" "an empty item" -t 1n1p --sweep "ppn=1,2,"
dtsim_fails "sweep repeated key" "repeats a key" -t 1n1p --sweep "nodes=1 nodes=2"
dtsim_fails "sweep given twice" "given twice" -t 1n1p --sweep nodes=1 --sweep ppn=2
dtsim_fails "detect with a topology" "--detect" --detect -t 2n4p
dtsim_fails "dump-plan as json" "--dump-plan" -t 2n4p --dump-plan -f json
dtsim_fails "summary as csv" "--summary" -m cnn690k --summary -f csv
if "$dtsim" -m cnn690k --summary -o "$tmp/sum.txt" >"$tmp/sum.out" 2>&1 &&
   [ ! -s "$tmp/sum.out" ] && grep -q "Total params: 690,590" "$tmp/sum.txt"
then ok "--summary -o FILE writes FILE"
else bad "--summary -o: stdout '$(cat "$tmp/sum.out")', file '$(cat "$tmp/sum.txt" 2>&1)'"; fi
if "$dtsim" -t 1n2p -s ring --dump-plan -o "$tmp/plan.txt" >"$tmp/plan.out" 2>&1 &&
   [ ! -s "$tmp/plan.out" ] && grep -q "^rank 1:" "$tmp/plan.txt"
then ok "--dump-plan -o FILE writes FILE"
else bad "--dump-plan -o: stdout '$(cat "$tmp/plan.out")'"; fi
if [ -w /dev/full ]; then
  "$dtsim" -t 2n4p --trace /dev/full >/dev/null 2>"$tmp/full.err"; rc=$?
  if [ $rc -eq 1 ] && grep -q "cannot write" "$tmp/full.err"; then ok "trace write error: exit 1"
  else bad "trace to /dev/full: exit $rc, $(cat "$tmp/full.err")"; fi
  "$dtsim" -t 2n4p >/dev/full 2>"$tmp/full.err"; rc=$?
  if [ $rc -eq 1 ] && grep -q "standard output" "$tmp/full.err"; then ok "stdout write error: exit 1"
  else bad "stdout to /dev/full: exit $rc, $(cat "$tmp/full.err")"; fi
fi

# From any directory: the build-tree program finds the default model and topology names in
# its source tree; a name found nowhere says where it looked, under the flag's name.
if (cd "$tmp" && "$dtsim" -t 2n4p -s ring >"$tmp/anydir" 2>&1) && grep -q "cnn690k" "$tmp/anydir"
then ok "runs from another directory"
else bad "from another directory: $(cat "$tmp/anydir")"; fi
dtsim_fails "model not found" "--model no-such-model: not found (looked for" -t 2n4p -m no-such-model
dtsim_fails "topology path not found" "--topology $tmp/none.yaml: no such file" -t "$tmp/none.yaml"
if DTSIM_DATADIR="$tmp/data" "$dtsim" -t 2n4p -m nothing-here >/dev/null 2>"$tmp/err"; then
  bad "DTSIM_DATADIR: a missing model ran"
elif grep -q "$tmp/data/models/nothing-here" "$tmp/err"; then ok "DTSIM_DATADIR searched"
else bad "DTSIM_DATADIR not in the message: $(cat "$tmp/err")"; fi
mkdir -p "$tmp/data/models"
cp models/mlp-fmnist.yaml "$tmp/data/models/private-net.yaml"
if (cd / && DTSIM_DATADIR="$tmp/data" "$dtsim" -t 2n4p -m private-net -s ring >"$tmp/out" 2>&1)
then ok "a model from DTSIM_DATADIR"
else bad "DTSIM_DATADIR model: $(cat "$tmp/out")"; fi

# One epoch rule: epoch_s is one epoch of floor(samples / global batch) iterations (60000 /
# 1024 = 58), run_s all of them; a global batch larger than the dataset is skipped, and with
# nothing left dtsim exits 2.
"$dtsim" -t 2n4p -s ring -e 3 -f csv >"$tmp/e3.csv" 2>&1
if awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
            { it = $c["iterations"]; e = $c["epoch_s"]; r = $c["run_s"]; s = $c["iter_s"]
              ok = it == 58 && (e / (58 * s) - 1) ^ 2 < 1e-12 && (r / (3 * e) - 1) ^ 2 < 1e-12 }
            END { exit !(NR == 2 && ok) }' "$tmp/e3.csv"
then ok "epoch_s one epoch of floor(60000/1024) iterations, run_s three"
else bad "epochs: $(cat "$tmp/e3.csv")"; fi
dtsim_fails "global batch above the dataset" "larger than the dataset" -t 2n4p -s ring \
  --dataset-size 1000

# Columns fit their widest value: with a huge epoch count and a 59 GiB model every line of the
# ranked table (right-aligned to its last column) has the header's length.
"$dtsim" -t 1n1p -m vgg16-imagenet -e 100000 --dataset-size 1281167 -b 256 >"$tmp/big" 2>&1
if awk '/^rank / { n = length($0); on = 1; next } on && /^$/ { exit } on { if (length($0) != n) bad = 1; rows++ }
        END { exit !(n && rows && !bad) }' "$tmp/big"
then ok "table aligned with large values"
else bad "table alignment: $(cat "$tmp/big")"; fi

# Trainable parameters and running statistics, labelled, in the summary and the table header
# (resnet50-imagenet: 25,557,032 trained + 53,120 batch-norm statistics = 25,610,152).
"$dtsim" -m resnet50-imagenet --summary >"$tmp/sum" 2>&1
"$dtsim" -t dgx-h100 -m resnet50-imagenet -s ring >"$tmp/hdr" 2>&1
if grep -q "^Parameters: 25557032 trainable + 53120 running statistics$" "$tmp/sum" &&
   grep -q "^Total params: 25,610,152$" "$tmp/sum" &&
   grep -q "(parameters: 25557032 trainable + 53120 running statistics)" "$tmp/hdr"
then ok "parameters and running statistics labelled"
else bad "parameter counts: $(head -5 "$tmp/sum") $(head -1 "$tmp/hdr")"; fi

# Traces: a sweep names each process by strategy and shape (no two alike), and no op on a
# rank starts before the previous one on that rank ends (rounding once made them overlap 1 ns).
"$dtsim" -t 1n1p --sweep nodes=1,2 ppn=1,2 -s ring,sequential --trace "$tmp/sweep.json" \
  >/dev/null 2>&1
if command -v python3 >/dev/null; then
  python3 - "$tmp/sweep.json" <<'EOF2' && ok "sweep trace names and no overlaps" || bad "sweep trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = [e["args"]["name"] for e in ev if e.get("name") == "process_name" and e["pid"] > 0]
assert len(names) == len(set(names)) and "ring on 2 nodes x 2" in names, names
spans = {}
for e in ev:
    if e.get("ph") == "X" and e.get("cat") == "compute":
        spans.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
for s in spans.values():
    s.sort()
    for (a0, a1), (b0, b1) in zip(s, s[1:]):
        assert b0 >= a1 - 1e-9, (a0, a1, b0, b1)
EOF2
fi

# --topology-info: the job shape, as scripts read it, without a model
if "$dtsim" -t 2n4p -m no-such-model --topology-info >"$tmp/info" 2>&1 &&
   grep -qx "nodes=2" "$tmp/info" && grep -qx "ranks_per_node=4" "$tmp/info" &&
   grep -qx "device_kind=cpu" "$tmp/info"
then ok "--topology-info"
else bad "--topology-info: $(cat "$tmp/info")"; fi
dtsim_fails "--topology-info with --format" "--topology-info" -t 2n4p --topology-info -f csv

# --precision bf16: 2 + 2 + 12 bytes per parameter (mlp-fmnist: 101,770), receive buffers and
# the communication time of the ring allreduce halve against fp32
for p in fp32 bf16; do
  "$dtsim" -t 1n4p -m mlp-fmnist -s ring -f csv --precision $p >"$tmp/$p.csv" 2>&1 || bad "--precision $p: $(cat "$tmp/$p.csv")"
done
# (the first file's data row sets c and t, the second's is checked: FNR counts per file)
if awk -F, 'FNR == 2 && NR == FNR { c = $21; t = $14 }
     FNR == 2 && NR != FNR { seen = 1
       ok = $17 == 2 * 101770 && $18 == 2 * 101770 && $19 == 12 * 101770 && 2 * $21 == c && $14 < t }
     END { exit !(seen && ok) }' "$tmp/fp32.csv" "$tmp/bf16.csv"
then ok "--precision bf16: bytes per parameter, receive buffers, communication"
else bad "--precision bf16: $(cat "$tmp/fp32.csv" "$tmp/bf16.csv")"; fi
"$dtsim" -m mlp-fmnist --summary --precision fp16 --optimizer sgd >"$tmp/sum" 2>&1
grep -q "at fp16 with sgd: 2 (weights) + 2 (gradients) + 4 (fp32 master weights" "$tmp/sum" &&
  ok "--summary at fp16" || bad "--summary at fp16: $(tail -2 "$tmp/sum")"
dtsim_fails "bad precision" "--precision" -t 2n4p --precision fp4

# --grad-precision fp32 under bf16: 2 + 4 + 12 bytes per parameter, the ring allreduce's
# receive buffers those of fp32 (4 bytes per gradient) and its communication no shorter (the
# overflow flag's MAX besides); bad values and a
# 16-bit type the compute precision does not store in exit 2 naming the flag
"$dtsim" -t 1n4p -m mlp-fmnist -s ring -f csv --precision bf16 --grad-precision fp32 \
  >"$tmp/g32.csv" 2>&1 || bad "--grad-precision fp32: $(cat "$tmp/g32.csv")"
if awk -F, 'FNR == 2 && NR == FNR { c = $21; t = $14 }
     FNR == 2 && NR != FNR { seen = 1
       ok = $17 == 2 * 101770 && $18 == 4 * 101770 && $19 == 12 * 101770 && $21 == c && $14 >= t }
     END { exit !(seen && ok) }' "$tmp/fp32.csv" "$tmp/g32.csv"
then ok "--grad-precision fp32: bytes per parameter, receive buffers, communication"
else bad "--grad-precision fp32: $(cat "$tmp/fp32.csv" "$tmp/g32.csv")"; fi
"$dtsim" -m mlp-fmnist --summary --precision bf16 --grad-precision fp32 >"$tmp/sum" 2>&1
grep -q "at bf16 with adam: 2 (weights) + 4 (gradients) + 12 (fp32 master" "$tmp/sum" &&
  ok "--summary with fp32 gradients" || bad "--summary with fp32 gradients: $(tail -2 "$tmp/sum")"
dtsim_fails "bad grad precision" "--grad-precision: expected fp32, bf16 or fp16" \
  -t 2n4p --grad-precision fp8
dtsim_fails "16-bit gradients under fp32" "--grad-precision bf16: 16-bit gradients need" \
  -t 2n4p -s ring --grad-precision bf16
dtsim_fails "fp16 gradients under bf16" "--grad-precision fp16 under --precision bf16" \
  -t 2n4p -s ring --precision bf16 --grad-precision fp16
# said once, as the flag's own error: not as a refusal of the sequential baseline (which named
# the topology file), nor under --recommend as "no configuration fits" with no reason
"$dtsim" -t 2n4p -s ring --grad-precision bf16 >"$tmp/out" 2>"$tmp/err"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^dtsim: --grad-precision bf16: 16-bit" "$tmp/err" &&
  ! grep -q "sequential\|yaml" "$tmp/err" && ok "--grad-precision refused once, by its name" ||
  bad "--grad-precision refusal: $(cat "$tmp/err")"
dtsim_fails "--recommend: gradients --precision cannot keep" \
  "dtsim: --grad-precision fp16 under --precision bf16" \
  -t dgx-a100 -m tiny-gpt --recommend --global-batch 64 --precision bf16 --grad-precision fp16
dtsim_fails "--recommend: gradients no precision of the devices keeps" \
  "--grad-precision bf16: no precision the devices of 2n4p have a peak for keeps" \
  -t 2n4p -m tiny-gpt --recommend --global-batch 64 --grad-precision bf16
# without --precision the search keeps to the precisions that store them: fp16 gradients, fp16
"$dtsim" -t dgx-a100 -m tiny-gpt --recommend --global-batch 64 --grad-precision fp16 --top 3 \
  >"$tmp/rec16" 2>&1
[ "$(awk '$1 ~ /^[1-3]$/ && / fp16 / && !/ (fp32|tf32|bf16|fp8) /' "$tmp/rec16" | wc -l)" -eq 3 ] &&
  ok "--recommend --grad-precision fp16 searches fp16" ||
  bad "--recommend --grad-precision fp16: $(cat "$tmp/rec16")"

# A pipeline cut layer by layer through transformer blocks sends a block's residual input
# several chunks ahead; holding that output only until sent made the next forward wait for
# a receive posted much later (interleaved 64 stages x 4 chunks: a rendezvous deadlock).
if "$dtsim" -m gpt3-13b -t h100-128n-fattree -s interleaved --dp 1 --pp 64 --chunks 4 \
     --micro-batches 64 -b 64 --scaling strong --precision fp8 --recompute selective -f csv \
     >"$tmp/skip" 2>&1; then
  ok "interleaved with skip sends across chunks plays to its end"
else bad "interleaved with skip sends: $(tail -1 "$tmp/skip")"; fi

# --activations: the device's default (fused on GPUs, separate on CPUs) unless given; a
# ResNet's ReLUs as passes of their own make the step longer (CSV column 12: iteration).
iter_of() { "$dtsim" "$@" -f csv | awk -F, 'NR == 2 { print $12 }'; }
g=$(iter_of -t dgx-a100 -m resnet50-imagenet -b 64 -s sequential --precision bf16)
gf=$(iter_of -t dgx-a100 -m resnet50-imagenet -b 64 -s sequential --precision bf16 --activations fused)
gs=$(iter_of -t dgx-a100 -m resnet50-imagenet -b 64 -s sequential --precision bf16 --activations separate)
c=$(iter_of -t 1n1p -m cnn690k -s sequential)
cs=$(iter_of -t 1n1p -m cnn690k -s sequential --activations separate)
cf=$(iter_of -t 1n1p -m cnn690k -s sequential --activations fused)
awk -v g="$g" -v gf="$gf" -v gs="$gs" -v c="$c" -v cs="$cs" -v cf="$cf" \
  'BEGIN { exit !(g == gf && gs > g * 1.01 && c == cs && cf < c) }' &&
  ok "--activations fused|separate over the device's default" ||
  bad "--activations: GPU $g fused $gf separate $gs; CPU $c separate $cs fused $cf"
dtsim_fails "--activations bad value" "--activations: expected fused or separate" \
  -t 2n4p --activations maybe

# --conv-layout: nhwc unless given; nchw makes a tensor-core (tf32) ResNet step longer by its
# transposes, and leaves an fp32 step on the V100's fp32 units, and a CPU's, as they were.
r="-m resnet50-imagenet -b 64 -s sequential"
t=$(iter_of -t dgx-a100 $r --precision tf32)
tn=$(iter_of -t dgx-a100 $r --precision tf32 --conv-layout nhwc)
tc=$(iter_of -t dgx-a100 $r --precision tf32 --conv-layout nchw)
v=$(iter_of -t dgx1-v100 $r)
vc=$(iter_of -t dgx1-v100 $r --conv-layout nchw)
c=$(iter_of -t 1n1p -m cnn690k -s sequential)
cc=$(iter_of -t 1n1p -m cnn690k -s sequential --conv-layout nchw)
awk -v t="$t" -v tn="$tn" -v tc="$tc" -v v="$v" -v vc="$vc" -v c="$c" -v cc="$cc" \
  'BEGIN { exit !(t == tn && tc > t * 1.05 && v == vc && c == cc) }' &&
  ok "--conv-layout nhwc|nchw: transposes on tensor cores only" ||
  bad "--conv-layout: tf32 $t nhwc $tn nchw $tc; V100 fp32 $v nchw $vc; CPU $c nchw $cc"
dtsim_fails "--conv-layout bad value" "--conv-layout: expected nhwc or nchw" \
  -t 2n4p --conv-layout nwhc

echo "$fails failed"
[ $fails -eq 0 ]
