#!/bin/sh
# Benchmark: dtsim --recommend for GPT-3 175B on h100-128n-fattree (1,024 H100), the issue's
# bench (target: under 10 s of CPU). Global batch 1536 sequences (Brown et al. 2020, Table 2.1:
# 3.2M tokens of 2048). REC_MEMORY_LIMIT (default: the device's 80 GiB) sets --memory-limit.
# Prints the CPU seconds, the load average, and dtsim's counts: configurations, not
# applicable, pruned uncompiled, over the memory limit, fit, simulated (estimated).
dtsim=${1:-./dtsim}
echo "$dtsim --recommend -m gpt3-175b -t h100-128n-fattree --global-batch 1536 --top 5" \
  "${REC_MEMORY_LIMIT:+--memory-limit '$REC_MEMORY_LIMIT'}"
set -- --recommend -m gpt3-175b -t h100-128n-fattree --global-batch 1536 --top 5
[ -n "$REC_MEMORY_LIMIT" ] && set -- "$@" --memory-limit "$REC_MEMORY_LIMIT"
out=${TMPDIR:-/tmp}/bench-recommend.$$
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -f "recommend: %U s user + %S s sys CPU, %e s wall, %M KB peak" "$dtsim" "$@" \
  >"$out" 2>"$out.err"
rc=$?
tail -1 "$out.err"
grep -v "^recommend:" "$out.err" | head -5
sed -n '1,12p' "$out"
grep -A1 "^[0-9]* configurations" "$out"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$out" "$out.err"
exit $rc
