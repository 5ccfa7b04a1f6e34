#!/bin/sh
# dtvalidate loop's sharded runs (issue 12): beside data parallelism it runs ring with --tp 2
# and with --zero 1, 2, 3 on 2 ranks for --tensor-models / --zero-models, skips (and says why)
# what the model cannot take (tiny-gpt's tied lm_head under ZeRO 2 and 3), and the records
# carry the parallel config into the fit and the report. Short runs (3 iterations, 1 repeat):
# what is checked is which runs are made and analysed, not the error (timings on a loaded
# machine; README has the figures of the full loop).
. "${top_srcdir:=..}/tests/testlib.sh"
dtv="$top_builddir/dtvalidate"
[ -x "$top_builddir/dtexec" ] || { echo "SKIP: dtexec not built"; exit 77; }
command -v "$MPIEXEC" >/dev/null 2>&1 || { echo "SKIP: no $MPIEXEC"; exit 77; }
short="--pipelines none --repeat 1 --max-iters 3 --epochs 1 --fit eff_dense
       --dtexec $top_builddir/dtexec --mpiexec $(command -v "$MPIEXEC")"

# shellcheck disable=SC2086
"$dtv" loop -d "$tmp/a" --models mlp-wide,tiny-gpt --tensor-models mlp-wide,tiny-gpt \
  --zero-models tiny-gpt $short >"$tmp/a.out" 2>"$tmp/a.err"
rc=$?
if [ $rc -eq 0 ]; then ok "loop with --tp and --zero runs"
else bad "loop: exit $rc: $(tail -5 "$tmp/a.err")"; fi
runs() { grep -c "\"$1\"" "$tmp/a/records.jsonl" 2>/dev/null; }
par() { grep -c "\"parallel\": *\"$1\"" "$tmp/a/records.jsonl"; }
# mlp-wide: sequential + 9 data-parallel (tree among them) + tp; tiny-gpt: the same + zero 1
# (2 and 3 refused)
n=$(wc -l <"$tmp/a/records.jsonl")
[ "$n" -eq 23 ] && ok "23 runs" || bad "runs: $n, want 23"
[ "$(par 'tp=2')" -eq 2 ] && ok "2 tensor-parallel runs" || bad "tp runs: $(par 'tp=2')"
[ "$(par 'zero=1')" -eq 1 ] && ok "1 ZeRO run" || bad "zero runs: $(par 'zero=1')"
grep -q "skipped ring --zero 2 -b 64 on 2 ranks of tiny-gpt: .*tied" "$tmp/a.err" &&
  ok "ZeRO 2 on tiny-gpt skipped, with the reason" || bad "no skip message: $(grep skipped "$tmp/a.err")"
grep -q "ring(tp=2)" "$tmp/a/report.txt" && grep -q "ring(zero=1)" "$tmp/a/report.txt" &&
  ok "report names the sharded runs" || bad "report: $(grep -c ring "$tmp/a/report.txt") ring lines"

# none: data parallelism only
# shellcheck disable=SC2086
"$dtv" loop -d "$tmp/b" --models mlp-wide --tensor-models none --zero-models none $short \
  >"$tmp/b.out" 2>"$tmp/b.err"
n=$(wc -l <"$tmp/b/records.jsonl")
[ "$n" -eq 10 ] && ! grep -q "tp=\|zero=" "$tmp/b/records.jsonl" && ok "none: 10 data-parallel runs" ||
  bad "none: $n runs"
expect_error "--tensor-models on compare" "--tensor-models does not apply to compare" \
  "$dtv" compare --tensor-models mlp-wide "$tmp/b/records.jsonl"
finish
