#!/bin/sh
# The shape of validate/data/gpu-published.csv (NVIDIA DeepLearningExamples throughput tables),
# which no dtvalidate reader loads yet, so that it cannot rot unnoticed: its header, its rows
# per source, every source code defined in its comments, the values of each column, every
# system with a topology file that loads and every model with a model file that loads (the
# mapping of validate/README.md), and the global batch of the BERT rows.
. "${top_srcdir:=..}/tests/testlib.sh"
csv="$top_srcdir/validate/data/gpu-published.csv"
dtsim="$top_builddir/dtsim"

[ -r "$csv" ] || { echo "FAIL: cannot read $csv"; exit 1; }

want='source,system,gpu,gpus,model,precision,batch_per_gpu,seq_len,accum_steps,throughput,unit'
header=$(grep -v '^#' "$csv" | head -n 1)
[ "$header" = "$want" ] && ok "header" || bad "header is '$header'"

# Rows per source, as counted when the file was added (the README gives the same figures).
grep -v '^#' "$csv" | tail -n +2 | cut -d, -f1 | sort | uniq -c | awk '{ print $2, $1 }' \
  >"$tmp/counts"
printf '%s\n' 'DLE-MX-RN50 24' 'DLE-PT-BERT 31' 'DLE-PT-RN50 12' 'DLE-TF-RN50 12' >"$tmp/want"
cmp -s "$tmp/counts" "$tmp/want" && ok "79 rows: MX 24, PT-BERT 31, PT 12, TF 12" ||
  bad "rows per source: $(tr '\n' ';' <"$tmp/counts")"

# Source codes defined in the comment block: lines "#  CODE  text" after "# source codes:".
awk '/^# source codes:/ { on = 1; next } on && /^#  [A-Z]/ { print $2 } on && !/^#/ { exit }' \
  "$csv" | sort >"$tmp/defined"
grep -v '^#' "$csv" | tail -n +2 | cut -d, -f1 | sort -u >"$tmp/used"
if [ -s "$tmp/used" ] && [ -z "$(comm -23 "$tmp/used" "$tmp/defined")" ]; then
  ok "every source code is defined"
else
  bad "undefined source codes: $(comm -23 "$tmp/used" "$tmp/defined" | tr '\n' ' ')"
fi

# Every row: 11 fields and plausible values. Prints "line: reason" for each bad field.
awk -F, '
  /^#/ { next }
  !seen { seen = 1; next }
  function whole(s) { return s ~ /^[1-9][0-9]*$/ }
  function fail(why) { print NR ": " why; }
  {
    if (NF != 11) { fail(NF " fields"); next }
    if ($2 !~ /^(DGX A100( x(2|4|8|16|32))?|DGX-1|DGX-2)$/) fail("system " $2)
    if ($3 !~ /^(A100-40GB|A100-80GB|V100-16GB|V100-32GB)$/) fail("gpu " $3)
    if (!whole($4)) fail("gpus " $4)
    if ($2 ~ / x/) { n = $2; sub(/.* x/, "", n); if ($4 != 8 * n) fail($4 " gpus on " $2) }
    else if ($4 > ($2 == "DGX-2" ? 16 : 8)) fail($4 " gpus on one " $2)
    if ($6 !~ /^(fp32|tf32|amp)$/) fail("precision " $6)
    if ($6 == "tf32" && $3 !~ /^A100/) fail("tf32 on " $3)
    if ($7 != "" && !whole($7)) fail("batch_per_gpu " $7)
    if (!whole($9)) fail("accum_steps " $9)
    if ($10 !~ /^[0-9]+(\.[0-9]+)?$/ || $10 <= 0) fail("throughput " $10)
    if ($5 == "resnet50") {
      if ($11 != "img/s" || $8 != "" || $7 == "" || $9 != 1) fail("resnet50 row")
    } else if ($5 == "bert-large") {
      if ($11 != "seq/s" || ($8 != 128 && $8 != 512)) fail("bert-large row")
      # NVIDIA LAMB recipe on DGX A100: global batch 65536 sequences of 128, 32768 of 512
      # tokens; the DGX-1 table accumulates 4096 and 2048 per GPU (half of that on 8 GPUs).
      if ($2 ~ /^DGX A100/ && $4 >= 8 && $7 * $9 * $4 != ($8 == 128 ? 65536 : 32768))
        fail("global batch " $7 "x" $9 "x" $4)
      if ($2 == "DGX-1" && $7 * $9 != ($8 == 128 ? 4096 : 2048))
        fail("accumulated batch " $7 "x" $9)
    } else fail("model " $5)
  }' "$csv" >"$tmp/badrows"
[ -s "$tmp/badrows" ] && bad "rows: $(tr '\n' ';' <"$tmp/badrows")" || ok "every row's values"

# The files the README maps systems and models to exist and load.
grep -v '^#' "$csv" | tail -n +2 | cut -d, -f2,3 | sort -u >"$tmp/systems"
while IFS=, read -r system gpu; do
  case "$system,$gpu" in
    "DGX A100,A100-80GB") topo=dgx-a100 ;;
    "DGX A100,A100-40GB") topo=dgx-a100-40gb ;;
    "DGX A100 x"*",A100-80GB") topo=dgx-a100-32n ;;
    "DGX-1,V100-"*) topo=dgx1-v100 ;;
    "DGX-2,V100-32GB") topo=dgx2-v100 ;;
    *) topo= ;;
  esac
  if [ -n "$topo" ] && "$dtsim" -t "$top_srcdir/topologies/$topo.yaml" --topology-info \
    >/dev/null 2>"$tmp/err"; then
    ok "$system $gpu -> topologies/$topo.yaml"
  else
    bad "$system $gpu: no topology ($topo) $(cat "$tmp/err" 2>/dev/null)"
  fi
done <"$tmp/systems"
for model in resnet50-imagenet bert-large; do
  "$dtsim" -m "$top_srcdir/models/$model.yaml" --summary >/dev/null 2>"$tmp/err" &&
    ok "model $model loads" || bad "model $model: $(cat "$tmp/err")"
done

[ $fails -eq 0 ] && echo "PASS: gpu-published.csv" || echo "FAIL: $fails checks"
[ $fails -eq 0 ]
