/* dtexec: trains a model for real under mpiexec by walking the plan that dtsim simulates.
 *
 *   mpiexec -n 2 dtexec --model cnn690k --strategy ring --batch 128 --epochs 1
 *
 * Every rank parses the same command line, loads the same model and builds the same plan;
 * every fallible step ends with an agreement (an allreduce of the status), so that a bad flag
 * or a bad file stops every rank with status 2 and one message, and no rank is left waiting.
 */
#include "config.h"

#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cpu/net.h"
#include "data.h"
#include "dt/collective.h"
#include "dt/datafile.h"
#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "dt/units.h"
#include "executor.h"
#include "exit_status.h"
#include "bind.h"
#include "checkpoint.h"
#include "cuda/cuda_kernels.h"
#include "cuda_net.h"
#include "idle.h"
#include "progress.h"
#include "record.h"
#include "watchdog.h"

/* configure may define DT_GIT_REVISION; exec/local.mk passes DTEXEC_GIT_REVISION from
 * `git describe` at build time when the source is a git checkout. */
#if defined(DT_GIT_REVISION)
#define GIT_REVISION DT_GIT_REVISION
#elif defined(DTEXEC_GIT_REVISION)
#define GIT_REVISION DTEXEC_GIT_REVISION
#else
#define GIT_REVISION "unknown"
#endif

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
#define DEFAULT_MODEL "cnn690k"

static const char *prog = "dtexec";

struct options {
    const char *model, *topology, *strategy, *data;
    const char *record, *trace, *ops_csv, *dump_params;
    const char *checkpoint, *resume; /* --checkpoint DIR, --resume DIR */
    long checkpoint_every;
    struct dt_plan_options par;   /* the parallel config, parsed by the core */
    double lr;
    bool lr_given, lr_scale;
    enum dtx_optimizer_kind optimizer;
    double momentum;
    bool momentum_given;
    enum dtk_init init;
    int epochs;
    long synthetic;
    bool read_whole;
    unsigned long long seed;
    long max_iters;
    long test_samples;      /* --test-samples: test samples evaluated (0: all), eval_range */
    int trace_iters;
    int threads;
    bool bind;
    bool quiet, check_sync, dump_plan, no_shuffle;
    int drop_op;            /* --drop-op: an op kind removed from the step programs, or -1 */
    long overflow_at;       /* --overflow-at: the step whose gradients overflow (0: none) */
#define DROP_RECOMPUTE 1000 /* --drop-op recompute: the recomputed forwards */
#define DROP_LOSS_COLL 1001 /* --drop-op loss-coll: the vocabulary-parallel loss's allreduces */
#define DROP_RECOMPUTE_GATHER 1003 /* --drop-op recompute-gather: ZeRO-3's gathers of the
                                      recomputed layers' parameters */
#define DROP_SEQ_GRADS 1002 /* --drop-op seq-grads: the sequence-parallel layers' gradient
                               allreduces over the tensor group (their region names the layer) */
    double timeout;         /* --timeout: seconds, 0 off, DTX_WATCHDOG_AUTO by default */
    bool cuda;              /* --device cuda (default cpu) */
    bool help, version;
};

/* ---- command line ---- */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: mpiexec -n P %s [OPTIONS]\n"
            "Trains a model with a distributed strategy: every rank walks its ops of the plan\n"
            "that dtsim simulates (kernels on the CPU, communication with MPI).\n"
            "\n"
            "Model and strategy:\n"
            "  -m, --model FILE         model YAML or name in models/ (default " DEFAULT_MODEL ")\n"
            "  -t, --topology FILE      topology YAML (default: derived from the MPI layout)\n"
            "      --device cpu|cuda    where the compute ops run (default cpu); cuda: one GPU\n"
            "                           per rank, fp32 dense/relu/conv2d/maxpool/flatten/\n"
            "                           softmax layers (see man dtexec)\n"
            "  -s, --strategy NAME      sequential, reduce-bcast-linear, reduce-bcast, ring,\n"
            "                           recursive-doubling, rabenseifner, hierarchical,\n"
            "                           mpi-allreduce, ps-central, ps-sharded, gpipe, naive-mp,\n"
            "                           1f1b, interleaved\n"
            "                           (default: sequential on 1 rank, mpi-allreduce on more)\n"
            "\n"
            "Parallel config (shared with dtsim; --optimizer also takes adam-torch):\n",
            prog);
    dt_parallel_usage(f);
    fprintf(f,
            "\n"
            "Training:\n"
            "      --lr X               learning rate (default 0.001 for Adam, 0.01 for SGD),\n"
            "                           x the number of ranks under weak scaling\n"
            "      --no-lr-scale        do not multiply the learning rate by the ranks\n"
            "      --momentum X         SGD momentum (default 0)\n"
            "      --init glorot|kaiming  parameter initialisation (default glorot, Keras)\n"
            "  -e, --epochs N           epochs (default 1)\n"
            "      --max-iters N        stop each epoch after N iterations (quick tests)\n"
            "      --test-samples N     evaluate N test samples only (default all): each\n"
            "                           replica the first of its part\n"
            "      --seed N             seed of initialisation, shuffling, dropout (default 1)\n"
            "      --no-shuffle         keep the file order\n"
            "      --checkpoint DIR     write a checkpoint into DIR (created if missing) every\n"
            "      --checkpoint-every N N optimizer steps; DIR keeps the newest two\n"
            "      --resume DIR         continue from DIR's newest valid checkpoint\n"
            "\n"
            "Data:\n"
            "  -d, --data DIR           MNIST/Fashion-MNIST IDX files or CIFAR-10 binary batches\n"
            "                           (default " DEFAULT_DATA "); a language model\n"
            "                           reads a text FILE as bytes\n"
            "      --synthetic N        N random training samples (and N/5 test samples) of\n"
            "                           the model's input, labelled by a random linear teacher\n"
            "                           (a language model: sequences of a random Markov chain)\n"
            "      --read-whole         every rank reads the whole set (default: its shard)\n"
            "\n"
            "Output:\n"
            "      --record FILE        append a JSON record of the run (configuration,\n"
            "                           environment, measurements)\n"
            "      --trace FILE         Chrome trace (Perfetto) of the sampled iterations\n"
            "      --ops-csv FILE       per-op timings of the sampled iterations\n"
            "      --trace-iters N      iterations sampled for --trace/--ops-csv: the N after\n"
            "                           the first of epoch 1 (default 10; 0 = all)\n"
            "      --dump-params FILE   write the final parameters (all of them, in the model's\n"
            "                           flat order, gathered from the stages) as raw float32\n"
            "      --dump-plan          print the plan and exit\n"
            "      --check-sync         check after every iteration that all ranks hold the\n"
            "                           same parameters (always checked after each epoch)\n"
            "      --threads N          BLAS threads per rank (default: the node's cores over\n"
            "                           its ranks, unless OPENBLAS_NUM_THREADS is set)\n"
            "      --bind               pin each rank to its own block of the node's CPUs\n"
            "                           (steadier timings; see man dtexec)\n"
            "      --timeout SECONDS    end the job when a rank waits this long without\n"
            "                           progress, naming the silent rank (default: 300 until\n"
            "                           the first step, then max(60, 10 x the slowest step);\n"
            "                           0 = never)\n"
            "      --drop-op zero|update|copy|coll|recompute|recompute-gather|loss-coll|\n"
            "                seq-grads\n"
            "                           testing: remove every such op from the step programs\n"
            "                           (a plan that must not train right: the tests'\n"
            "                           control; loss-coll: the allreduces of the\n"
            "                           vocabulary-parallel loss's statistics; seq-grads:\n"
            "                           the tensor group's allreduces of the sequence-\n"
            "                           parallel layers' gradients; recompute-gather: ZeRO-3's\n"
            "                           gathers of the recomputed layers' parameters)\n"
            "      --overflow-at K      testing, mixed precision: rank 0's gradients overflow\n"
            "                           at step K (the step is skipped, the loss scale halves)\n"
            "  -q, --quiet              print nothing but errors\n"
            "  -h, --help               this help\n"
            "  -V, --version            version\n");
}

/* Formats a flag error into msg; returns DT_EINPUT. */
static int bad(char *msg, size_t len, const char *flag, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(char *msg, size_t len, const char *flag, const char *fmt, ...)
{
    int n = snprintf(msg, len, "%s: ", flag);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < len)
        vsnprintf(msg + n, len - (size_t)n, fmt, ap);
    va_end(ap);
    return DT_EINPUT;
}

static int parse_long(const char *flag, const char *text, long lo, long hi, long *out, char *msg,
                      size_t len)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno == ERANGE || v < lo || v > hi)
        return bad(msg, len, flag, "expected an integer from %ld to %ld, got '%s'", lo, hi, text);
    *out = v;
    return DT_OK;
}

static int parse_int(const char *flag, const char *text, int lo, int hi, int *out, char *msg,
                     size_t len)
{
    long v;
    int rc = parse_long(flag, text, lo, hi, &v, msg, len);
    if (!rc)
        *out = (int)v;
    return rc;
}

static int parse_double(const char *flag, const char *text, double lo, double hi, bool open_lo,
                        double *out, char *msg, size_t len)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno == ERANGE || !isfinite(v) || v > hi ||
        (open_lo ? v <= lo : v < lo))
        return bad(msg, len, flag, "expected a number %s %g and at most %g, got '%s'",
                   open_lo ? "above" : "from", lo, hi, text);
    *out = v;
    return DT_OK;
}

enum {
    OPT_SCALING = 256, OPT_LR, OPT_NO_LR_SCALE, OPT_OPTIMIZER, OPT_MOMENTUM, OPT_INIT, OPT_BUCKET,
    OPT_SYNTHETIC, OPT_READ_WHOLE, OPT_SEED, OPT_MAX_ITERS, OPT_RECORD, OPT_TRACE, OPT_OPS_CSV,
    OPT_TRACE_ITERS, OPT_DUMP_PARAMS, OPT_DUMP_PLAN, OPT_CHECK_SYNC, OPT_THREADS, OPT_NO_SHUFFLE, OPT_BIND,
    OPT_DROP_OP, OPT_OVERFLOW_AT, OPT_CHECKPOINT, OPT_CHECKPOINT_EVERY, OPT_RESUME, OPT_TIMEOUT,
    OPT_DEVICE, OPT_TEST_SAMPLES
};

static int parse_options(int argc, char **argv, struct options *o, char *msg, size_t len)
{
    static const struct option own[] = {
        {"model", required_argument, NULL, 'm'},
        {"topology", required_argument, NULL, 't'},
        {"strategy", required_argument, NULL, 's'},
        {"lr", required_argument, NULL, OPT_LR},
        {"no-lr-scale", no_argument, NULL, OPT_NO_LR_SCALE},
        {"momentum", required_argument, NULL, OPT_MOMENTUM},
        {"init", required_argument, NULL, OPT_INIT},
        {"epochs", required_argument, NULL, 'e'},
        {"data", required_argument, NULL, 'd'},
        {"synthetic", required_argument, NULL, OPT_SYNTHETIC},
        {"read-whole", no_argument, NULL, OPT_READ_WHOLE},
        {"seed", required_argument, NULL, OPT_SEED},
        {"max-iters", required_argument, NULL, OPT_MAX_ITERS},
        {"test-samples", required_argument, NULL, OPT_TEST_SAMPLES},
        {"record", required_argument, NULL, OPT_RECORD},
        {"trace", required_argument, NULL, OPT_TRACE},
        {"ops-csv", required_argument, NULL, OPT_OPS_CSV},
        {"trace-iters", required_argument, NULL, OPT_TRACE_ITERS},
        {"dump-params", required_argument, NULL, OPT_DUMP_PARAMS},
        {"dump-plan", no_argument, NULL, OPT_DUMP_PLAN},
        {"check-sync", no_argument, NULL, OPT_CHECK_SYNC},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE},
        {"bind", no_argument, NULL, OPT_BIND},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"drop-op", required_argument, NULL, OPT_DROP_OP},
        {"overflow-at", required_argument, NULL, OPT_OVERFLOW_AT},
        {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
        {"checkpoint-every", required_argument, NULL, OPT_CHECKPOINT_EVERY},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"device", required_argument, NULL, OPT_DEVICE},
    };
    /* dtexec's own flags, then the parallel config's (parsed by dt_parallel_set) */
    struct option longs[64];
    const struct option *par = dt_parallel_longopts();
    if (dt_parallel_merge_longopts(own, (int)(sizeof own / sizeof own[0]), longs, 64) < 0)
        return bad(msg, len, "--help", "internal: too many options");
    struct dt_error perr;
    memset(o, 0, sizeof *o);
    dt_plan_options_init(&o->par);
    o->model = DEFAULT_MODEL;
    o->lr_scale = true;
    o->drop_op = -1;
    o->optimizer = DTX_OPT_ADAM;
    o->init = DTK_INIT_GLOROT;
    o->epochs = 1;
    o->seed = 1;
    o->trace_iters = 10;
    o->timeout = DTX_WATCHDOG_AUTO;
    opterr = 0;
    optind = 1;
    int c, rc = DT_OK;
    long lv;
    while (!rc && (c = getopt_long(argc, argv, ":m:t:s:b:e:d:qhV", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 't': o->topology = optarg; break;
        case 's': o->strategy = optarg; break;
        case 'b':
            if ((rc = dt_parallel_set(&o->par, "batch", optarg, &perr)))
                snprintf(msg, len, "%s", perr.msg);
            break;
        case OPT_LR:
            rc = parse_double("--lr", optarg, 0, 1e6, true, &o->lr, msg, len);
            o->lr_given = true;
            break;
        case OPT_NO_LR_SCALE: o->lr_scale = false; break;

        case OPT_MOMENTUM:
            rc = parse_double("--momentum", optarg, 0, 0.999999, false, &o->momentum, msg, len);
            o->momentum_given = true;
            break;
        case OPT_INIT:
            if (strcmp(optarg, "glorot") == 0)
                o->init = DTK_INIT_GLOROT;
            else if (strcmp(optarg, "kaiming") == 0)
                o->init = DTK_INIT_KAIMING;
            else
                rc = bad(msg, len, "--init", "expected glorot or kaiming, got '%s'", optarg);
            break;
        case 'e': rc = parse_int("--epochs", optarg, 1, 100000, &o->epochs, msg, len); break;
        case 'd': o->data = optarg; break;
        case OPT_SYNTHETIC:
            rc = parse_long("--synthetic", optarg, 1, 1L << 30, &o->synthetic, msg, len);
            break;
        case OPT_READ_WHOLE: o->read_whole = true; break;
        case OPT_SEED:
            rc = parse_long("--seed", optarg, 0, LONG_MAX, &lv, msg, len);
            o->seed = (unsigned long long)lv;
            break;
        case OPT_MAX_ITERS:
            rc = parse_long("--max-iters", optarg, 1, LONG_MAX, &o->max_iters, msg, len);
            break;
        case OPT_TEST_SAMPLES:
            rc = parse_long("--test-samples", optarg, 1, LONG_MAX, &o->test_samples, msg, len);
            break;
        case OPT_RECORD: o->record = optarg; break;
        case OPT_TRACE: o->trace = optarg; break;
        case OPT_OPS_CSV: o->ops_csv = optarg; break;
        case OPT_TRACE_ITERS:
            rc = parse_int("--trace-iters", optarg, 0, 1000000, &o->trace_iters, msg, len);
            break;
        case OPT_DUMP_PARAMS: o->dump_params = optarg; break;
        case OPT_DUMP_PLAN: o->dump_plan = true; break;
        case OPT_CHECK_SYNC: o->check_sync = true; break;
        case OPT_THREADS:
            rc = parse_int("--threads", optarg, 1, 1024, &o->threads, msg, len);
            break;
        case OPT_NO_SHUFFLE: o->no_shuffle = true; break;
        case OPT_BIND: o->bind = true; break;
        case OPT_DROP_OP:
            if (strcmp(optarg, "zero") == 0)
                o->drop_op = DT_OP_ZERO;
            else if (strcmp(optarg, "update") == 0)
                o->drop_op = DT_OP_UPDATE;
            else if (strcmp(optarg, "copy") == 0)
                o->drop_op = DT_OP_COPY;
            else if (strcmp(optarg, "coll") == 0)
                o->drop_op = DT_OP_COLL;
            else if (strcmp(optarg, "recompute") == 0)
                o->drop_op = DROP_RECOMPUTE;
            else if (strcmp(optarg, "recompute-gather") == 0)
                o->drop_op = DROP_RECOMPUTE_GATHER;
            else if (strcmp(optarg, "loss-coll") == 0)
                o->drop_op = DROP_LOSS_COLL;
            else if (strcmp(optarg, "seq-grads") == 0)
                o->drop_op = DROP_SEQ_GRADS;
            else
                rc = bad(msg, len, "--drop-op", "expected zero, update, copy, coll, recompute, "
                         "recompute-gather, loss-coll or seq-grads, got '%s'", optarg);
            break;
        case OPT_OVERFLOW_AT:
            rc = parse_long("--overflow-at", optarg, 1, LONG_MAX, &o->overflow_at, msg, len);
            break;
        case OPT_CHECKPOINT: o->checkpoint = optarg; break;
        case OPT_CHECKPOINT_EVERY:
            rc = parse_long("--checkpoint-every", optarg, 1, LONG_MAX, &o->checkpoint_every, msg,
                            len);
            break;
        case OPT_RESUME: o->resume = optarg; break;
        case OPT_TIMEOUT:
            rc = parse_double("--timeout", optarg, 0, 1e6, false, &o->timeout, msg, len);
            break;
        case OPT_DEVICE:
            if (strcmp(optarg, "cpu") == 0 || strcmp(optarg, "cuda") == 0)
                o->cuda = strcmp(optarg, "cuda") == 0;
            else
                rc = bad(msg, len, "--device", "expected cpu or cuda, got '%s'", optarg);
            break;
        case 'q': o->quiet = true; break;
        case 'h': o->help = true; break;
        case 'V': o->version = true; break;
        case ':':
            rc = bad(msg, len, argv[optind - 1], "this option needs a value");
            break;
        default:
            if (c >= 0x400 && c < 0x400 + 64) {
                const char *name = par[c - 0x400].name;
                if ((rc = dt_parallel_set(&o->par, name, optarg, &perr)))
                    snprintf(msg, len, "%s", perr.msg);
                else if (strcmp(name, "optimizer") == 0)
                    o->optimizer = strcmp(optarg, "adam-torch") == 0 ? DTX_OPT_ADAM_TORCH
                                   : o->par.optimizer == DT_OPTIM_ADAM ? DTX_OPT_ADAM
                                                                        : DTX_OPT_SGD;
                break;
            }
            if (optopt)
                snprintf(msg, len, "unknown option '-%c'", optopt);
            else
                snprintf(msg, len, "unknown option '%s'", argv[optind - 1]);
            rc = DT_EINPUT;
            break;
        }
    }
    if (!rc && optind < argc)
        rc = bad(msg, len, argv[optind], "unexpected argument (options start with --)");
    if (!rc && o->momentum_given && o->optimizer != DTX_OPT_SGD)
        rc = bad(msg, len, "--momentum", "applies to --optimizer sgd only");
    if (!rc && o->par.optimizer == DT_OPTIM_MOMENTUM && !o->momentum_given)
        rc = bad(msg, len, "--optimizer", "momentum needs --momentum X (dtexec's SGD momentum)");
    if (!rc && o->optimizer == DTX_OPT_SGD)
        o->par.optimizer = o->momentum > 0 ? DT_OPTIM_MOMENTUM : DT_OPTIM_SGD;
    if (!rc && !o->lr_given)
        o->lr = o->optimizer == DTX_OPT_SGD ? 0.01 : 0.001;
    bool mixed = dt_plan_mixed(o->par.precision);
    if (!rc && o->par.precision == DT_FP8)
        rc = bad(msg, len, "--precision", "fp8 is simulated only (dtsim)");
    else if (!rc && o->par.precision == DT_TF32)
        rc = bad(msg, len, "--precision", "tf32 is simulated only (dtsim); dtexec executes "
                 "fp32, bf16 and fp16");
    if (!rc && o->overflow_at && !mixed)
        rc = bad(msg, len, "--overflow-at", "needs --precision bf16 or fp16 (loss scaling)");
    if (!rc && o->synthetic && o->data)
        rc = bad(msg, len, "--synthetic", "give either --data or --synthetic, not both");
    if (!rc && o->cuda && (o->checkpoint || o->resume))
        rc = bad(msg, len, o->checkpoint ? "--checkpoint" : "--resume",
                 "--device cuda: checkpoints are not written from the GPU yet");
    if (!rc && !o->checkpoint != !o->checkpoint_every)
        rc = bad(msg, len, o->checkpoint ? "--checkpoint" : "--checkpoint-every",
                 "--checkpoint DIR and --checkpoint-every N go together");
    return rc;
}

/* ---- agreement between ranks ---- */

struct world {
    MPI_Comm comm;
    int rank, size;
    struct dtx_watchdog *wd;  /* watches the agreements and the training (NULL: --timeout 0) */
};

/* Every rank learns the worst status of all; the lowest failing rank prints its error.
 * Returns that status (0 when every rank succeeded). */
static int agree(const struct world *w, int rc, const struct dt_error *err)
{
    int worst, me = rc ? w->rank : INT_MAX, first;
    dtx_watchdog_allreduce(w->wd, &rc, &worst, 1, MPI_INT, MPI_MAX, w->comm, "an agreement");
    if (!worst)
        return 0;
    dtx_watchdog_allreduce(w->wd, &me, &first, 1, MPI_INT, MPI_MIN, w->comm, "an agreement");
    if (w->rank == first && err) {
        char who[64];
        if (w->rank > 0)
            snprintf(who, sizeof who, "%s (rank %d)", prog, w->rank);
        else
            snprintf(who, sizeof who, "%s", prog);
        dt_error_print(who, err);
    }
    return worst;
}

/* This rank's place among the ranks of its node (those sharing its memory). */
static void node_local(const struct world *w, int *local_rank, int *local_size)
{
    MPI_Comm node;
    MPI_Comm_split_type(w->comm, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, local_rank);
    MPI_Comm_size(node, local_size);
    MPI_Comm_free(&node);
}

/* ---- topology from the MPI layout ---- */

static int derive_topology(const struct world *w, struct dt_topology **out, struct dt_error *err)
{
    *out = NULL;
    int local, lrank, ppn_lo, ppn_hi, leader, nodes;
    node_local(w, &lrank, &local);
    leader = lrank == 0;
    MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, w->comm);
    MPI_Allreduce(&local, &ppn_lo, 1, MPI_INT, MPI_MIN, w->comm);
    MPI_Allreduce(&local, &ppn_hi, 1, MPI_INT, MPI_MAX, w->comm);
    struct dt_topology *det = NULL;
    int rc = dt_topology_detect(&det, err);
    if (rc)
        return rc;
    if (nodes == 1 && det->n_ranks >= w->size) {
        snprintf(det->name, sizeof det->name, "local-%dp", w->size);
        *out = det;
        return DT_OK;
    }
    if (ppn_lo != ppn_hi) {
        dt_topology_destroy(det);
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "%d nodes run %d to %d ranks each: give --topology for an uneven layout",
                       nodes, ppn_lo, ppn_hi);
    }
    /* Several nodes (or more ranks than cores): the detected device, an assumed network. */
    const struct dt_device_spec *d = &det->groups[0].device;
    char text[2048];
    snprintf(text, sizeof text,
             "name: mpi-%dn%dp\n"
             "source: derived by dtexec from the MPI layout (%d nodes x %d ranks); device from "
             "detection; intra-node and network figures are assumptions\n"
             "nodes:\n"
             "  - name: node\n"
             "    count: %d\n"
             "    devices: %d\n"
             "    device:\n"
             "      kind: cpu\n"
             "      name: %s\n"
             "      cores: 1\n"
             "      peak: {fp32: %.6g GFLOP/s}\n"
             "      memory: %.6g GiB\n"
             "      memory_bw: %.6g GB/s\n"
             "    intra: {kind: shm, bandwidth: 5 GB/s, latency: 0.5 us}\n"
             "%s",
             nodes, ppn_lo, nodes, ppn_lo, nodes, ppn_lo, d->name[0] ? d->name : "cpu",
             d->peak_flops[DT_FP32] / 1e9, d->mem_bytes / 1073741824.0, d->mem_bw_Bps / 1e9,
             nodes > 1 ? "    nic: {kind: ethernet, bandwidth: 10 Gbit/s, latency: 10 us, "
                         "count: 1}\n"
                         "network: {kind: switch, latency: 1 us}\n"
                       : "");
    dt_topology_destroy(det);
    return dt_topology_load_string("mpi-layout", text, out, err);
}

/* dtexec executes on this machine's CPU cores: a topology of GPUs would have the record
 * claim a run on devices it never touched (the CPU topologies of an emulated cluster are
 * fine: their ranks are CPU processes, as here). */
static int refuse_gpu_topology(const struct dt_topology *t, struct dt_error *err)
{
    for (int g = 0; g < t->n_groups; g++)
        if (t->groups[g].device.kind == DT_DEV_GPU)
            return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                           "--topology %s: its nodes have GPUs (%s) but dtexec runs on this "
                           "machine's CPUs; give a topology of CPU nodes (such as "
                           "topologies/localhost.yaml) or none (derived from the MPI layout)",
                           t->path, t->groups[g].device.name);
    return DT_OK;
}

/* The CPU this process runs on, for the record (whatever topology the plan was built for). */
static void detected_cpu(char *name, size_t len)
{
    struct dt_topology *det = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    snprintf(name, len, "unknown");
    if (dt_topology_detect(&det, &err) == DT_OK && det->groups[0].device.name[0])
        snprintf(name, len, "%s", det->groups[0].device.name);
    dt_topology_destroy(det);
}

/* ---- BLAS threads ---- */

static int blas_threads(const struct world *w, int requested)
{
    if (requested > 0) {
        openblas_set_num_threads(requested);
    } else if (!getenv("OPENBLAS_NUM_THREADS")) {
        int lrank, local;
        node_local(w, &lrank, &local);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int t = cores > 0 ? (int)(cores / local) : 1;
        openblas_set_num_threads(t > 0 ? t : 1);
    }
    return openblas_get_num_threads();
}

/* ---- pinning (--bind) ---- */

static int bind_rank(const struct world *w, char *cpus, size_t len, struct dt_error *err)
{
    int local, local_size;
    node_local(w, &local, &local_size);
    if (dtx_bind_local_rank(local, local_size, cpus, len) != 0)
        return dt_fail(err, DT_ESYS, NULL, 0, 0, "--bind: cannot pin rank %d to CPUs %s: %s",
                       w->rank, cpus, strerror(errno));
    return DT_OK;
}

/* Rank 0 says where every rank runs: "dtexec: pinned: rank 0 -> CPU 0, rank 1 -> CPU 1". */
static void print_binding(const struct world *w, const char *mine, bool quiet)
{
    enum { W = 64 };
    char me[W] = {0};
    snprintf(me, sizeof me, "%s", mine);
    char *all = w->rank == 0 ? calloc((size_t)w->size, W) : NULL;
    MPI_Gather(me, W, MPI_CHAR, all, W, MPI_CHAR, 0, w->comm);
    if (all && !quiet) {
        printf("%s: pinned:", prog);
        for (int r = 0; r < w->size; r++)
            printf("%s rank %d -> CPU %s", r ? "," : "", r, all + (size_t)r * W);
        printf("\n");
    }
    free(all);
}

/* ---- evaluation ---- */

/* Rows of the test set a chunk of the eval program reads. */
struct eval_loader {
    const struct dtx_data *d;
    long b0;
};

static void load_eval(void *ctx, int row0, int rows, float *x, int *y)
{
    const struct eval_loader *l = ctx;
    const struct dtx_data *d = l->d;
    long first = l->b0 + row0;
    if (x)
        memcpy(x, d->x + first * d->sample_floats, (size_t)rows * d->sample_floats * sizeof *x);
    if (y)
        memcpy(y, d->y + first * d->label_rows, (size_t)rows * d->label_rows * sizeof *y);
}

/* Whether the eval programs hold collectives (ZeRO-3's gathers): then every rank must run as
 * many chunks as the others. The same answer on every rank: it reads the whole plan. */
static bool eval_in_lockstep(const struct dt_plan *plan)
{
    for (int r = 0; r < plan->n_ranks; r++)
        for (int i = 0; i < plan->ranks[r].eval.n_ops; i++)
            if (plan->ranks[r].eval.ops[i].kind == DT_OP_COLL)
                return true;
    return false;
}

/* Samples [lo, hi) of d this rank evaluates: its replica's part of the test set (the part it
 * holds, or its chunk where every rank holds the whole set); with a bound (--test-samples;
 * 0: none) only the first of them, the replica's share of the bound, so that every replica
 * still evaluates. */
static void eval_range(const struct dtx_data *d, const struct dt_rank_plan *rp, long bound,
                       long *lo, long *hi)
{
    long first = 0, len = d->n;
    if (d->n == d->total && rp->dp_count > 1)
        dt_chunk(d->total, rp->dp_count, rp->dp_index, &first, &len);
    if (bound > 0 && bound < d->total) {
        long at, share;
        dt_chunk(bound, rp->dp_count, rp->dp_index, &at, &share);
        len = share < len ? share : len;
    }
    *lo = first;
    *hi = first + len;
}

/* The eval program (inference mode) over samples [lo, hi) of d in chunks of its rows; adds
 * the loss and correct predictions of every labelled row (on the ranks with the last layer).
 * Chunks past hi (up to `chunks`, when the ranks run in lockstep) evaluate one row of the
 * test set and count nothing. */
static int evaluate(struct dtx_exec *ex, const struct dt_rank_plan *rp, const struct dtx_data *d,
                    long lo, long hi, long chunks, struct dtx_loss *s, struct dt_error *err)
{
    for (long i = 0, b0 = lo; i < chunks || b0 < hi; i++, b0 += rp->eval_rows) {
        int nb = (int)(hi - b0 < rp->eval_rows ? hi - b0 : rp->eval_rows);
        struct eval_loader l = {d, b0 < hi ? b0 : 0};
        struct dtx_loss padding = {0, 0, 0};
        int rc = dtx_exec_eval(ex, load_eval, &l, b0 < hi ? nb : 1, b0 < hi ? s : &padding,
                               err);
        if (rc)
            return rc;
    }
    return DT_OK;
}

/* ---- the batch loader called at the LOAD op ---- */

struct loader {
    const struct dtx_sampler *sampler;
    long it;
};

static void load_batch(void *ctx, int row0, int rows, float *x, int *y)
{
    const struct loader *l = ctx;
    dtx_sampler_gather_rows(l->sampler, l->it, row0, rows, x, y);
}

/* ---- helpers ---- */

static double peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return NAN;
    return (double)ru.ru_maxrss * 1024.0; /* Linux: kilobytes */
}

static char *join_args(int argc, char **argv)
{
    size_t n = 1;
    for (int i = 0; i < argc; i++)
        n += strlen(argv[i]) + 3;
    char *s = malloc(n);
    if (!s)
        return NULL;
    s[0] = 0;
    for (int i = 0; i < argc; i++) {
        if (i)
            strcat(s, " ");
        bool quote = strpbrk(argv[i], " \t'\"") != NULL;
        if (quote)
            strcat(s, "'");
        strcat(s, argv[i]);
        if (quote)
            strcat(s, "'");
    }
    return s;
}

/* MPICH's version string is a page of "Key:\tvalue" lines: keep the version and device lines
 * (one line, tabs as spaces); other libraries: the first line. */
static void mpi_summary(char *text)
{
    char out[256] = "";
    const char *keys[] = {"Version:", "Device:"};
    for (size_t k = 0; k < 2; k++) {
        const char *at = strstr(text, keys[k]);
        if (!at)
            continue;
        /* back to the start of the line */
        while (at > text && at[-1] != '\n')
            at--;
        size_t n = strcspn(at, "\n");
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%.*s", out[0] ? ", " : "",
                 (int)n, at);
    }
    if (!out[0])
        snprintf(out, sizeof out, "%.*s", (int)strcspn(text, "\n"), text);
    for (char *c = out; *c; c++)
        if (*c == '\t')
            *c = ' ';
    strcpy(text, out);
}

static const char *optimizer_name(enum dtx_optimizer_kind k)
{
    return k == DTX_OPT_SGD ? "sgd" : k == DTX_OPT_ADAM_TORCH ? "adam-torch" : "adam";
}

static int dump_params(const char *path, const float *p, long n, struct dt_error *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return dt_fail(err, DT_ESYS, path, 0, 0, "cannot write: %s", strerror(errno));
    size_t put = fwrite(p, sizeof *p, (size_t)n, f);
    if (fclose(f) != 0 || put != (size_t)n)
        return dt_fail(err, DT_ESYS, path, 0, 0, "cannot write the parameters");
    return DT_OK;
}

/* Gathers every rank's sampled op timings to rank 0 (collective; every rank returns the same
 * status). */
static int gather_timings(const struct world *w, const struct dt_plan *plan,
                          const struct dtx_op_time *mine, int n_iters, const long *iter_index,
                          const int *epoch_of, struct dtx_timings *tm, struct dt_error *err)
{
    memset(tm, 0, sizeof *tm);
    int n_ops = plan->ranks[w->rank].n_ops;
    double bytes = (double)n_iters * n_ops * sizeof *mine;
    int *counts = NULL, *displs = NULL;
    char *all = NULL;
    int rc = bytes < INT_MAX ? DT_OK : DT_EINPUT;
    if (!rc && w->rank == 0) {
        tm->n_ranks = w->size;
        tm->n_iters = n_iters;
        tm->n_ops = malloc((size_t)w->size * sizeof *tm->n_ops);
        tm->t = calloc((size_t)w->size, sizeof *tm->t);
        tm->iter_index = malloc((size_t)(n_iters ? n_iters : 1) * sizeof *tm->iter_index);
        tm->epoch_of = malloc((size_t)(n_iters ? n_iters : 1) * sizeof *tm->epoch_of);
        counts = malloc((size_t)w->size * sizeof *counts);
        displs = malloc((size_t)w->size * sizeof *displs);
        double total = 0;
        for (int r = 0; tm->n_ops && counts && displs && r < w->size; r++) {
            tm->n_ops[r] = plan->ranks[r].n_ops;
            counts[r] = (int)((long)n_iters * tm->n_ops[r] * (long)sizeof *mine);
            displs[r] = (int)total;
            total += counts[r];
        }
        if (total > INT_MAX)
            rc = DT_EINPUT;
        else if (!(all = malloc((size_t)(total > 0 ? total : 1))) || !tm->n_ops || !tm->t ||
                 !tm->iter_index || !tm->epoch_of || !counts || !displs)
            rc = DT_ENOMEM;
        if (!rc) {
            memcpy(tm->iter_index, iter_index, (size_t)n_iters * sizeof *iter_index);
            memcpy(tm->epoch_of, epoch_of, (size_t)n_iters * sizeof *epoch_of);
        }
    }
    int worst;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, w->comm);
    if (!worst) {
        MPI_Gatherv(mine, (int)bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, w->comm);
        if (w->rank == 0) {
            for (int r = 0; r < w->size; r++)
                tm->t[r] = (struct dtx_op_time *)(all + displs[r]);
            tm->t[0] = (struct dtx_op_time *)all; /* owns the block */
            all = NULL;
        }
    }
    free(all);
    free(counts);
    free(displs);
    if (worst == DT_ENOMEM)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory for the op timings");
    if (worst)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "too many sampled iterations to gather (lower --trace-iters)");
    return DT_OK;
}

static void timings_free(struct dtx_timings *tm)
{
    if (tm->t)
        free(tm->t[0]);
    free(tm->t);
    free(tm->n_ops);
    free(tm->iter_index);
    free(tm->epoch_of);
}

/* ---- main ---- */

struct run {
    struct options o;
    struct world w;
    struct dt_model *model;
    struct dt_topology *topo;
    struct dt_plan *plan;
    struct dtk_net *net;
    struct dtx_data *train, *test;
    struct dtx_sampler sampler;
    struct dtx_exec *ex;
    char model_path[1024], topo_path[1024];
    char data_what[1200];
};

/* Whether --drop-op `kind` removes op o. */
static bool dropped(int kind, const struct dt_op *o)
{
    if (kind == DROP_RECOMPUTE)
        return o->recompute;
    if (kind == DROP_RECOMPUTE_GATHER)
        return o->recompute && o->kind != DT_OP_COMPUTE;
    if (kind == DROP_LOSS_COLL)
        return o->kind == DT_OP_COLL && o->region.buf == DT_BUF_KEEP;
    if (kind == DROP_SEQ_GRADS)
        return o->kind == DT_OP_COLL && o->region.buf == DT_BUF_GRADS && o->region.layer >= 0;
    return (int)o->kind == kind;
}

/* --drop-op: removes every op of one kind (DROP_RECOMPUTE: the recomputed forwards) from the
 * step programs (the tests' control). */
static int drop_ops(struct dt_plan *plan, int kind)
{
    for (int r = 0; r < plan->n_ranks; r++) {
        if (dt_plan_unshare_rank(plan, r)) /* ranks with equal programs share one copy */
            return DT_ENOMEM;
        struct dt_rank_plan *rp = &plan->ranks[r];
        int kept = 0;
        for (int i = 0; i < rp->n_ops; i++)
            if (!dropped(kind, &rp->ops[i]))
                rp->ops[kept++] = rp->ops[i];
        rp->n_ops = kept;
    }
    return DT_OK;
}

/* A language model's data: the --data file read as bytes (dtx_text_load). */
static int load_text(const struct options *o, const struct dtx_data_shape *want, bool whole,
                     int shard, int shards_n, struct run *R, struct dt_error *err)
{
    if (!o->data)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "model '%s' is a language model: give a text file (--data FILE, read as "
                       "bytes) or --synthetic N",
                       R->model->name);
    int rc = dtx_text_load(o->data, true, want, whole, shard, shards_n, &R->train, err);
    if (!rc)
        rc = dtx_text_load(o->data, false, want, whole, shard, shards_n, &R->test, err);
    if (!rc)
        snprintf(R->data_what, sizeof R->data_what, "%s as bytes: %ld train, %ld test sequences",
                 o->data, R->train->total, R->test->total);
    return rc;
}

/* --device cuda: the plan is one the CUDA net executes (refusals first: they are the same
 * with or without a GPU), and this build and machine have a GPU. */
static int cuda_usable(const struct dt_plan *plan, struct dt_error *err)
{
    int rc = dtx_cuda_supports(plan, err);
    if (!rc && !dtcuda_built())
        rc = dt_fail(err, DT_EINPUT, NULL, 0, 0, "--device cuda: this dtexec was built without "
                     "the CUDA backend (configure found no nvcc, or --without-cuda)");
    else if (!rc && dtcuda_device_count() == 0)
        rc = dt_fail(err, DT_EINPUT, NULL, 0, 0, "--device cuda: no CUDA device on this machine "
                     "(no GPU, or no driver)");
    return rc;
}

/* The GPU of this rank: ranks on one node take the node's GPUs in turn. */
static int gpu_of_rank(const struct world *w)
{
    MPI_Comm node;
    int local = 0;
    MPI_Comm_split_type(w->comm, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    int n = dtcuda_device_count();
    return n > 0 ? local % n : 0;
}

static int setup(struct run *R, struct dt_error *err, double *read_s)
{
    struct options *o = &R->o;
    const struct world *w = &R->w;
    int rc;

    /* model */
    rc = dt_locate_data("--model", "models", o->model, R->model_path, sizeof R->model_path, err);
    if (!rc)
        rc = dt_model_load(R->model_path, &R->model, err);
    if ((rc = agree(w, rc, err)))
        return rc;

    /* topology */
    if (o->topology) {
        rc = dt_locate_data("--topology", "topologies", o->topology, R->topo_path,
                            sizeof R->topo_path, err);
        if (!rc)
            rc = dt_topology_load(R->topo_path, &R->topo, err);
        if (!rc)
            rc = refuse_gpu_topology(R->topo, err);
    } else {
        rc = derive_topology(w, &R->topo, err);
    }
    if ((rc = agree(w, rc, err)))
        return rc;

    /* plan */
    int s = o->strategy ? dt_strategy_parse(o->strategy)
                        : (w->size == 1 ? DT_STRAT_SEQUENTIAL : DT_STRAT_ALLREDUCE_LIBRARY);
    rc = DT_OK;
    if (s < 0) {
        char list[512] = "";
        for (int i = 0; i < DT_STRAT_COUNT; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     dt_strategy_name(i));
        rc = dt_fail(err, DT_EINPUT, NULL, 0, 0, "--strategy: unknown strategy '%s' (known: %s)",
                     o->strategy, list);
    } else if (s == DT_STRAT_SEQUENTIAL && w->size > 1) {
        rc = dt_fail(err, DT_EINPUT, NULL, 0, 0,
                     "--strategy sequential runs on one process, but %d were started: run it "
                     "with -n 1 or pick a data-parallel strategy",
                     w->size);
    } else if (w->size > R->topo->n_ranks) {
        rc = dt_fail(err, DT_EINPUT, R->topo->path, 0, 0,
                     "the topology has %d ranks but %d MPI processes were started",
                     R->topo->n_ranks, w->size);
    } else {
        struct dt_plan_options po = o->par;
        po.strategy = s;
        po.n_ranks = w->size;
        rc = dt_plan_build(R->model, R->topo, &po, &R->plan, err);
    }
    if (!rc && o->cuda)
        rc = cuda_usable(R->plan, err);
    if ((rc = agree(w, rc, err)))
        return rc;
    if (o->drop_op >= 0 && drop_ops(R->plan, o->drop_op))
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    if (o->dump_plan)
        return DT_OK;

    /* executor and network: the same seed on every rank gives every stage the one-rank
     * run's initial parameters */
    const struct dt_rank_plan *rp = &R->plan->ranks[w->rank];
    struct dtx_optimizer opt = {.kind = o->optimizer};
    double lr = o->lr * (o->lr_scale ? R->plan->lr_scale : 1.0);
    opt.adam = dtk_adam_defaults(o->optimizer == DTX_OPT_ADAM_TORCH ? DTK_ADAM_PYTORCH
                                                                   : DTK_ADAM_KERAS);
    opt.adam.lr = (float)lr;
    opt.sgd = (struct dtk_sgd){.lr = (float)lr, .momentum = (float)o->momentum};
    rc = dtx_exec_create_on(R->plan, w->comm, &opt, o->init, o->seed,
                            o->cuda ? gpu_of_rank(w) : -1, &R->ex, err);
    if ((rc = agree(w, rc, err)))
        return rc;
    R->net = dtx_exec_net(R->ex);
    dtx_exec_set_watchdog(R->ex, w->wd);
    dtx_exec_set_overflow_at(R->ex, o->overflow_at);

    /* data: the stages of one pipeline read the same shard, that of their replica */
    const struct dt_model *m = R->model;
    /* a sigmoid output learns each of its outputs as a yes/no label (binary cross-entropy) */
    bool yes_no = m->layers[m->n_layers - 1].kind == DT_L_SIGMOID;
    struct dtx_data_shape want = {.input = m->input, .classes = yes_no ? 2 : m->classes,
                                  .vocab = m->input_is_tokens ? m->vocab : 0};
    want.label_rows = (int)dtk_net_labels_per_sample(R->net);
    const int shard = rp->dp_index, shards_n = rp->dp_count;
    bool whole = o->read_whole || shards_n == 1;
    double t0 = MPI_Wtime();
    const bool lm = m->loss == DT_LOSS_NEXT_TOKEN;
    if (lm && !o->synthetic) {
        rc = load_text(o, &want, whole, shard, shards_n, R, err);
    } else if (o->synthetic) {
        long n_test = o->synthetic / 5 > 0 ? o->synthetic / 5 : 1;
        struct dtx_range rtrain = {0, -1}, rtest = {0, -1};
        if (!whole) {
            dt_chunk(o->synthetic, shards_n, shard, &rtrain.first, &rtrain.count);
            dt_chunk(n_test, shards_n, shard, &rtest.first, &rtest.count);
        }
        uint64_t teacher = o->seed * 0x2545F4914F6CDD1Dull + 99;
        int (*gen)(const struct dtx_data_shape *, long, uint64_t, uint64_t, struct dtx_range,
                   struct dtx_data **, struct dt_error *) = lm ? dtx_lm_synthetic : dtx_synthetic;
        rc = gen(&want, o->synthetic, o->seed * 2 + 1, teacher, rtrain, &R->train, err);
        if (!rc)
            rc = gen(&want, n_test, o->seed * 2 + 2, teacher, rtest, &R->test, err);
        snprintf(R->data_what, sizeof R->data_what, "synthetic: %ld train, %ld test samples",
                 o->synthetic, n_test);
    } else {
        const char *dir = o->data ? o->data : DEFAULT_DATA;
        if (!o->data && access(dir, R_OK) != 0)
            rc = dt_fail(err, DT_EINPUT, dir, 0, 0,
                         "no dataset here (install Debian's dataset-fashion-mnist, give --data "
                         "DIR, or train on --synthetic N samples)");
        if (!rc)
            rc = dtx_data_load_dir(dir, true, &want, whole, shard, shards_n, &R->train, err);
        if (!rc)
            rc = dtx_data_load_dir(dir, false, &want, whole, shard, shards_n, &R->test, err);
        if (!rc)
            snprintf(R->data_what, sizeof R->data_what, "%s: %ld train, %ld test samples", dir,
                     R->train->total, R->test->total);
    }
    if (!rc && o->test_samples && o->test_samples < R->test->total) {
        size_t at = strlen(R->data_what);
        snprintf(R->data_what + at, sizeof R->data_what - at, " (%ld evaluated)",
                 o->test_samples);
    }
    double t_read = MPI_Wtime() - t0;
    dtx_watchdog_allreduce(w->wd, &t_read, read_s, 1, MPI_DOUBLE, MPI_MAX, w->comm,
                           "the agreement after reading the data");
    if ((rc = agree(w, rc, err)))
        return rc;

    /* sampler: the same number of iterations on every rank; replica d's batch */
    int *batches = malloc((size_t)shards_n * sizeof *batches);
    long *sizes = malloc((size_t)shards_n * sizeof *sizes);
    if (!batches || !sizes) {
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    } else {
        for (int r = 0; r < w->size; r++)
            batches[R->plan->ranks[r].dp_index] = R->plan->ranks[r].batch;
        for (int d = 0; d < shards_n; d++) {
            long off, len;
            dt_chunk(R->train->total, shards_n, d, &off, &len);
            sizes[d] = len;
        }
        rc = dtx_sampler_init(&R->sampler, R->train, whole, shard, shards_n, batches, sizes, err);
    }
    /* dropout masks by the rows of the global batch: every strategy draws one rank's */
    if (!rc)
        dtk_net_set_dropout(R->net, o->seed * 1000003ull + 17, R->sampler.batch_offset);
    free(batches);
    free(sizes);
    return agree(w, rc, err);
}

static void teardown(struct run *R)
{
    dtx_exec_destroy(R->ex);
    dtx_sampler_free(&R->sampler);
    dtx_data_destroy(R->train);
    dtx_data_destroy(R->test);
    dt_plan_destroy(R->plan);
    dt_topology_destroy(R->topo);
    dt_model_destroy(R->model);
}

static double *zeros(int n)
{
    return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

static void utc_now(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tmv;
    gmtime_r(&t, &tmv);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tmv);
}

/* --checkpoint and --resume: prepares DIR, and loads the newest valid checkpoint into the
 * executor and *start (left zero without --resume). The same status on every rank. */
static int start_checkpoints(struct run *R, struct dtx_ckpt *ck, struct dtx_ckpt_pos *start,
                             struct dt_error *err)
{
    const struct options *o = &R->o;
    const struct world *w = &R->w;
    char run[64];
    snprintf(run, sizeof run, "optimizer=%s", optimizer_name(o->optimizer));
    int rc = dtx_ckpt_init(ck, o->checkpoint, R->plan, R->ex, w->comm, run, prog, err);
    if (!rc && o->checkpoint)
        rc = dtx_ckpt_prepare(o->checkpoint, o->resume, w->rank, err);
    if ((rc = agree(w, rc, err)) || !o->resume)
        return rc;
    if ((rc = agree(w, dtx_ckpt_resume(ck, o->resume, start, err), err)))
        return rc;
    if (start->epoch >= o->epochs)
        rc = dt_fail(err, DT_EINPUT, NULL, 0, 0, "--resume %s: its newest checkpoint is in "
                     "epoch %d: give --epochs %d or more to continue", o->resume,
                     start->epoch + 1, start->epoch + 1);
    else if (w->rank == 0 && !o->quiet)
        printf("%s: resumed from %s at step %ld (epoch %d, iteration %ld)\n", prog, o->resume,
               start->step, start->epoch + 1, start->iter);
    return agree(w, rc, err);
}

static int train(struct run *R, int argc, char **argv, double read_s, struct dt_error *err)
{
    const struct options *o = &R->o;
    const struct world *w = &R->w;
    const struct dt_plan *plan = R->plan;
    const struct dt_rank_plan *rp = &plan->ranks[w->rank];
    const bool root = w->rank == 0;
    int rc = DT_OK;
    struct dtx_ckpt ck;
    struct dtx_ckpt_pos start;
    memset(&ck, 0, sizeof ck);
    memset(&start, 0, sizeof start);
    char start_utc[32];
    utc_now(start_utc, sizeof start_utc);
    int threads = blas_threads(w, o->threads);
    char bound[64] = "";
    if (o->bind && (rc = agree(w, bind_rank(w, bound, sizeof bound, err), err)))
        return rc;
    if (o->bind)
        print_binding(w, bound, o->quiet);

    long iters = R->sampler.iters;
    if (o->max_iters > 0 && o->max_iters < iters)
        iters = o->max_iters;
    const int E = o->epochs;
    const int global = plan->global_batch;
    const int label_rows = R->train->label_rows;

    /* sampled iterations for the trace/CSV: the trace_iters after the first of epoch 1 */
    bool sampling = o->trace || o->ops_csv;
    long s_first = iters > 1 ? 1 : 0;
    long s_count = o->trace_iters == 0 ? iters * E : o->trace_iters;
    if (o->trace_iters != 0 && s_first + s_count > iters)
        s_count = iters - s_first;
    if (!sampling)
        s_count = 0;
    if (o->trace_iters == 0)
        s_first = 0;
    double *alloc = NULL; /* rank 0: the plan-buffer bytes of every rank, for the record */
    struct dtx_op_time *times = calloc((size_t)(s_count ? s_count : 1) * (size_t)rp->n_ops,
                                       sizeof *times);
    long *iter_index = calloc((size_t)(s_count ? s_count : 1), sizeof *iter_index);
    int *epoch_of = calloc((size_t)(s_count ? s_count : 1), sizeof *epoch_of);
    double *iter_s = malloc((size_t)(iters * E) * sizeof *iter_s);
    double *epoch_s = zeros(E), *ep_copy = zeros(E);
    double *tr_loss = zeros(E), *tr_acc = zeros(E), *te_loss = zeros(E), *te_acc = zeros(E);
    if (!times || !iter_index || !epoch_of || !iter_s || !epoch_s || !ep_copy || !tr_loss ||
        !tr_acc || !te_loss || !te_acc)
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    if ((rc = agree(w, rc, err)))
        goto done;

    struct dtx_progress pg;
    dtx_progress_init(&pg, stdout, root && dtx_progress_on_terminal(), o->quiet || !root);
    if (root && !o->quiet) {
        char params[96];
        dt_model_describe_params(R->model, params, sizeof params);
        printf("%s: %s (parameters: %s) on %d rank%s, strategy %s, %s scaling, global batch %d "
               "(%d on rank 0), %s lr %g%s\n",
               prog, R->model->name, params, w->size, w->size > 1 ? "s" : "",
               dt_strategy_name(plan->strategy),
               o->par.scaling == DT_SCALING_WEAK ? "weak" : "strong", global, rp->batch,
               optimizer_name(o->optimizer), o->lr * (o->lr_scale ? plan->lr_scale : 1.0),
               o->lr_scale && plan->lr_scale != 1 ? dt_strategy_info(plan->strategy)->pipeline || plan->opt.tp > 1 ? " (x replicas)" : " (x ranks)" : "");
        printf("%s: data %s (read in %.2f s), %ld iterations per epoch%s\n", prog, R->data_what,
               read_s, iters,
               o->max_iters && o->max_iters < R->sampler.iters ? " (--max-iters)" : "");
        fflush(stdout);
    }

    if ((rc = start_checkpoints(R, &ck, &start, err)))
        goto done;
    double eval_total = 0;
    long n_iter_s = 0, n_sampled = 0, global_iter = start.step;
    bool agree_all = true;
    dtx_watchdog_barrier(w->wd, w->comm, "the barrier before training");
    const double t_start = MPI_Wtime();
    for (int e = start.epoch; e < E && !rc; e++) {
        dtx_sampler_epoch(&R->sampler, o->seed, e, !o->no_shuffle);
        dtx_watchdog_barrier(w->wd, w->comm, "the barrier at an epoch's start");
        double t_ep = MPI_Wtime();
        dtx_progress_epoch(&pg, e + 1, E, iters, t_ep);
        const double none[DTX_CKPT_SUMS] = {0}, *s0 = e == start.epoch ? start.sums : none;
        double wloss = s0[0], wcorrect = s0[1], wrows = s0[2], run_loss = s0[3],
               run_correct = s0[4];
        /* a resumed epoch starts at its checkpoint's iteration */
        const long it0 = e != start.epoch ? 0 : start.iter < iters ? start.iter : iters;
        for (long it = it0; it < iters && !rc; it++, global_iter++) {
            struct loader ld = {&R->sampler, it};
            bool sample = sampling && global_iter >= s_first && n_sampled < s_count;
            struct dtx_loss L;
            double t_it = MPI_Wtime();
            rc = dtx_exec_iteration(R->ex, load_batch, &ld, &L,
                                    sample ? times + n_sampled * rp->n_ops : NULL, t_start, err);
            double t_end = MPI_Wtime();
            if (rc) {
                /* a failure inside one rank's iteration leaves the others in a collective:
                 * nothing to agree on, stop the job */
                dt_error_print(prog, err);
                MPI_Abort(w->comm, rc);
            }
            iter_s[n_iter_s++] = t_end - t_it;
            if (sample) {
                iter_index[n_sampled] = it;
                epoch_of[n_sampled] = e + 1;
                n_sampled++;
            }
            /* only ranks with the last layer see the loss (rank 0 does but for pipelines) */
            wloss += L.loss_sum;
            wcorrect += (double)L.correct;
            wrows += (double)L.rows;
            run_loss += L.rows ? L.loss_sum / L.rows : NAN;
            run_correct += L.rows ? (double)L.correct / ((double)L.rows * label_rows) : NAN;
            dtx_progress_step(&pg, it + 1, run_loss / (it + 1), run_correct / (it + 1), t_end);
            if (o->check_sync && !dtx_exec_params_agree(R->ex)) {
                rc = dt_fail(err, DT_EINTERNAL, NULL, 0, 0,
                             "ranks hold different parameters after iteration %ld of epoch %d",
                             it, e + 1);
                agree_all = false;
            }
            if (!rc && o->checkpoint && dtx_exec_steps(R->ex) % o->checkpoint_every == 0) {
                struct dtx_ckpt_pos at = {dtx_exec_steps(R->ex), e, it + 1,
                                          {wloss, wcorrect, wrows, run_loss, run_correct}};
                rc = agree(w, dtx_ckpt_save(&ck, &at, err), err);
            }
        }
        if (rc)
            break;
        dtx_watchdog_barrier(w->wd, w->comm, "the barrier at an epoch's end");
        epoch_s[e] = MPI_Wtime() - t_ep;
        double sums[3] = {wloss, wcorrect, wrows}, tot[3];
        dtx_watchdog_allreduce(w->wd, sums, tot, 3, MPI_DOUBLE, MPI_SUM, w->comm,
                               "the epoch's loss sum");
        tr_loss[e] = tot[2] > 0 ? tot[0] / tot[2] : NAN;
        tr_acc[e] = tot[2] > 0 ? tot[1] / (tot[2] * label_rows) : NAN;

        /* every rank must hold the same parameters */
        if (!dtx_exec_params_agree(R->ex)) {
            agree_all = false;
            rc = dt_fail(err, DT_EINTERNAL, NULL, 0, 0,
                         "ranks hold different parameters after epoch %d", e + 1);
            break;
        }

        /* test set: each rank its part, then a sum */
        double t_ev = MPI_Wtime();
        dtx_exec_sync_state(R->ex);
        long lo, hi;
        eval_range(R->test, rp, o->test_samples, &lo, &hi);
        struct dtx_loss es = {0, 0, 0};
        long chunks = (hi - lo + rp->eval_rows - 1) / rp->eval_rows, most = chunks;
        if (eval_in_lockstep(plan))
            dtx_watchdog_allreduce(w->wd, &chunks, &most, 1, MPI_LONG, MPI_MAX, w->comm,
                                   "the eval chunks' count");
        rc = evaluate(R->ex, rp, R->test, lo, hi, most, &es, err);
        if ((rc = agree(w, rc, err)))
            break;
        double ev[3] = {es.loss_sum, (double)es.correct, (double)es.rows}, et[3];
        dtx_watchdog_allreduce(w->wd, ev, et, 3, MPI_DOUBLE, MPI_SUM, w->comm,
                               "the test loss sum");
        te_loss[e] = et[2] > 0 ? et[0] / et[2] : NAN;
        te_acc[e] = et[2] > 0 ? et[1] / (et[2] * label_rows) : NAN;
        eval_total += MPI_Wtime() - t_ev;
        dtx_progress_end(&pg, iters - it0, epoch_s[e], tr_loss[e], tr_acc[e], te_loss[e], te_acc[e]);
    }
    if (rc == DT_EINTERNAL) {
        /* the failing check was collective: every rank saw it */
        if (root)
            dt_error_print(prog, err);
        goto done;
    }
    if (rc)
        goto done;
    double total_s = MPI_Wtime() - t_start;

    /* measurements */
    double train_s = 0;
    for (int e = 0; e < E; e++) {
        train_s += epoch_s[e];
        ep_copy[e] = epoch_s[e];
    }
    double rss = peak_rss_bytes(), rss_max;
    MPI_Reduce(&rss, &rss_max, 1, MPI_DOUBLE, MPI_MAX, 0, w->comm);
    double samples_per_s = train_s > 0 ? (double)global * n_iter_s / train_s : NAN;
    double median_iter = dtx_median(iter_s, (int)n_iter_s);
    if (root && !o->quiet) {
        printf("%s: %.1f samples/s, %.2f ms per iteration (median), %.3f s in all; test "
               "accuracy %.4f\n",
               prog, samples_per_s, median_iter * 1e3, total_s, te_acc[E - 1]);
        if (dt_plan_mixed(plan->opt.precision)) {
            double scale;
            long skipped;
            dtx_exec_scaler(R->ex, &scale, &skipped);
            printf("%s: mixed precision %s: loss scale %g, %ld step%s skipped on overflow\n",
                   prog, dt_precision_name(plan->opt.precision), scale, skipped,
                   skipped == 1 ? "" : "s");
        }
        fflush(stdout);
    }

    /* outputs */
    float *full = root ? malloc((size_t)(R->model->total_params + 1) * sizeof *full) : NULL;
    double params_l2 = 0, params_sum = 0;
    rc = root && !full ? dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory") : DT_OK;
    if ((rc = agree(w, rc, err)))
        goto done;
    rc = dtx_exec_gather_params(R->ex, full, &params_l2, &params_sum, err);
    if (!rc && o->dump_params && root)
        rc = dump_params(o->dump_params, full, R->model->total_params, err);
    free(full);
    if ((rc = agree(w, rc, err)))
        goto done;
    /* the plan-buffer bytes each rank allocated */
    double mine = dtx_exec_alloc_bytes(R->ex);
    alloc = root ? malloc((size_t)w->size * sizeof *alloc) : NULL;
    MPI_Gather(&mine, 1, MPI_DOUBLE, alloc, 1, MPI_DOUBLE, 0, w->comm);
    char parallel[512];
    dt_parallel_format(&plan->opt, parallel, sizeof parallel);
    if (sampling) {
        struct dtx_timings tm;
        rc = gather_timings(w, plan, times, (int)n_sampled, iter_index, epoch_of, &tm, err);
        if (!rc && root && o->ops_csv)
            rc = dtx_write_ops_csv(o->ops_csv, plan, &tm, err);
        if (!rc && root && o->trace)
            rc = dtx_write_trace(o->trace, plan, &tm, err);
        timings_free(&tm);
        if ((rc = agree(w, rc, err)))
            goto done;
    }
    if (o->record) {
        char host[256] = "unknown", mpi[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int mlen;
        gethostname(host, sizeof host);
        host[sizeof host - 1] = 0;
        MPI_Get_library_version(mpi, &mlen);
        mpi_summary(mpi);
        char *cmd = join_args(argc, argv);
        char cpu[96] = "";
        if (root) /* only rank 0 writes the record: one detection, not one per rank */
            detected_cpu(cpu, sizeof cpu);
        /* absolute paths, so that the record can be read from anywhere */
        char model_abs[PATH_MAX], topo_abs[PATH_MAX];
        if (!realpath(R->model_path, model_abs))
            snprintf(model_abs, sizeof model_abs, "%s", R->model_path);
        if (!o->topology || !realpath(R->topo_path, topo_abs))
            snprintf(topo_abs, sizeof topo_abs, "%s", R->topo_path);
        struct dtx_record r = {
            .command_line = cmd,
            .model_name = R->model->name,
            .model_path = model_abs,
            .params = R->model->total_params,
            .topology_name = R->topo->name,
            .topology_path = o->topology ? topo_abs : NULL,
            .strategy = dt_strategy_name(plan->strategy),
            .ranks = w->size,
            .scaling = o->par.scaling == DT_SCALING_WEAK ? "weak" : "strong",
            .batch = o->par.batch,
            .global_batch = global,
            .lr = o->lr,
            .lr_scale = o->lr_scale ? plan->lr_scale : 1.0,
            .lr_effective = o->lr * (o->lr_scale ? plan->lr_scale : 1.0),
            .optimizer = optimizer_name(o->optimizer),
            .momentum = o->momentum,
            .init = o->init == DTK_INIT_KAIMING ? "kaiming" : "glorot",
            .epochs = E,
            .bucket_bytes = o->par.bucket_bytes,
            .data = R->data_what,
            .train_samples = R->train->total,
            .test_samples = R->test->total,
            .test_evaluated = o->test_samples && o->test_samples < R->test->total
                                  ? o->test_samples : R->test->total,
            .read_whole = o->read_whole,
            .seed = o->seed,
            .max_iters = o->max_iters,
            .iters_per_epoch = iters,
            .host = host,
            .cpu = cpu,
            .mpi_library = mpi,
            .git_revision = GIT_REVISION,
            .version = PACKAGE_VERSION,
            .start_utc = start_utc,
            .blas_threads = threads,
            .bound_cpus = bound,
            .read_s = read_s,
            .read_bytes = R->train->bytes_read + R->test->bytes_read,
            .epoch_s = epoch_s,
            .epoch_median_s = dtx_median(ep_copy, E),
            .update_per_batch_s = median_iter,
            .eval_s = eval_total,
            .total_s = total_s,
            .train_loss = tr_loss,
            .train_accuracy = tr_acc,
            .test_loss = te_loss,
            .test_accuracy = te_acc,
            .samples_per_s = samples_per_s,
            .peak_rss_bytes = rss_max,
            .net_bytes = dtk_net_bytes(R->net),
            .params_agree = agree_all,
            .parallel = parallel,
            .alloc_bytes = alloc,
            .params_l2 = params_l2,
            .params_sum = params_sum,
        };
        if (root)
            rc = dtx_record_append(o->record, &r, err);
        free(cmd);
        rc = agree(w, rc, err);
    }
done:
    free(alloc);
    dtx_ckpt_free(&ck);
    free(times);
    free(iter_index);
    free(epoch_of);
    free(iter_s);
    free(epoch_s);
    free(ep_copy);
    free(tr_loss);
    free(tr_acc);
    free(te_loss);
    free(te_acc);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct run R;
    memset(&R, 0, sizeof R);
    MPI_Comm_dup(MPI_COMM_WORLD, &R.w.comm);
    MPI_Comm_rank(R.w.comm, &R.w.rank);
    MPI_Comm_size(R.w.comm, &R.w.size);
    struct dt_error err;
    dt_error_clear(&err);
    char msg[1024] = "";
    /* every rank parses the same argv: the verdict is the same everywhere */
    int rc = parse_options(argc, argv, &R.o, msg, sizeof msg);
    enum dtx_idle_mode idle = DTX_IDLE_AUTO;
    if (!rc)
        rc = dtx_idle_parse(getenv("DTEXEC_WAIT"), &idle, msg, sizeof msg);
    int all;
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, R.w.comm);
    if (all) {
        if (R.w.rank == 0)
            fprintf(stderr, "%s: %s\nTry '%s --help'.\n", prog, msg[0] ? msg : "bad option",
                    prog);
        rc = all;
        goto out;
    }
    if (R.o.help || R.o.version) {
        if (R.w.rank == 0) {
            if (R.o.help)
                usage(stdout);
            else
                printf("%s (%s) %s\n", prog, PACKAGE_NAME, PACKAGE_VERSION);
        }
        goto out;
    }
    /* the watchdog watches from here on (every rank has the same --timeout) */
    if (dtx_watchdog_create(R.w.comm, R.o.timeout, prog, &R.w.wd) != 0) {
        if (R.w.rank == 0)
            fprintf(stderr, "%s: out of memory for the watchdog\n", prog);
        MPI_Abort(R.w.comm, DT_ENOMEM);
    }
    int local_rank, local_size;
    node_local(&R.w, &local_rank, &local_size);
    dtx_idle_setup(idle, local_size);
    double read_s = 0;
    rc = setup(&R, &err, &read_s);
    if (!rc && R.o.dump_plan) {
        if (R.w.rank == 0)
            dt_plan_print(R.plan, stdout);
    } else if (!rc) {
        rc = train(&R, argc, argv, read_s, &err);
    }
    teardown(&R);
    dtx_watchdog_destroy(R.w.wd);
out:
    /* a full disk or a closed pipe on standard output is an error, not a silent success */
    if ((ferror(stdout) | fflush(stdout)) && !rc) {
        fprintf(stderr, "%s: rank %d: standard output: cannot write it all\n", prog, R.w.rank);
        rc = DT_ESYS;
    }
    MPI_Comm_free(&R.w.comm);
    dtx_declare_exit_status(rc); /* kept by the finalize guard if MPI_Finalize hangs */
    MPI_Finalize();
    return rc;
}
