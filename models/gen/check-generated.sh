#!/bin/sh
# Checks that the committed models/*.yaml written by models/gen/zoo.py are up to date:
# regenerates them into a scratch folder and compares. Skips (77) without python3.
srcdir=${top_srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
python3 "$srcdir/models/gen/zoo.py" "$tmp" || { echo "FAIL: zoo.py failed"; exit 1; }
status=0
for f in "$tmp"/*.yaml; do
    name=$(basename "$f")
    if ! cmp -s "$f" "$srcdir/models/$name"; then
        echo "FAIL: models/$name differs from what models/gen/zoo.py writes:"
        diff -u "$srcdir/models/$name" "$f" | head -20
        status=1
    fi
done
[ $status -eq 0 ] && echo "PASS: $(ls "$tmp" | wc -l) generated models are up to date"
exit $status
