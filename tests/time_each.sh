#!/bin/sh
# Where make check's time goes (README, "What CI costs"): run as the log compiler, each test's
# CPU and wall time under /usr/bin/time go to DIR/NAME.time, e.g. in a build directory
#   make -j2 check LOG_COMPILER="sh $PWD/../tests/time_each.sh $PWD/times" \
#     SH_LOG_COMPILER="sh $PWD/../tests/time_each.sh $PWD/times /bin/bash"
#   tail -qn1 times/*.time | sort -k3 -g -r | head    # the dearest first (CPU s)
# Usage: time_each.sh DIR COMMAND... (the test is COMMAND's last word); its exit status.
dir=$1
shift
mkdir -p "$dir"
for word in "$@"; do test=$word; done
name=$(basename "$test")
/usr/bin/time -o "$dir/$name.time" -f "%e wall %U user %S sys %M KB $name" "$@"
