#!/bin/sh
# Every option that `PROGRAM --help` lists is documented in the OPTIONS section of
# man/PROGRAM.1 (issue 15: dtsim.1 lacked --calibration, --help and --version). The options
# are the help lines that start (after blanks) with "-x, --name" or "--name"; the man page has
# each, as troff writes it ("\-\-name", "\-x"), on a .B or .BR line of that section (where
# an option's entry is named).
# Run by make check; by hand: top_builddir=$PWD/_build top_srcdir=$PWD sh tests/test_man_flags.sh
set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-$top_srcdir/_build}
fails=0
for prog in dtsim dtexec dtvalidate; do
  man="$top_srcdir/man/$prog.1"
  entries=$(awk '/^\.SH / { in_opts = ($0 ~ /^\.SH OPTIONS/) } in_opts && /^\.BR? /' "$man")
  if ! help=$("$top_builddir/$prog" --help 2>&1); then
    echo "FAIL: $prog --help failed: $help"; fails=$((fails + 1)); continue
  fi
  flags=$(printf '%s\n' "$help" |
    sed -n 's/^ *\(-[A-Za-z], \)\{0,1\}\(--[a-z][a-z0-9-]*\).*/\1 \2/p' | tr -d , |
    tr ' ' '\n' | grep . | sort -u)
  n=0 missing=
  for f in $flags; do
    n=$((n + 1))
    troff=$(printf '%s\n' "$f" | sed 's/-/\\-/g')
    printf '%s\n' "$entries" | grep -qF -- "$troff" || missing="$missing $f"
  done
  if [ "$n" -lt 5 ]; then
    echo "FAIL: $prog: only $n options found in --help"; fails=$((fails + 1))
  elif [ -n "$missing" ]; then
    echo "FAIL: man/$prog.1 lacks$missing"; fails=$((fails + 1))
  else
    echo "ok: the $n options of $prog --help are in man/$prog.1"
  fi
done
echo "$fails failed"
[ "$fails" -eq 0 ]
