#!/bin/sh
# One script behind the README's two commands, for a fresh Debian 12 machine (as root):
#   ./setup.sh run    install what is missing, build, run dtsim on the default topology
#   ./setup.sh test   install what is missing, build, run `make check` and `make distcheck`
#                     (`distcheck-short`: the tarball's make check without the long tests),
#                     then `make check` again under AddressSanitizer + UndefinedBehaviorSanitizer,
#                     then each fuzz harness for 15 s (`make fuzz`, clang's libFuzzer)
# Builds live in _build/ and _build-san/ (out of tree), so both commands can run in turn.
set -eu
mode=${1:-run}
case $mode in run|test) ;; *) echo "usage: $0 run|test" >&2; exit 2 ;; esac
cd "$(dirname "$0")"
top=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)

# Debian packages the build, the tests and the default data need.
pkgs="build-essential autoconf automake libtool pkg-config libyaml-dev libgsl-dev
      libopenblas-dev mpich libmpich-dev libcmocka-dev zlib1g-dev libhwloc-dev gnuplot-nox
      dataset-fashion-mnist iproute2 clang libclang-rt-dev time"
missing=
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing missing Debian packages:$missing"
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

[ -x configure ] || autoreconf -fi

build() { # dir, configure flags...
  dir=$1; shift
  mkdir -p "$dir"
  if [ ! -f "$dir/Makefile" ]; then (cd "$dir" && "$top/configure" -q "$@"); fi
  make -C "$dir" -j"$jobs"
}

build _build
if [ "$mode" = run ]; then
  exec _build/dtsim --topology topologies/2n4p.yaml
fi

# MPICH's UCX transport keeps memory the leak checker cannot see freed at exit.
export LSAN_OPTIONS="suppressions=$top/tests/lsan.supp:print_suppressions=0"
make -C _build -j"$jobs" check || { cat _build/test-suite.log; exit 1; }
# The tarball builds, installs, passes its tests and uninstalls cleanly (its make check leaves
# out the long tests, which the two make checks here run: Makefile.am, distcheck-short); -j
# reaches the tarball's build and make check through make's job server.
make -C _build -j"$jobs" distcheck-short
build _build-san --enable-asan --enable-ubsan
# The programs that start MPI unwind every allocation the slow way (exec/san_mpi.c), which lets
# the suppressions match leaks inside MPICH's UCX modules; the others keep the fast unwinder.
make -C _build-san -j"$jobs" check || { cat _build-san/test-suite.log; exit 1; }
# Fuzzing (README, "Fuzzing"): each libFuzzer harness 15 s under ASan+UBSan, with libFuzzer's
# own sanitizer options (none of ASAN_OPTIONS from the caller's environment); -j runs as many
# harnesses at a time, each for its 15 s.
ASAN_OPTIONS= make -C _build -j"$jobs" fuzz FUZZ_SECONDS=15
