# Sourced after testlib.sh by the tests that hold dtexec runs to a reference run: the runner,
# the weight comparisons (tests/params_diff within TOL) and the check that every rank
# allocated its plan's buffer table. The caller sets $common (dtexec flags of every run),
# usually "$sgd_flags --max-iters N".
dtexec="$top_builddir/dtexec"
diff="$top_builddir/tests/params_diff"
: "${TOL:=1e-5}"
# The equivalence runs' flags: synthetic data every rank reads whole, plain SGD at a fixed
# learning rate (no scaling with the ranks), one seed, replicas checked bit-identical.
sgd_flags="--synthetic 512 --read-whole --optimizer sgd --lr 0.1 --no-lr-scale --seed 7
           --quiet --check-sync"

# exec_run NAME NPROCS ARGS...: dtexec under mpiexec with $common; parameters dumped to
# $tmp/NAME.bin, the record to $tmp/NAME.jsonl (a new one: dtexec appends), output to
# $tmp/NAME.out; its exit status.
exec_run() {
  name=$1 np=$2; shift 2
  rm -f "$tmp/$name.jsonl"
  # shellcheck disable=SC2086
  timeout 120 $MPIEXEC -n "$np" "$dtexec" $common --dump-params "$tmp/$name.bin" \
    --record "$tmp/$name.jsonl" "$@" >"$tmp/$name.out" 2>&1
}

# exec_ok NAME NPROCS ARGS...: exec_run, a failure counted with its output.
exec_ok() {
  exec_run "$@" || { bad "$1: exit $? $(cat "$tmp/$1.out")"; return 1; }
}

# weights_same REF NAME: NAME's weights equal REF's within TOL.
weights_same() {
  if "$diff" "$tmp/$1.bin" "$tmp/$2.bin" "$TOL" >"$tmp/$2.diff"; then ok "$2: $(cat "$tmp/$2.diff")"
  else bad "$2: $(cat "$tmp/$2.diff")"; fi
}

# weights_differ REF NAME: the control NAME must NOT reach REF's weights.
weights_differ() {
  if "$diff" "$tmp/$1.bin" "$tmp/$2.bin" "$TOL" >"$tmp/$2.diff"; then
    bad "control $2 reached the reference weights: $(cat "$tmp/$2.diff")"
  else ok "control $2 differs: $(head -c 120 "$tmp/$2.diff")"; fi
}

# alloc_is_plan NAME NPROCS ARGS...: the bytes each rank allocated in run NAME (its record)
# equal its plan's buffer table (--dump-plan of the same flags).
alloc_is_plan() {
  name=$1 np=$2; shift 2
  # shellcheck disable=SC2086
  plan=$(timeout 60 $MPIEXEC -n "$np" "$dtexec" $common "$@" --dump-plan 2>/dev/null |
         sed -n 's/^rank [0-9]*:.* \([0-9][0-9]*\) bytes.*/\1/p' | tr '\n' ' ')
  got=$(sed -n 's/.*"alloc_bytes": \[\([^]]*\)\].*/\1/p' "$tmp/$name.jsonl" | tr -d ',')
  # shellcheck disable=SC2086
  if [ -n "$plan" ] && [ "$(echo $plan)" = "$(echo $got)" ]; then ok "memory $name: $plan"
  else bad "memory $name: plan [$plan] allocated [$got]"; fi
}

# mem NAME NPROCS ARGS...: a run of its own, then alloc_is_plan.
mem() {
  exec_run "$@" || { bad "memory $1: run failed: $(cat "$tmp/$1.out")"; return; }
  alloc_is_plan "$@"
}

# same REF NAME NPROCS ARGS...: NAME's weights equal REF's within TOL and every rank allocated
# its plan's buffer table; differs REF NAME NPROCS ARGS...: the control NAME must not reach
# REF's weights.
same() {
  ref=$1; shift
  exec_ok "$@" || return
  weights_same "$ref" "$1"
  alloc_is_plan "$@"
}
differs() {
  ref=$1; shift
  exec_ok "$@" && weights_differ "$ref" "$1"
}
