#!/bin/sh
# dtsim --links (per-link utilisation, the busiest links) and --estimate / the warning before
# a long simulation, on small fabrics whose flows are counted by hand.
. "${top_srcdir:=..}/tests/testlib.sh"
dtsim="$top_builddir/dtsim"
cd "$top_srcdir"

# 8 one-GPU nodes on a fat-tree of radix 6 at 2:1: leaves of 4 nodes (nodes 0-3, 4-7), 2
# uplinks each. A ring allreduce crosses leaves twice: 3 -> 4 and 7 -> 0; static routing takes
# spine (destination port) 4 mod 2 = 0 and 0 mod 2 = 0, so links leaf-up 0-0 / leaf-down 1-0
# carry exactly what node 3's NIC sends, leaf-up 1-0 / leaf-down 0-0 what node 7's sends,
# and no other leaf link carries anything.
cat >"$tmp/ft.yaml" <<'YAML'
name: ft8
nodes:
  - name: n
    count: 8
    devices: 1
    device: {kind: gpu, name: g, peak: {fp32: 10 TFLOP/s}, memory: 16 GiB, memory_bw: 900 GB/s}
    intra: {kind: nvswitch, bandwidth: 100 GB/s, latency: 1 us, sharing: crossbar}
    nic: {kind: infiniband, bandwidth: 100 Gbit/s, latency: 2 us}
network: {kind: fat-tree, latency: 100 ns, radix: 6, oversubscription: 2}
YAML
"$dtsim" -t "$tmp/ft.yaml" -m mlp-fmnist -s ring --links 40 -f csv >"$tmp/l.csv" 2>"$tmp/err" ||
  bad "--links csv: $(cat "$tmp/err")"
sed -n '/^strategy,nodes,ppn,ranks,link,/,$p' "$tmp/l.csv" >"$tmp/links.csv"
bytes() { awk -F, -v l="$1" '$5 == l { print $7 }' "$tmp/links.csv"; }
if [ -n "$(bytes 'leaf-up 0-0')" ] && [ "$(bytes 'leaf-up 0-0')" = "$(bytes 'node 3 nic-up 0')" ] &&
   [ "$(bytes 'leaf-down 1-0')" = "$(bytes 'node 3 nic-up 0')" ] &&
   [ "$(bytes 'leaf-up 1-0')" = "$(bytes 'node 7 nic-up 0')" ] &&
   [ "$(bytes 'leaf-down 0-0')" = "$(bytes 'node 7 nic-up 0')" ] &&
   [ "$(grep -c ',leaf-' "$tmp/links.csv")" -eq 4 ]
then ok "--links: cross-leaf bytes on the routed spine only"
else bad "--links: leaf links $(grep -E 'leaf-|nic-up' "$tmp/links.csv")"; fi
# busiest first, every share of the iteration in (0, 1]
awk -F, 'NR > 1 { if ($8 > prev && NR > 2 || $9 <= 0 || $9 > 1) bad = 1; prev = $8 }
         END { exit bad || NR < 2 }' "$tmp/links.csv" &&
  ok "--links: sorted by busy time, utilisation in (0, 1]" || bad "--links order: $(cat "$tmp/links.csv")"

# The table: a section with exactly N rows; JSON: N entries per result.
"$dtsim" -t "$tmp/ft.yaml" -m mlp-fmnist -s ring --links 3 >"$tmp/l.txt" 2>&1
rows=$(sed -n '/^Busiest links of ring on 8 ranks/,$p' "$tmp/l.txt" | grep -c ' nic-\| leaf-\| rank ')
[ "$rows" -eq 3 ] && ok "--links 3: three rows" || bad "--links 3: $(cat "$tmp/l.txt")"
"$dtsim" -t "$tmp/ft.yaml" -m mlp-fmnist -s ring,recursive-doubling --links=2 -f json >"$tmp/l.json"
if command -v python3 >/dev/null; then
  python3 -c "import json,sys; d=json.load(open(sys.argv[1]))
assert all(len(r['links']['busiest']) == 2 and r['links']['used'] <= r['links']['links'] for r in d['results'])" \
    "$tmp/l.json" && ok "--links json" || bad "--links json: $(cat "$tmp/l.json")"
fi

# Bad --links: the flag's name and exit 2.
expect_error "--links 0" "--links" "$dtsim" -t "$tmp/ft.yaml" -m mlp-fmnist --links 0
expect_error "--links=x" "--links" "$dtsim" -t "$tmp/ft.yaml" -m mlp-fmnist --links=x
expect_error "--links with --sweep" "--links" "$dtsim" -t 2n4p --links --sweep nodes=1,2
expect_error "--estimate with --links" "--estimate" "$dtsim" -t 2n4p --links --estimate

# --estimate: the forecast counts the flows a ring starts exactly (112 on 2n4p: 2 x 7 rounds
# x 8 ranks), simulates nothing and warns on small runs never.
"$dtsim" -t 2n4p -m mlp-fmnist -s ring --estimate >"$tmp/e.txt" 2>"$tmp/e.err"
flows=$("$dtsim" -t 2n4p -m mlp-fmnist -s ring -f csv | awk -F, 'NR == 2 { print $26 }')
if grep -q "^ring on 2n4p (8 ranks): about $flows flows" "$tmp/e.txt" && [ "$flows" = 112 ] &&
   [ ! -s "$tmp/e.err" ]
then ok "--estimate: ring flows as simulated, no warning"
else bad "--estimate small: $(cat "$tmp/e.txt" "$tmp/e.err") (simulated $flows flows)"; fi
"$dtsim" -t 2n4p -m mlp-fmnist >/dev/null 2>"$tmp/run.err"
grep -q warning "$tmp/run.err" && bad "a small run warns: $(cat "$tmp/run.err")" ||
  ok "no warning before a small run"
# 8,192 ranks in one ring: 2 x 8191 x 8192 = 134 million flows, over a minute.
"$dtsim" -t h100-128n-fattree -m mlp-fmnist --sweep nodes=1024 ppn=8 -s ring --estimate \
  >"$tmp/big.txt" 2>"$tmp/big.err"
grep -q "warning: simulating ring on 8192 ranks may take about [0-9]* s" "$tmp/big.err" &&
  grep -q "1.34e+08 flows" "$tmp/big.err" && ok "--estimate: a long run warns" ||
  bad "--estimate large: $(cat "$tmp/big.txt" "$tmp/big.err")"

finish
