#!/bin/sh
# dtsim at scale: lazy and eager expansion of collectives give the same simulation, byte for
# byte, on every zoo topology and every strategy that fits it.
. "${top_srcdir:=..}/tests/testlib.sh"
dtsim="$top_builddir/dtsim"
cd "$top_srcdir"

# Every strategy that fits (the default), and gradient buckets (nonblocking collectives).
# Without buckets on h100-128n-fattree's 1,024 ranks, every strategy but ps-sharded: its
# reduce-scatter and allgather are direct, one round of p^2 flows, which lazy and eager expand
# alike, and its 2 runs there took 16 of this test's 34 CPU s; every smaller topology has it.
# With buckets there, 1 MiB ones: cnn690k's 2.76 MB in 3 buckets (dense_2 to dense, conv2d_2,
# the rest) still overlap, as 64 KiB ones do, and the 2 runs cost 8.0 CPU s, not 16.0 (nearly
# all of it the 1,024-rank ring's, once per bucket); every smaller topology keeps 64 KiB.
but_sharded=$("$dtsim" --help | sed -n '/^Strategies:/,$s/^  \([a-z0-9-]*\) .*/\1/p' |
              grep -v -x -e sequential -e ps-sharded | paste -sd, -)
case ,$but_sharded, in
  *,ring,*) ;;
  *) bad "the strategies of dtsim --help: '$but_sharded'" ;;
esac
for t in topologies/*.yaml; do
  name=$(basename "$t" .yaml)
  # 16,384 ranks: every strategy twice is hours (dtsim --estimate: a flat ring alone 27 min)
  [ "$name" = h100-superpod-2048n ] && continue
  for extra in "" "--bucket 64KiB"; do
    only=""
    [ "$name" = h100-128n-fattree ] && [ -z "$extra" ] && only="-s $but_sharded"
    [ "$name" = h100-128n-fattree ] && [ -n "$extra" ] && extra="--bucket 1MiB"
    # shellcheck disable=SC2086 # $extra and $only are two words or none
    if "$dtsim" -t "$t" --dataset-size 2000000 $only $extra -f csv >"$tmp/lazy" \
         2>"$tmp/lazy.err" &&
       "$dtsim" -t "$t" --dataset-size 2000000 $only $extra -f csv --expansion eager \
         >"$tmp/eager" 2>"$tmp/eager.err"; then
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

# --trace-ranks: rank tracks of the listed ranks only (the whole trace holds all 8).
"$dtsim" -t 2n4p -s ring --trace "$tmp/all.json" -o /dev/null &&
  "$dtsim" -t 2n4p -s ring --trace "$tmp/some.json" --trace-ranks 1,4-5 -o /dev/null ||
  bad "--trace-ranks run failed"
tracks() { # the rank tracks named in a trace, one line
  grep -o '"name": "rank [0-9]*"' "$1" | sed 's/.*rank //; s/"//' | sort -n | uniq | tr '\n' ' '
}
[ "$(tracks "$tmp/all.json")" = "0 1 2 3 4 5 6 7 " ] && ok "trace: every rank" ||
  bad "trace: ranks $(tracks "$tmp/all.json")"
[ "$(tracks "$tmp/some.json")" = "1 4 5 " ] && ok "--trace-ranks 1,4-5" ||
  bad "--trace-ranks 1,4-5: ranks $(tracks "$tmp/some.json")"
n_all=$(grep -c '"ph": "X"' "$tmp/all.json") n_some=$(grep -c '"ph": "X"' "$tmp/some.json")
[ "$n_some" -gt 0 ] && [ "$n_some" -lt "$n_all" ] && ok "--trace-ranks: $n_some of $n_all spans" ||
  bad "--trace-ranks: $n_some of $n_all spans"

# Bad values of the new flags: the flag's name, exit 2.
expect_error "--expansion bad" "--expansion" "$dtsim" -t 2n2p --expansion sometimes
expect_error "--trace-ranks syntax" "--trace-ranks: not a rank" "$dtsim" -t 2n2p --trace "$tmp/x.json" --trace-ranks 1,,2
expect_error "--trace-ranks range" "ends before it starts" "$dtsim" -t 2n2p --trace "$tmp/x.json" --trace-ranks 3-1
expect_error "--trace-ranks without --trace" "give --trace FILE too" "$dtsim" -t 2n2p --trace-ranks 1
expect_error "--trace-ranks beyond the ranks" "rank 9 is not among the 4 ranks" "$dtsim" -t 2n2p --trace "$tmp/x.json" --trace-ranks 9

finish
