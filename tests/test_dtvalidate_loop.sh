#!/bin/sh
# dtvalidate loop's sharded runs (issue 12): beside data parallelism it runs ring with --tp 2
# and with --zero 1, 2, 3 on 2 ranks for --tensor-models / --zero-models, skips (and says why)
# what the model cannot take (--tp 2 on a model without a dense pair), and the records
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
printf 'name: one-dense\nsource: test\ninput: {shape: [8]}\nclasses: 4\nlayers:\n  - {kind: dense, units: 4, activation: softmax}\n' \
  >"$tmp/one-dense.yaml"
"$dtv" loop -d "$tmp/a" --models "mlp-wide,tiny-gpt,$tmp/one-dense.yaml" \
  --tensor-models "mlp-wide,tiny-gpt,one-dense" --zero-models tiny-gpt $short >"$tmp/a.out" 2>"$tmp/a.err"
rc=$?
if [ $rc -eq 0 ]; then ok "loop with --tp and --zero runs"
else bad "loop: exit $rc: $(tail -5 "$tmp/a.err")"; fi
runs() { grep -c "\"$1\"" "$tmp/a/records.jsonl" 2>/dev/null; }
par() { grep -c "\"parallel\": *\"$1\"" "$tmp/a/records.jsonl"; }
# mlp-wide: sequential + 9 data-parallel (tree among them) + tp; tiny-gpt: the same + zero 1,
# 2, 3 (its tied table staged apart); one-dense: sequential + 9 (tp refused)
n=$(wc -l <"$tmp/a/records.jsonl")
[ "$n" -eq 35 ] && ok "35 runs" || bad "runs: $n, want 35"
[ "$(par 'tp=2')" -eq 2 ] && ok "2 tensor-parallel runs" || bad "tp runs: $(par 'tp=2')"
[ "$(grep -c '"parallel": *"zero=' "$tmp/a/records.jsonl")" -eq 3 ] && ok "3 ZeRO runs" ||
  bad "zero runs: $(grep -c '"parallel": *"zero=' "$tmp/a/records.jsonl")"
grep -q "skipped ring --tp 2 -b 128 on 2 ranks of one-dense: .*dense pair" "$tmp/a.err" &&
  ok "--tp 2 on one-dense skipped, with the reason" || bad "no skip message: $(grep skipped "$tmp/a.err")"
grep -q "ring(tp=2)" "$tmp/a/report.txt" && grep -q "ring(zero=1)" "$tmp/a/report.txt" &&
  ok "report names the sharded runs" || bad "report: $(grep -c ring "$tmp/a/report.txt") ring lines"

# none: data parallelism only
# shellcheck disable=SC2086
"$dtv" loop -d "$tmp/b" --models mlp-wide --tensor-models none --zero-models none $short \
  >"$tmp/b.out" 2>"$tmp/b.err"
n=$(wc -l <"$tmp/b/records.jsonl")
[ "$n" -eq 10 ] && ! grep -q "tp=\|zero=" "$tmp/b/records.jsonl" && ok "none: 10 data-parallel runs" ||
  bad "none: $n runs"
# --reuse simulates each run on the topology file its record names, says which in the report,
# and warns when that file is not the current one; --current-topology analyses them with the
# current one (its path may be spelled otherwise than the records': a build directory's ../).
# Here the records name a copy of localhost.yaml with 10 times its link bandwidth between
# ranks (the fit, eff_dense, is pinned by the one-rank run and cannot make up for it).
cur=$(sed -n 's/.*"topology_path": *"\([^"]*\)".*/\1/p' "$tmp/b/records.jsonl" | head -1)
sed 's/ bandwidth: 12.5 GB/ bandwidth: 125 GB/' "$cur" >"$tmp/old-localhost.yaml"
mkdir -p "$tmp/c"
sed "s|\"topology_path\": *\"[^\"]*\"|\"topology_path\": \"$tmp/old-localhost.yaml\"|" \
  "$tmp/b/records.jsonl" >"$tmp/c/records.jsonl"
reuse() { "$dtv" loop --reuse -d "$tmp/c" --fit eff_dense "$@"; }
reuse >"$tmp/c.out" 2>"$tmp/c.err"
grep -q "^Topology: $tmp/old-localhost.yaml for 10 runs, which differs from the current .*/localhost.yaml\$" \
  "$tmp/c/report.txt" && grep -q "warning: 10 of 10 runs .*--current-topology" "$tmp/c.err" &&
  ok "--reuse names the records' older topology and warns" ||
  bad "old topology: $(grep '^Topology' "$tmp/c/report.txt"); $(tail -3 "$tmp/c.err")"
sim() { awk '$2 == "1n2p" && $3 == "ring" {print $7}' "$tmp/c/report.txt"; }
old=$(sim)
reuse --current-topology >"$tmp/c.out" 2>"$tmp/c.err"
grep -q "^Topology: .*/localhost.yaml for 10 runs\$" "$tmp/c/report.txt" && ! grep -q warning "$tmp/c.err" &&
  ok "--current-topology: every run on the current file" ||
  bad "current topology: $(grep '^Topology' "$tmp/c/report.txt"); $(grep warning "$tmp/c.err")"
new=$(sim)
[ -n "$old" ] && [ "$old" != "$new" ] && ok "the topology changes the simulated time ($old, $new)" ||
  bad "simulated ring mlp-wide: '$old' and '$new'"
rm "$tmp/old-localhost.yaml"
expect_error "--reuse: a record's topology file gone" \
  "records.jsonl:1:" reuse
grep -q "old-localhost.yaml' is not there .*--current-topology" "$tmp/err" &&
  ok "... it says how to use the current one" || bad "gone: $(cat "$tmp/err")"
reuse --current-topology >"$tmp/c.out" 2>"$tmp/c.err" && ok "--current-topology: a record's topology file gone" ||
  bad "--current-topology with the file gone: $(tail -2 "$tmp/c.err")"
expect_error "--current-topology on compare" "--current-topology does not apply to compare" \
  "$dtv" compare --current-topology "$tmp/b/records.jsonl"
expect_error "--tensor-models on compare" "--tensor-models does not apply to compare" \
  "$dtv" compare --tensor-models mlp-wide "$tmp/b/records.jsonl"
finish
