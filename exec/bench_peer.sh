#!/bin/sh
# bench_peer.sh: dtexec against PyTorch on the same models, batches, threads and data, in the
# same run (`make bench-peer`, part of `make bench`).
#
# For mlp-fmnist (batch 32), cnn21k (batch 128) and cnn690k (batch 128), each at 1 thread,
# 2 threads and 2 MPI ranks of 1 thread (dtexec: mpiexec -n 2, mpi-allreduce; PyTorch: 2
# processes, DistributedDataParallel over gloo on localhost; batch per rank, as dtexec's weak
# scaling), it runs dtexec and exec/bench_torch.py alternately BENCH_REPEAT times and prints
# one row: samples/s of each (the global batch over the median iteration time, the best of
# the runs: the median and the best are what a shared machine gives reliably), their ratio
# and the target, the peak resident memory of each (the largest rank), and dtexec's GFLOP/s
# (samples/s x the forward + backward FLOPs per sample of `dtsim --summary`) against the
# machine's single-thread sgemm rate times the cores the row uses. The load average is printed
# beside each row: the figures are wall-clock times.
#
# PyTorch is configured as its CPU performance tuning guide recommends (BENCH_PEER_CONFIG=tuned,
# the default): tcmalloc in LD_PRELOAD (glibc's malloc page-faults on every step in a fresh
# process: thousands of faults per cnn690k step), the convolutional models and their input in
# channels_last, gradients dropped rather than zeroed between steps, and threads pinned:
# BENCH_PEER_CONFIG=plain runs it as before (glibc malloc, NCHW, zeroed gradients, no pinning
# on either side). tcmalloc is found with dpkg -L (Debian's libtcmalloc-minimal4, or
# libgoogle-perftools4) or named by BENCH_TCMALLOC; without it the PyTorch side runs with
# glibc's malloc and the header says so. Pinning, the same on both sides: the row's processes
# run on the first 1 (1t) or 2 (2t, 2r) CPUs this shell may use (taskset), each rank on its own
# block of them (dtexec --bind, bench_torch.py --bind), and PyTorch's 2 OpenMP threads of a 2t
# row one per core (OMP_PROC_BIND=close, OMP_PLACES=cores). The BLAS PyTorch calls (Debian's
# libblas.so.3, through the alternatives system: OpenBLAS here) and the allocator it ran with
# are read from inside its process and printed after the table.
#
# Timing: both sides time each iteration on its own (the batch gathered from memory, forward,
# backward, the optimizer step) and take the median; PyTorch runs a tenth of the iterations
# (2 to 50) untimed first, dtexec's median counts all of its iterations, its first ones too.
#
# Threads: T = 1 or 2 per process on both sides, in one pool each with OpenBLAS single-threaded
# inside it. dtexec: --threads T and OPENBLAS_NUM_THREADS=T (its kernels run T threads and
# call OpenBLAS on one); PyTorch: torch.set_num_threads(T), OMP_NUM_THREADS=T and
# OPENBLAS_NUM_THREADS=1 (PyTorch threads its ops with OpenMP; OpenBLAS's own pool beside it
# fights it: measured here at 2 threads, cnn21k 6400-7800 samples/s with OPENBLAS_NUM_THREADS=2
# against 9800-10400 with 1). OMP_NUM_THREADS=T on both sides. Both hold the training set in
# memory: Fashion-MNIST from BENCH_DATA when its IDX files are there, else 60000 synthetic
# samples.
#
# Environment (make sets the paths): DTEXEC, DTSIM, BENCH_SGEMM, MODELS (the models/ folder),
# TORCH_BENCH (bench_torch.py), MPIEXEC, PYTHON (default /usr/bin/python3: Debian's
# python3-torch), BENCH_DATA, BENCH_REPEAT (default 3), BENCH_SCALE (iterations multiplier,
# default 1), BENCH_MODELS (default "mlp-fmnist cnn21k cnn690k"), BENCH_CONFIGS (default
# "1t 2t 2r"), BENCH_PEER_CONFIG (tuned or plain, default tuned), BENCH_TCMALLOC (the
# tcmalloc library to preload; default: found with dpkg -L). Both sides inherit the rest of
# the environment, OPENBLAS_CORETYPE included (it picks OpenBLAS's kernels for both: the
# header says which; Haswell's are AVX2, SkylakeX's and Cooperlake's AVX-512).
set -u

DTEXEC=${DTEXEC:-./dtexec}
DTSIM=${DTSIM:-./dtsim}
BENCH_SGEMM=${BENCH_SGEMM:-./exec/bench_sgemm}
MODELS=${MODELS:-models}
TORCH_BENCH=${TORCH_BENCH:-exec/bench_torch.py}
MPIEXEC=${MPIEXEC:-mpiexec}
PYTHON=${PYTHON:-/usr/bin/python3}
BENCH_DATA=${BENCH_DATA:-/usr/share/datasets/fashion-mnist}
BENCH_REPEAT=${BENCH_REPEAT:-3}
BENCH_SCALE=${BENCH_SCALE:-1}
BENCH_MODELS=${BENCH_MODELS:-mlp-fmnist cnn21k cnn690k}
BENCH_CONFIGS=${BENCH_CONFIGS:-1t 2t 2r}
BENCH_PEER_CONFIG=${BENCH_PEER_CONFIG:-tuned}
case $BENCH_PEER_CONFIG in
tuned | plain) ;;
*) echo "bench-peer: BENCH_PEER_CONFIG: '$BENCH_PEER_CONFIG' is neither tuned nor plain" >&2; exit 2 ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench_peer.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# The first N CPUs this process may use, as a taskset list ("0,1").
first_cpus() {
    sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | awk -F, -v n="$1" '{
        for (i = 1; i <= NF; i++) {
            split($i, r, "-"); hi = (2 in r) ? r[2] : r[1]
            for (c = r[1] + 0; c <= hi + 0 && k < n; c++) out = out (k++ ? "," : "") c
        } } END { print out }'
}

# tcmalloc, as Debian installs it (the minimal library: no profiler).
find_tcmalloc() {
    dpkg -L libtcmalloc-minimal4 libgoogle-perftools4 2>/dev/null |
        grep -E '/libtcmalloc(_minimal)?\.so\.[0-9]+$' | sort -r | head -n 1
}

# The pinning prefix of a row: taskset to its CPUs, or nothing (plain).
pin_for() { # config
    [ "$BENCH_PEER_CONFIG" = tuned ] || return 0
    case $1 in 1t) n=1 ;; *) n=2 ;; esac
    cpus=$(first_cpus "$n")
    [ -n "$cpus" ] && echo "taskset -c $cpus"
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "? ? ?"; }

# Field of a key=value line, or of a JSON line ("key": value).
kv() { tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
json() { sed -n "s/.*\"$1\": \([-0-9.eE+]*\).*/\1/p" | head -n 1; }

# Forward + backward FLOPs per sample from dtsim's summary ("Forward FLOPs per sample: 980
# kFLOP"; three significant digits).
flops_per_sample() {
    "$DTSIM" --model "$MODELS/$1.yaml" --summary 2>/dev/null | awk '
        function unit(u) { return u ~ /^G/ ? 1e9 : u ~ /^M/ ? 1e6 : u ~ /^k/ ? 1e3 : 1 }
        /^(Forward|Backward) FLOPs per sample:/ { s += $5 * unit($6); n++ }
        END { if (n == 2) printf "%.6g\n", s; else print "nan" }'
}

# Iterations per run: a few seconds each on one core of this class of machine.
iters_for() {
    case $1 in
    mlp-fmnist) n=1500 ;;
    cnn21k) n=300 ;;
    *) n=40 ;;
    esac
    awk -v n="$n" -v s="$BENCH_SCALE" 'BEGIN { n = int(n * s + 0.5); if (n < 5) n = 5; print n }'
}

# dtexec once: prints "samples_per_s peak_mb", or "- -" when the run failed.
run_dtexec() { # model batch config iters
    rec=$tmp/rec.json
    rm -f "$rec"
    if [ -f "$BENCH_DATA/train-images-idx3-ubyte.gz" ] || [ -f "$BENCH_DATA/train-images-idx3-ubyte" ]
    then data="--data $BENCH_DATA"
    else data="--synthetic 60000"
    fi
    pin=$(pin_for "$3") bind=
    [ -n "$pin" ] && bind=--bind
    set -- "$MODELS/$1.yaml" "$2" "$3" "$4"
    case $3 in
    1t) OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $pin "$DTEXEC" --model "$1" --batch "$2" \
            --max-iters "$4" --threads 1 $data --record "$rec" -q $bind ;;
    2t) OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 $pin "$DTEXEC" --model "$1" --batch "$2" \
            --max-iters "$4" --threads 2 $data --record "$rec" -q $bind ;;
    2r) OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $pin $MPIEXEC -n 2 "$DTEXEC" --model "$1" \
            --batch "$2" --max-iters "$4" --threads 1 $data --record "$rec" -q $bind ;;
    esac >"$tmp/dtexec.out" 2>&1
    if [ -s "$rec" ]; then
        gb=$(json global_batch <"$rec")
        med=$(json update_per_batch_s <"$rec")
        rss=$(json peak_rss_bytes <"$rec")
        awk -v b="$gb" -v m="$med" -v r="$rss" 'BEGIN { printf "%.1f %.0f\n", b / m, r / 1048576 }'
    else
        sed 's/^/  dtexec: /' "$tmp/dtexec.out" | tail -n 3 >&2
        echo "- -"
    fi
}

# PyTorch once: the same output.
run_torch() { # model batch config iters
    case $3 in
    1t) t=1 r=1 ;;
    2t) t=2 r=1 ;;
    2r) t=1 r=2 ;;
    esac
    warm=$(awk -v n="$4" 'BEGIN { w = int(n / 10); if (w < 2) w = 2; if (w > 50) w = 50; print w }')
    pin=$(pin_for "$3")
    if [ "$BENCH_PEER_CONFIG" = tuned ]; then
        how=--bind preload=$tcmalloc omp=
        # OpenMP's threads one per core inside the row's CPUs (one thread has nothing to place)
        [ "$t" -gt 1 ] && omp="OMP_PROC_BIND=close OMP_PLACES=cores"
    else
        how="--memory-format contiguous --zero-grads" preload= omp=
    fi
    # a time limit: gloo's teardown has been seen to hang after the figures (timeout ends the
    # ranks too, and the figures printed still count)
    $pin timeout 600 env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS="$t" LD_PRELOAD="$preload" $omp \
        "$PYTHON" "$TORCH_BENCH" --model "$1" --batch "$2" --threads "$t" --ranks "$r" \
        --iters "$4" --warmup "$warm" --data "$BENCH_DATA" $how >"$tmp/torch.out" 2>&1
    status=$?
    line=$(grep '^model=' "$tmp/torch.out" | tail -n 1)
    if [ -n "$line" ]; then
        [ $status = 0 ] || echo "  torch: exit status $status after its figures" >&2
        echo "$line" >>"$tmp/torch.all"
        echo "$(echo "$line" | kv samples_s) $(echo "$line" | kv peak_rss_mb | cut -d. -f1)"
    else
        sed 's/^/  torch: /' "$tmp/torch.out" | tail -n 3 >&2
        echo "- -"
    fi
}

# The larger of two figures ("-" loses).
best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-") print b; else if (b == "-") print a;
                                          else print (a + 0 >= b + 0) ? a : b }'; }

torch_ok=yes
if ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
    torch_ok=no
    echo "bench-peer: $PYTHON cannot import torch (Debian: apt-get install python3-torch);" \
        "PyTorch columns are empty"
fi
tcmalloc=
if [ "$BENCH_PEER_CONFIG" = tuned ]; then
    tcmalloc=${BENCH_TCMALLOC:-$(find_tcmalloc)}
    if [ -z "$tcmalloc" ] || [ ! -f "$tcmalloc" ]; then
        echo "bench-peer: no tcmalloc${tcmalloc:+ at $tcmalloc} (Debian: apt-get install" \
            "libtcmalloc-minimal4); PyTorch runs with glibc's malloc"
        tcmalloc=
    fi
fi
sgemm=$("$BENCH_SGEMM" 1024 1 2>/dev/null | kv gflops)
[ -n "$sgemm" ] || sgemm=nan
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
torch_v=$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)
echo "bench-peer: dtexec against PyTorch $torch_v on ${cpu:-this CPU}, $(nproc 2>/dev/null || echo '?') cores"
echo "bench-peer: single-thread sgemm (OpenBLAS, n=1024): $sgemm GFLOP/s; load average at start: $(loadavg)"
echo "bench-peer: OpenBLAS's kernels on both sides: ${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE=}${OPENBLAS_CORETYPE:-its own choice for this CPU}${OPENBLAS_CORETYPE:+ from the environment} (blas= below names them)"
echo "bench-peer: samples/s = global batch / median iteration, best of $BENCH_REPEAT runs alternating"
echo "            dtexec and PyTorch; 2r = 2 ranks x 1 thread (PyTorch: DDP, gloo); MB = peak RSS"
if [ "$BENCH_PEER_CONFIG" = tuned ]; then
    echo "bench-peer: PyTorch tuned: ${tcmalloc:-glibc malloc (no tcmalloc)} preloaded, CNNs in" \
        "channels_last, gradients set to None; both sides pinned (taskset, --bind)"
else
    echo "bench-peer: PyTorch plain (BENCH_PEER_CONFIG=plain): glibc malloc, NCHW, zeroed" \
        "gradients; neither side pinned"
fi
echo
printf "%-10s %5s %-6s %10s %10s %6s %6s %7s %7s %7s %6s  %s\n" model batch config dtexec/s \
    torch/s ratio target dt_MB torch_MB dt_GF/s sgemm% "load (1 5 15 min)"
missed=0
scale_1t=- scale_2r=- tscale_1t=- tscale_2r=-
for model in $BENCH_MODELS; do
    case $model in mlp-fmnist) batch=32 ;; *) batch=128 ;; esac
    case $model in cnn690k) target=1.1 ;; *) target=2.0 ;; esac
    fps=$(flops_per_sample "$model")
    iters=$(iters_for "$model")
    for cfg in $BENCH_CONFIGS; do
        case $cfg in 1t) cores=1 ;; *) cores=2 ;; esac
        d_best=- t_best=- d_mb=- t_mb=-
        rep=0
        while [ "$rep" -lt "$BENCH_REPEAT" ]; do
            set -- $(run_dtexec "$model" "$batch" "$cfg" "$iters")
            if [ "$1" != - ] && [ "$(best "$d_best" "$1")" = "$1" ]; then d_best=$1 d_mb=$2; fi
            if [ $torch_ok = yes ]; then
                set -- $(run_torch "$model" "$batch" "$cfg" "$iters")
                if [ "$1" != - ] && [ "$(best "$t_best" "$1")" = "$1" ]; then t_best=$1 t_mb=$2; fi
            fi
            rep=$((rep + 1))
        done
        row=$(awk -v d="$d_best" -v t="$t_best" -v tg="$target" -v f="$fps" -v s="$sgemm" \
            -v c="$cores" 'BEGIN {
                r = (d != "-" && t != "-" && t > 0) ? sprintf("%.2f", d / t) : "-";
                g = (d != "-" && f != "nan") ? d * f / 1e9 : -1;
                gs = g >= 0 ? sprintf("%.1f", g) : "-";
                p = (g >= 0 && s != "nan" && s > 0) ? sprintf("%.0f%%", 100 * g / (s * c)) : "-";
                ok = (r == "-") ? "" : ((r + 0 >= tg) ? "" : " MISS");
                printf "%s %s %s%s\n", r, gs, p, ok }')
        set -- $row
        printf "%-10s %5s %-6s %10s %10s %6s %6s %7s %7s %7s %6s  %s%s\n" "$model" "$batch" "$cfg" \
            "$d_best" "$t_best" "$1" ">=$target" "$d_mb" "$t_mb" "$2" "$3" "$(loadavg)" "${4:+ $4}"
        [ "${4:-}" = MISS ] && missed=$((missed + 1))
        if [ "$model" = cnn690k ]; then
            case $cfg in
            1t) scale_1t=$d_best tscale_1t=$t_best ;;
            2r) scale_2r=$d_best tscale_2r=$t_best ;;
            esac
        fi
    done
done
echo
if [ "$scale_1t" != - ] && [ "$scale_2r" != - ]; then
    awk -v a="$scale_1t" -v b="$scale_2r" -v ta="$tscale_1t" -v tb="$tscale_2r" 'BEGIN {
        s = b / a;
        ts = (ta != "-" && tb != "-") ? sprintf("%.2fx", tb / ta) : "-";
        miss = (s >= 1.85) ? "" : ", MISS";
        printf "bench-peer: cnn690k 2 ranks / 1 rank: dtexec %.2fx (target >= 1.85%s), PyTorch %s\n",
               s, miss, ts }'
fi
if [ -s "$tmp/torch.all" ]; then # what PyTorch's runs saw inside their processes
    awk '{ for (i = 1; i <= NF; i++) { e = index($i, "="); f[substr($i, 1, e - 1)] = substr($i, e + 1) }
           for (k in f) if (k ~ /^(torch|malloc|grads|blas|blas_threads)$/) seen[k "=" f[k]] = 1
           seen["format[" f["model"] "]=" f["format"]] = 1 }
         END { for (s in seen) print s }' "$tmp/torch.all" | sort |
        { printf "bench-peer: PyTorch's runs recorded: "; paste -sd ' ' -; }
fi
echo "bench-peer: load average at end: $(loadavg); rows below target: $missed"
