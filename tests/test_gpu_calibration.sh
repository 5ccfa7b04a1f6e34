#!/bin/sh
# GPU calibrations: `dtvalidate gpu` on NVIDIA's published table (every row simulated or left
# out with its reason; the reports; calibrations written only in range), bad rows of the table
# at file:line:column, and what dtsim does with a calibration: found by name, refused on
# another device kind, warned about on another device, an interval from the residual spread
# without a covariance and none without either, out-of-range values refused.
. "${top_srcdir:=..}/tests/testlib.sh"
dtv="$top_builddir/dtvalidate"
dtsim="$top_builddir/dtsim"
full="$top_srcdir/validate/data/gpu-published.csv"
# The ResNet-50 rows of PyTorch and TensorFlow and MXNet's A100 rows (the whole table takes
# minutes: its multi-node BERT rows), line numbers kept for the bad rows below.
csv="$tmp/part.csv"
sed -n '1,41p;60,67p' "$full" >"$csv"

# The reports: every row of the table is either simulated or listed as left out.
if "$dtv" gpu -q --dir "$tmp/cal" "$csv" >"$tmp/gpu.out" 2>"$tmp/gpu.err"; then
  ok "dtvalidate gpu runs"
else
  bad "dtvalidate gpu: $(cat "$tmp/gpu.err")"
fi
rows=$(grep -vc '^#' "$csv")
sim=$(sed -n 's/.*: \([0-9]*\) rows the simulator runs, \([0-9]*\) left out.*/\1 \2/p' "$tmp/gpu.out")
left=$(grep -c '^  line  *[0-9]' "$tmp/gpu.out")
set -- $sim
[ $# -eq 2 ] && [ $(($1 + $2)) -eq $((rows - 1)) ] && [ "$left" -eq "$2" ] &&
  ok "all $((rows - 1)) rows simulated ($1) or left out with a reason ($2)" ||
  bad "rows: '$sim', $left reasons listed, table has $((rows - 1))"
for title in "v100: calibration on all" "v100: fit on the 1-GPU rows, predict the multi-GPU" \
  "v100: fit on pytorch, predict the other frameworks" "fit on v100, predict a100 from its" \
  "fit on a100, predict v100 from its"; do
  grep -q "^$title" "$tmp/gpu.out" && ok "report: $title" || bad "no report '$title'"
done
# A device's calibration is written exactly when its values are in range, and then loads.
for dev in v100 a100; do
  if [ -f "$tmp/cal/$dev.yaml" ]; then
    grep -q "written to $tmp/cal/$dev.yaml" "$tmp/gpu.out" &&
      "$dtsim" -t dgx-a100 -m resnet50-imagenet -s ring --calibration "$tmp/cal/$dev.yaml" \
        >/dev/null 2>&1 && ok "$dev.yaml written and loads" || bad "$dev.yaml"
  else
    sed -n "/^$dev: calibration/,/^\$/p" "$tmp/gpu.out" >"$tmp/$dev.part"
    if grep -q "out of range" "$tmp/$dev.part" && grep -q "not written" "$tmp/$dev.part"; then
      ok "$dev: not written, out of range"
    elif grep -q "no calibration for $dev" "$tmp/$dev.part"; then
      ok "$dev: no rows to fit, no file"
    else
      bad "$dev: no file and no reason: $(cat "$tmp/$dev.part")"
    fi
  fi
done

# Per framework: its 1-GPU rows fit from the device's 1-GPU fit predict its multi-GPU rows;
# its calibration on all its rows starts from the device's; what its few rows cannot tell keeps
# the base's value, said so in the report and in the file.
for title in "v100 pytorch: fit on its 1-GPU rows, predict its multi-GPU rows" \
  "a100 mxnet: fit on its 1-GPU rows, predict its multi-GPU rows" \
  "v100 pytorch: calibration on all its rows" "v100 pytorch: predict a100 pytorch from its"; do
  grep -q "^$title" "$tmp/gpu.out" && ok "report: $title" || bad "no report '$title'"
done
sed -n '/^v100 tensorflow: fit on its 1-GPU rows/,/^$/p' "$tmp/gpu.out" >"$tmp/tf.part"
grep -q "fit on 2 rows" "$tmp/tf.part" &&
  grep -q "^  not fitted (too few rows), kept at the v100 1-GPU fit's values: eff_gemm, " "$tmp/tf.part" &&
  grep -q "^  iter_overhead .*95% CI" "$tmp/tf.part" &&
  ok "2 rows: one parameter fitted, the rest kept at the device's 1-GPU fit, said so" ||
  bad "v100 tensorflow 1-GPU: $(cat "$tmp/tf.part")"
value_of() { # file, parameter
  awk -v p="  $2:" '$0 ~ "^" p { on = 1; next } on && /value:/ { print $2; exit }' "$1"
}
f="$tmp/cal/a100-tensorflow.yaml"
[ -f "$f" ] && [ -n "$(value_of "$f" intra_bw)" ] &&
  [ "$(value_of "$f" intra_bw)" = "$(value_of "$tmp/cal/a100.yaml" intra_bw)" ] &&
  grep -q 'source: "kept from the a100 calibration: ' "$f" &&
  ok "a100-tensorflow.yaml: intra_bw (no multi-GPU row can tell it) is a100.yaml's, with its source" ||
  bad "a100-tensorflow.yaml: intra_bw '$(value_of "$f" intra_bw)' against a100.yaml's"

# The shipped calibrations (calibrations/*.yaml, `dtvalidate gpu --dir calibrations` on the
# whole table): found by name, in range (the loader checks), with their provenance and
# intervals, and dtsim runs with them on their device.
for dev in v100 a100; do
  f="$top_srcdir/calibrations/$dev.yaml"
  if [ ! -f "$f" ]; then
    bad "calibrations/$dev.yaml is not shipped"
    continue
  fi
  grep -q "gpu-published.csv" "$f" && grep -q "ci95: \[" "$f" &&
    ok "$dev.yaml: provenance and intervals" || bad "$dev.yaml: no provenance or interval"
done
topo_of() { case "$1" in v100*) echo dgx1-v100 ;; *) echo dgx-a100 ;; esac; }
for dev in v100-pytorch v100-mxnet v100-tensorflow a100-pytorch a100-mxnet a100-tensorflow; do
  f="$top_srcdir/calibrations/$dev.yaml"
  [ -f "$f" ] && grep -q "gpu-published.csv" "$f" && grep -q "ci95: \[" "$f" &&
    ok "$dev.yaml shipped: provenance and intervals" ||
    bad "calibrations/$dev.yaml: missing, or no provenance or interval"
done
for dev in v100 a100 v100-pytorch v100-mxnet v100-tensorflow a100-pytorch a100-mxnet; do
  DTSIM_DATADIR="$top_srcdir" "$dtsim" -t "$(topo_of $dev)" -m resnet50-imagenet -b 128 -s ring \
    --precision fp16 --calibration "$dev" >"$tmp/ship.out" 2>"$tmp/ship.err" &&
    [ ! -s "$tmp/ship.err" ] && grep -q "^1 *ring" "$tmp/ship.out" &&
    ok "dtsim --calibration $dev -t $(topo_of $dev) runs, no warning" ||
    bad "--calibration $dev: $(cat "$tmp/ship.err")"
done
# TensorFlow's A100 rows are on the 40 GB A100 (the table's), dgx-a100 has the 80 GB one:
# applied there, dtsim runs and says so by name.
DTSIM_DATADIR="$top_srcdir" "$dtsim" -t dgx-a100 -m resnet50-imagenet -b 128 -s ring \
  --precision fp16 --calibration a100-tensorflow >"$tmp/ship.out" 2>"$tmp/ship.err" &&
  grep -q "^1 *ring" "$tmp/ship.out" &&
  grep -q "fitted on 'NVIDIA A100 SXM4 40GB' applied to 'NVIDIA A100 SXM4 80GB'" "$tmp/ship.err" &&
  ok "dtsim --calibration a100-tensorflow -t dgx-a100 runs, warns of the 40 GB A100" ||
  bad "--calibration a100-tensorflow: $(cat "$tmp/ship.err")"

# Bad rows of the table, each at its line and column.
bad_row() { # name, sed expression on line 28 (a V100 fp32 row), expected text
  sed "28$2" "$csv" >"$tmp/bad.csv"
  expect_error "table: $1" "$3" "$dtv" gpu -q "$tmp/bad.csv"
}
bad_row "precision" 's/,fp32,/,fp12,/' "bad.csv:28:40: precision: 'fp12' is not one of fp32, tf32, amp"
bad_row "throughput" 's/,367,/,367 img\/s,/' "bad.csv:28:52: throughput: expected a positive number"
bad_row "gpus" 's/,1,resnet50/,0,resnet50/' "bad.csv:28:29: gpus: expected a whole number"
bad_row "system" 's/DGX-1/DGX-9/' "bad.csv:28:13: system 'DGX-9' with GPU 'V100-16GB': no topology"
bad_row "too many GPUs" 's/,1,resnet50/,9,resnet50/' "bad.csv:28:29: gpus: 9 GPUs do not fill 'DGX-1'"
bad_row "unit" 's/img\/s/seq\/s/' "bad.csv:28:56: unit: resnet50 is measured in img/s"
bad_row "fields" 's/$/,extra/' "bad.csv:28:1: 12 fields where the header has 11"
sed 's/^source,/src,/' "$csv" >"$tmp/bad.csv"
expect_error "table: header" "bad.csv:23:1: column 1 is 'src', expected 'source'" \
  "$dtv" gpu -q "$tmp/bad.csv"
expect_error "gpu: two tables" "gpu takes at most one TABLE" "$dtv" gpu "$csv" "$csv"

# Calibrations applied by dtsim, found by name through DTSIM_DATADIR.
mkdir -p "$tmp/data/calibrations"
cal() { # name, device, device_name, fit block, eff_gemm value
  printf 'format: dtsim-calibration/1\ndevice: %s\ndevice_name: "%s"\n%bparameters:\n  eff_gemm: {value: %s}\n' \
    "$2" "$3" "$4" "$5" >"$tmp/data/calibrations/$1.yaml"
}
cal v100x gpu "NVIDIA Tesla V100 SXM2 32GB" 'fit: {observations: 8, dof: 6, residual_sd: 0.05, t95: 2.447}\n' 0.6
cal nocov gpu "NVIDIA A100 SXM4 80GB" 'fit: {observations: 8, dof: 6, residual_sd: 0.05, t95: 2.447}\n' 0.6
cal nospread gpu "NVIDIA A100 SXM4 80GB" '' 0.6
cal cpu cpu "Intel Xeon" '' 0.3
cal toofast gpu "NVIDIA A100 SXM4 80GB" '' 1.4
run() { DTSIM_DATADIR="$tmp/data" "$dtsim" -m resnet50-imagenet -s ring -b 64 "$@"; }

run -t dgx-a100 --calibration v100x >"$tmp/out" 2>"$tmp/err" &&
  grep -q "warning: calibration fitted on 'NVIDIA Tesla V100 SXM2 32GB' applied to 'NVIDIA A100 SXM4 80GB'" "$tmp/err" &&
  ok "by name; another device of the kind: warned by name" || bad "v100x on dgx-a100: $(cat "$tmp/err")"
run -t dgx1-v100 --calibration v100x >"$tmp/out" 2>"$tmp/err" && [ ! -s "$tmp/err" ] &&
  ok "its own device: no warning" || bad "v100x on dgx1-v100: $(cat "$tmp/err")"
expect_error "another device kind refused" \
  "v100x.yaml:2:9: calibration fitted on NVIDIA Tesla V100 SXM2 32GB (gpu) cannot be applied to topology '2n4p'" \
  run -t 2n4p --calibration v100x
expect_error "a cpu calibration on a gpu refused" "cpu.yaml:2:9:" run -t dgx-a100 --calibration cpu
# no covariance: the interval is the residual spread alone, y exp(-/+ t95 s)
run -t dgx-a100 --calibration nocov -f csv >"$tmp/out" 2>"$tmp/err"
awk -F, 'NR == 2 { e = $11; lo = $(NF - 1); hi = $NF; w = exp(2.447 * 0.05)
           exit !(lo > 0 && hi > lo && (e / lo - w) ^ 2 < 1e-12 && (hi / e - w) ^ 2 < 1e-12) }' \
  "$tmp/out" && ok "no covariance: interval from the residual spread" ||
  bad "nocov interval: $(cat "$tmp/out" "$tmp/err")"
run -t dgx-a100 --calibration nospread >"$tmp/out" 2>&1 && grep -q " none" "$tmp/out" &&
  grep -q "no interval: the file has neither a covariance nor a residual spread" "$tmp/out" &&
  ok "no covariance, no spread: no interval (not a zero-width one)" ||
  bad "nospread: $(cat "$tmp/out")"
run -t dgx-a100 --calibration nospread -f csv | awk -F, 'NR == 2 { exit !($(NF - 1) == "" && $NF == "") }' &&
  ok "csv: empty interval fields" || bad "nospread csv"
expect_error "efficiency above 1" "toofast.yaml:5:21: eff_gemm = 1.4 is out of range" \
  run -t dgx-a100 --calibration toofast
expect_error "unknown name" "--calibration nosuch: not found" run -t dgx-a100 --calibration nosuch

# A calibration predicts with the values its fit evaluated. Here the v100 device fit splits
# conv and dense (ResNet-50 and BERT rows) and the MXNet fit from it ties them (eff_gemm,
# eff_gemm_half): the base's parts must not be carried over the ties it fitted (they won over
# them in dt_calibration_apply), and the in-sample rows' MAPE (of throughput) is the fit's (of
# iteration time; the two differ by the square of the errors, here about 1 %). BERT's 1-GPU
# rows are enough for the v100 fit to split conv and dense; its 8-GPU rows (97-98) cost 5.6 of
# this run's 9.4 CPU s and change neither file's parameters.
sed -n '1,23p;28,35p;42,49p;95,96p' "$full" >"$tmp/tie.csv"
"$dtv" gpu -q --dir "$tmp/tie" "$tmp/tie.csv" >"$tmp/tie.out" 2>"$tmp/tie.err" ||
  bad "dtvalidate gpu tie.csv: $(cat "$tmp/tie.err")"
f="$tmp/tie/v100-mxnet.yaml"
half_ok() { # no parts beside a fitted eff_gemm_half
  [ -z "$(value_of "$f" eff_gemm_half)" ] ||
    [ -z "$(value_of "$f" eff_conv_half)$(value_of "$f" eff_dense_half)" ]
}
[ -n "$(value_of "$f" eff_gemm)" ] && [ -z "$(value_of "$f" eff_conv)$(value_of "$f" eff_dense)" ] &&
  half_ok && ok "v100-mxnet.yaml: its fitted ties, not the v100 fit's conv and dense parts" ||
  bad "v100-mxnet.yaml: $(grep -A1 '^  eff_' "$f")"
sed -n '/^v100 mxnet: calibration on all/,/^$/p' "$tmp/tie.out" |
  awk '/in-sample MAPE/ { fit = $NF + 0 } /=> / { rows = $5 + 0 }
       END { d = fit - rows; print fit, rows, (fit > 0 && d < 0.05 && d > -0.05) ? "same" : "differ" }' \
  >"$tmp/tie.mape"
grep -q " same$" "$tmp/tie.mape" && ok "v100 mxnet in sample: rows' MAPE is the fit's ($(cat "$tmp/tie.mape"))" ||
  bad "v100 mxnet in sample: fit, rows: $(cat "$tmp/tie.mape")"

finish
