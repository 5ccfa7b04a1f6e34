#!/bin/sh
# dtsim at scale: lazy and eager expansion of collectives give the same simulation, byte for
# byte, on every zoo topology and every strategy that fits it.
. "${top_srcdir:=..}/tests/testlib.sh"
dtsim="$top_builddir/dtsim"
cd "$top_srcdir"

# Every strategy that fits (the default), and gradient buckets (nonblocking collectives).
for t in topologies/*.yaml; do
  name=$(basename "$t" .yaml)
  for extra in "" "--bucket 64KiB"; do
    # shellcheck disable=SC2086 # $extra is two words or none
    if "$dtsim" -t "$t" --dataset-size 2000000 $extra -f csv >"$tmp/lazy" 2>"$tmp/lazy.err" &&
       "$dtsim" -t "$t" --dataset-size 2000000 $extra -f csv --expansion eager >"$tmp/eager" \
         2>"$tmp/eager.err"; then
      if [ -s "$tmp/lazy" ] && cmp -s "$tmp/lazy" "$tmp/eager" &&
         cmp -s "$tmp/lazy.err" "$tmp/eager.err"; then
        ok "lazy = eager: $name $extra ($(($(wc -l <"$tmp/lazy") - 1)) strategies)"
      else
        bad "lazy and eager differ: $name $extra"
      fi
    else
      bad "$name $extra: $(cat "$tmp/lazy.err" "$tmp/eager.err")"
    fi
  done
done

# Bad values of the new flags: the flag's name, exit 2.
expect_error "--expansion bad" "--expansion" "$dtsim" -t 2n2p --expansion sometimes

finish
