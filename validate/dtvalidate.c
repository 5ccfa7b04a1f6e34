/* dtvalidate: calibrates dtsim's cost model on measured runs, predicts held-out runs, reports
 * the error and draws the scaling plots. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calibrate.h"
#include "check.h"
#include "dt/calibration.h"
#include "dt/datafile.h"
#include "gpureport.h"
#include "loop.h"
#include "ops.h"
#include "plot.h"
#include "predict.h"
#include "runs.h"

static const char *prog = "dtvalidate";

#define SEED002_TABLE "seed002-cascadelake-mpi.csv"

struct options {
    const char *command;
    const char *calibration, *train, *use, *fit, *output, *dir, *plots, *topology;
    bool loo, uncalibrated, csv, quiet, fastest;
    struct dtv_loop_options loop;
    char **inputs;
    int n_inputs;
};

static void usage(FILE *f)
{
    fprintf(f,
        "Usage: dtvalidate COMMAND [options] [INPUT...]\n"
        "Calibrates dtsim's cost model on measured runs, predicts runs that were not used to\n"
        "fit it, reports the error, and draws scaling plots. An INPUT is a dtexec records file\n"
        "(JSON lines from `dtexec --record FILE`) or a reference table (.csv, see\n"
        "validate/data/).\n\n"
        "Commands:\n"
        "  calibrate INPUT...   fit the parameters (value, standard error, 95%% CI, residuals);\n"
        "                       -o FILE writes the calibration that `dtsim --calibration` reads\n"
        "  predict INPUT...     each run's predicted epoch time with its 95%% interval\n"
        "  compare INPUT...     held-out predictions against measurements: error per run,\n"
        "                       MAPE per strategy and overall, ranking of the strategies\n"
        "  plot INPUT...        the plots of a comparison, PNG and SVG, into --dir DIR\n"
        "  seed002              seed 002's table: fit on the 1-node rows and predict the 2- and\n"
        "                       4-node rows; then leave-one-out over all nine rows\n"
        "  loop                 run dtexec here (1 and 2 ranks, every data-parallel strategy,\n"
        "                       small models, short epochs; on 2 ranks also 2-stage gpipe\n"
        "                       and 1f1b, ring with --tp 2 and with --zero 1, 2, 3),\n"
        "                       calibrate, validate, plot\n"
        "  ops RECORDS TRACE    a per-op trace (dtexec --ops-csv) against the cost model, op by\n"
        "                       op, with per-class efficiencies fitted from it (-o writes them);\n"
        "                       the run is the last record of RECORDS\n"
        "  gpu [TABLE]          per-device GPU calibrations (v100, a100) fitted on NVIDIA's\n"
        "                       published throughput (default gpu-published.csv), and what\n"
        "                       they predict: 1-GPU -> multi-GPU rows, one framework -> the\n"
        "                       others, V100 -> A100 and back; --dir DIR writes DIR/v100.yaml\n"
        "                       and DIR/a100.yaml\n\n"
        "How predictions are made (compare, plot; default --loo):\n"
        "  -c, --calibration FILE  use this calibration for every run\n"
        "      --loo               leave-one-out: each run predicted by a fit on the others\n"
        "      --train SEL         fit on the runs SEL selects, predict the others\n"
        "      --uncalibrated      dtsim's default parameters (no fit)\n"
        "  SEL is 'key=v1,v2 key=v' with keys nodes ppn ranks strategy model topology line\n"
        "  label parallel (every key must match), e.g. --train nodes=1; parallel=PAIR selects\n"
        "  the runs whose parallel config has the pair (parallel=micro-batches=4),\n"
        "  parallel=none plain data parallelism\n\n"
        "Fitting:\n"
        "      --fit LIST          parameters to fit (default: iter_overhead,eff_gemm, then\n"
        "                          intra_bw / nic_bw / read_bw when the runs can tell them)\n"
        "      --use SEL           calibrate: fit only the runs SEL selects\n"
        "  Parameters:");
    for (int p = 0; p < DT_CAL_COUNT; p++)
        fprintf(f, "%s%s", p % 6 == 0 ? "\n    " : " ", dt_cal_param_name(p));
    fprintf(f, "\n\nOutput:\n"
        "  -o, --output FILE       calibrate, seed002: write the calibration (YAML) to FILE\n"
        "  -d, --dir DIR           plot, loop: directory for plots and files\n"
        "      --plots DIR         compare, seed002: also draw the plots into DIR\n"
        "  -f, --format table|csv  compare, predict: table (default) or CSV\n"
        "      --topology FILE     for records whose topology dtexec derived from the MPI layout\n"
        "      --fastest           of repeated runs of one configuration keep the fastest\n"
        "  -q, --quiet             fewer progress messages\n\n"
        "loop options:\n"
        "      --dtexec PATH       the dtexec program (default: beside dtvalidate, then PATH)\n"
        "      --mpiexec PATH      (default: %s)\n"
        "      --models LIST       default mlp-fmnist,mlp-wide,cnn21k,\n"
        "                          cnn690k,tiny-gpt\n"
        "      --max-iters N       iterations per epoch (default: per model, epochs of about\n"
        "                          0.25 s at the device's peak; 30 to 2000)\n"
        "      --epochs N          epochs per run (default 3)\n"
        "      --batch N           batch per rank (default 64)\n"
        "      --ranks N           runs on 1..N ranks (default 2)\n"
        "      --repeat N          runs of each configuration, in rounds; the fastest is kept\n"
        "                          and all of them decide which strategies differ (default\n"
        "                          5: fewer than 4 cannot tell two strategies apart at 5%%)\n"
        "      --pipelines LIST    pipeline strategies run with --pp 2 on 2 ranks beside data\n"
        "                          parallelism (default gpipe,1f1b; none: no pipelines)\n"
        "      --pipeline-models LIST  the models of --models they run on (default\n"
        "                          mlp-wide,cnn690k)\n"
        "      --micro-batches LIST  their micro-batch counts (default 2,4,8); a pipeline's -b\n"
        "                          is twice --batch: a step trains on as many samples as data\n"
        "                          parallelism's on 2 ranks\n"
        "      --tensor-models LIST  the models of --models run on ring with --tp 2 on 2\n"
        "                          ranks, -b twice --batch (default mlp-wide,tiny-gpt; none)\n"
        "      --zero-models LIST  the models of --models run on ring with --zero 1, 2 and 3\n"
        "                          on 2 ranks (default mlp-wide,tiny-gpt; none)\n"
        "      --reuse             analyse DIR/records.jsonl again without running dtexec;\n"
        "                          each run on the topology file its record names (the\n"
        "                          report's Topology lines say which)\n"
        "      --current-topology  analyse every record with --topology's current file\n\n"
        "  -h, --help              this help\n"
        "  -V, --version           version\n"
        "Exit status: 0 success, 2 bad input (file:line:column says where), 1 other failure,\n"
        "77 `loop` skipped because dtexec is not built.\n",
        DT_MPIEXEC);
}

static int bad_flag(const char *flag, const char *msg, const char *value)
{
    fprintf(stderr, "%s: %s: %s '%s'\n", prog, flag, msg, value);
    return 2;
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "expected a whole number from %d to %d, got", lo, hi);
        return bad_flag(flag, msg, s);
    }
    *out = (int)v;
    return 0;
}

/* --pipelines (strategies: pipeline names, or "none") or --micro-batches (counts 1..4096):
 * 0 when every comma-separated word is one. */
static int check_list(const char *list, bool strategies)
{
    char buf[512];
    if (strategies && strcmp(list, "none") == 0)
        return 0;
    if (!*list || snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf)
        return -1;
    for (char *save, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if (strategies) {
            int s = dt_strategy_parse(w);
            if (s < 0 || !dt_strategy_info(s)->pipeline)
                return -1;
        } else {
            char *end;
            long v = strtol(w, &end, 10);
            if (*end || end == w || v < 1 || v > 4096)
                return -1;
        }
    }
    return 0;
}

enum {
    OPT_LOO = 256, OPT_TRAIN, OPT_USE, OPT_FIT, OPT_UNCAL, OPT_PLOTS, OPT_TOPOLOGY, OPT_DTEXEC,
    OPT_MPIEXEC, OPT_MODELS, OPT_MAXITERS, OPT_EPOCHS, OPT_BATCH, OPT_RANKS, OPT_REUSE,
    OPT_REPEAT, OPT_FASTEST, OPT_PIPELINES, OPT_PIPELINE_MODELS, OPT_MICRO_BATCHES,
    OPT_TENSOR_MODELS, OPT_ZERO_MODELS, OPT_CURRENT_TOPOLOGY
};

/* The commands that read each option: any other command refuses it, since a flag silently
 * ignored looks as if it had taken effect. -q, -h and -V apply to all. */
static const struct {
    int code;
    const char *name, *commands;
} option_use[] = {
    {'c', "--calibration", " predict compare plot ops "},
    {OPT_LOO, "--loo", " compare plot "},
    {OPT_TRAIN, "--train", " compare plot loop "},
    {OPT_UNCAL, "--uncalibrated", " compare plot "},
    {OPT_USE, "--use", " calibrate "},
    {OPT_FIT, "--fit", " calibrate compare plot seed002 loop gpu "},
    {'o', "--output", " calibrate seed002 ops "},
    {'d', "--dir", " plot loop gpu "},
    {OPT_PLOTS, "--plots", " compare seed002 "},
    {'f', "--format", " predict compare "},
    {OPT_TOPOLOGY, "--topology", " calibrate predict compare plot ops loop "},
    {OPT_FASTEST, "--fastest", " calibrate predict compare plot "},
    {OPT_DTEXEC, "--dtexec", " loop "},
    {OPT_MPIEXEC, "--mpiexec", " loop "},
    {OPT_MODELS, "--models", " loop "},
    {OPT_MAXITERS, "--max-iters", " loop "},
    {OPT_EPOCHS, "--epochs", " loop "},
    {OPT_BATCH, "--batch", " loop "},
    {OPT_RANKS, "--ranks", " loop "},
    {OPT_REUSE, "--reuse", " loop "},
    {OPT_REPEAT, "--repeat", " loop "},
    {OPT_PIPELINES, "--pipelines", " loop "},
    {OPT_PIPELINE_MODELS, "--pipeline-models", " loop "},
    {OPT_MICRO_BATCHES, "--micro-batches", " loop "},
    {OPT_TENSOR_MODELS, "--tensor-models", " loop "},
    {OPT_ZERO_MODELS, "--zero-models", " loop "},
    {OPT_CURRENT_TOPOLOGY, "--current-topology", " loop "},
};

/* 0 when command reads the option `code`; else says so (exit 2). */
static int check_applies(const char *command, int code)
{
    char word[32];
    snprintf(word, sizeof word, " %s ", command);
    for (size_t i = 0; i < sizeof option_use / sizeof option_use[0]; i++)
        if (option_use[i].code == code && !strstr(option_use[i].commands, word)) {
            const char *c = option_use[i].commands + 1;
            fprintf(stderr, "%s: %s does not apply to %s (only to %.*s)\n", prog,
                    option_use[i].name, command, (int)strlen(c) - 1, c);
            return 2;
        }
    return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"calibration", required_argument, NULL, 'c'}, {"loo", no_argument, NULL, OPT_LOO},
        {"train", required_argument, NULL, OPT_TRAIN},  {"use", required_argument, NULL, OPT_USE},
        {"fit", required_argument, NULL, OPT_FIT},      {"uncalibrated", no_argument, NULL, OPT_UNCAL},
        {"output", required_argument, NULL, 'o'},       {"dir", required_argument, NULL, 'd'},
        {"plots", required_argument, NULL, OPT_PLOTS},  {"format", required_argument, NULL, 'f'},
        {"topology", required_argument, NULL, OPT_TOPOLOGY},
        {"dtexec", required_argument, NULL, OPT_DTEXEC},
        {"mpiexec", required_argument, NULL, OPT_MPIEXEC},
        {"models", required_argument, NULL, OPT_MODELS},
        {"max-iters", required_argument, NULL, OPT_MAXITERS},
        {"epochs", required_argument, NULL, OPT_EPOCHS},
        {"batch", required_argument, NULL, OPT_BATCH},  {"ranks", required_argument, NULL, OPT_RANKS},
        {"reuse", no_argument, NULL, OPT_REUSE},        {"quiet", no_argument, NULL, 'q'},
        {"repeat", required_argument, NULL, OPT_REPEAT},
        {"fastest", no_argument, NULL, OPT_FASTEST},
        {"pipelines", required_argument, NULL, OPT_PIPELINES},
        {"pipeline-models", required_argument, NULL, OPT_PIPELINE_MODELS},
        {"micro-batches", required_argument, NULL, OPT_MICRO_BATCHES},
        {"tensor-models", required_argument, NULL, OPT_TENSOR_MODELS},
        {"zero-models", required_argument, NULL, OPT_ZERO_MODELS},
        {"current-topology", no_argument, NULL, OPT_CURRENT_TOPOLOGY},
        {"help", no_argument, NULL, 'h'},               {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    char why[512];
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:o:d:f:qhV", longopts, NULL)) != -1) {
        if (check_applies(o->command, c))
            return 2;
        switch (c) {
        case 'c': o->calibration = optarg; break;
        case OPT_LOO: o->loo = true; break;
        case OPT_TRAIN:
            if (dtv_select_parse_check(optarg, why, sizeof why))
                return bad_flag("--train", why, optarg);
            o->train = optarg;
            break;
        case OPT_USE:
            if (dtv_select_parse_check(optarg, why, sizeof why))
                return bad_flag("--use", why, optarg);
            o->use = optarg;
            break;
        case OPT_FIT: {
            struct dtv_fitspec s;
            if (dtv_fitspec_parse(optarg, &s, why, sizeof why))
                return bad_flag("--fit", why, optarg);
            o->fit = optarg;
            o->loop.fit = optarg;
            break;
        }
        case OPT_UNCAL: o->uncalibrated = true; break;
        case 'o': o->output = optarg; break;
        case 'd': o->dir = optarg; break;
        case OPT_PLOTS: o->plots = optarg; break;
        case 'f':
            if (strcmp(optarg, "csv") && strcmp(optarg, "table"))
                return bad_flag("--format", "expected table or csv, got", optarg);
            o->csv = strcmp(optarg, "csv") == 0;
            break;
        case OPT_TOPOLOGY: o->topology = optarg; o->loop.topology = optarg; break;
        case OPT_DTEXEC: o->loop.dtexec = optarg; break;
        case OPT_MPIEXEC: o->loop.mpiexec = optarg; break;
        case OPT_MODELS: o->loop.models = optarg; break;
        case OPT_MAXITERS:
            if (parse_int("--max-iters", optarg, 2, 100000, &o->loop.max_iters))
                return 2;
            break;
        case OPT_EPOCHS:
            if (parse_int("--epochs", optarg, 1, 1000, &o->loop.epochs))
                return 2;
            break;
        case OPT_BATCH:
            if (parse_int("--batch", optarg, 1, 1 << 20, &o->loop.batch))
                return 2;
            break;
        case OPT_RANKS:
            if (parse_int("--ranks", optarg, 1, 64, &o->loop.max_ranks))
                return 2;
            break;
        case OPT_REUSE: o->loop.reuse = true; break;
        case OPT_REPEAT:
            if (parse_int("--repeat", optarg, 1, 100, &o->loop.repeat))
                return 2;
            break;
        case OPT_FASTEST: o->fastest = true; break;
        case OPT_PIPELINES:
            if (check_list(optarg, true))
                return bad_flag("--pipelines", "expected pipeline strategies (gpipe, naive-mp, "
                                "1f1b, interleaved) separated by commas, or none, got", optarg);
            o->loop.pipelines = optarg;
            break;
        case OPT_PIPELINE_MODELS: o->loop.pipeline_models = optarg; break;
        case OPT_TENSOR_MODELS: o->loop.tensor_models = optarg; break;
        case OPT_ZERO_MODELS: o->loop.zero_models = optarg; break;
        case OPT_CURRENT_TOPOLOGY: o->loop.current_topology = true; break;
        case OPT_MICRO_BATCHES:
            if (check_list(optarg, false))
                return bad_flag("--micro-batches", "expected whole numbers from 1 to 4096 "
                                "separated by commas, got", optarg);
            o->loop.micro_batches = optarg;
            break;
        case 'q': o->quiet = true; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("dtvalidate %s\n", PACKAGE_VERSION); exit(0);
        case ':':
            fprintf(stderr, "%s: %s needs a value\n", prog, argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, argv[optind - 1]);
            return 2;
        }
    }
    o->inputs = argv + optind;
    o->n_inputs = argc - optind;
    int modes = (o->calibration != NULL) + o->loo + (o->train != NULL) + o->uncalibrated;
    if (modes > 1) {
        fprintf(stderr, "%s: give one of --calibration, --loo, --train, --uncalibrated\n",
                prog);
        return 2;
    }
    return 0;
}

static int status_of(int rc) { return rc == DT_EINPUT ? 2 : rc ? 1 : 0; }

static int fail(const struct dt_error *err, int rc)
{
    dt_error_print(prog, err);
    return status_of(rc);
}

/* The directory given to flag, made (one level, as mkdir does) and proved writable before
 * anything is fitted: a bad one is an error now (exit 2), not after the fits. */
static int prepare_dir(const char *flag, const char *dir)
{
    const char *why = NULL;
    char probe[PATH_MAX];
    struct stat st;
    if (strchr(dir, '\''))
        why = "may not contain single quotes (gnuplot runs in it)";
    else if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        why = strerror(errno);
    else if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        why = "exists and is not a directory";
    else if (snprintf(probe, sizeof probe, "%s/.dtvalidate-XXXXXX", dir) >= (int)sizeof probe)
        why = "name too long";
    if (!why) {
        int fd = mkstemp(probe);
        if (fd < 0) {
            why = strerror(errno);
        } else {
            close(fd);
            unlink(probe);
        }
    }
    if (why) {
        fprintf(stderr, "%s: %s '%s': cannot create the directory or write into it: %s\n",
                prog, flag, dir, why);
        return 2;
    }
    return 0;
}

/* The file -o will write, checked before anything is fitted: not a directory, and in a
 * directory this process may write into. */
static int check_output(const char *path)
{
    char dir[PATH_MAX];
    struct stat st;
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    const char *why = NULL;
    bool exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
        why = "is a directory";
    else if (exists ? access(path, W_OK) != 0 : access(dir, W_OK | X_OK) != 0)
        why = strerror(errno);
    if (why) {
        fprintf(stderr, "%s: --output '%s': cannot write the file: %s\n", prog, path, why);
        return 2;
    }
    return 0;
}

static int load_inputs(const struct options *o, struct dtv_runset *set, struct dt_error *err)
{
    if (o->n_inputs == 0) {
        fprintf(stderr, "%s: %s needs at least one INPUT (records or a reference table)\n",
                prog, o->command);
        return 2;
    }
    struct dtv_load_options lo = {.topology = o->topology};
    for (int i = 0; i < o->n_inputs; i++) {
        int rc = dtv_runset_load(set, o->inputs[i], &lo, err);
        if (rc)
            return fail(err, rc);
    }
    if (o->fastest) {
        int dropped = dtv_runset_keep_fastest(set);
        if (dropped && !o->quiet)
            fprintf(stderr, "%s: --fastest: dropped %d slower repeats\n", prog, dropped);
    }
    return 0;
}

static int get_spec(const struct options *o, struct dtv_fitspec *spec, bool *given)
{
    char why[512];
    *given = o->fit != NULL;
    if (o->fit && dtv_fitspec_parse(o->fit, spec, why, sizeof why))
        return bad_flag("--fit", why, o->fit);
    return 0;
}

static int save_calibration(const char *path, const struct dt_calibration *cal, bool quiet)
{
    struct dt_error err;
    dt_error_clear(&err);
    if (dt_calibration_check_values(cal, &err)) {
        fprintf(stderr, "%s: %s: not written: %s (an efficiency above 1: the runs went "
                "faster than the topology's peak allows, so check its `peak:` or the work the "
                "model counts; otherwise the model misses something these runs show)\n", prog,
                path, err.msg);
        return 1;
    }
    int rc = dt_calibration_save(path, cal, &err);
    if (rc)
        return fail(&err, rc);
    if (!quiet)
        fprintf(stderr, "%s: wrote the calibration to %s\n", prog, path);
    return 0;
}

static int cmd_calibrate(const struct options *o)
{
    struct dtv_runset set;
    struct dt_error err;
    dt_error_clear(&err);
    dtv_runset_init(&set);
    int rc = o->output ? check_output(o->output) : 0;
    if (!rc)
        rc = load_inputs(o, &set, &err);
    bool *use = NULL;
    struct dtv_fitspec spec;
    bool given;
    if (rc || (rc = get_spec(o, &spec, &given)))
        goto done;
    use = calloc((size_t)set.n, sizeof *use);
    int n_use = 0;
    for (int i = 0; i < set.n && use; i++)
        n_use += use[i] = dtv_run_matches(&set.runs[i], o->use);
    if (!use || n_use == 0) {
        fprintf(stderr, "%s: --use '%s' selects no run\n", prog, o->use ? o->use : "");
        rc = 2;
        goto done;
    }
    if (!given)
        dtv_fitspec_default(&set, use, &spec);
    struct dtv_calib cb;
    int r = dtv_calibrate(&set, use, &spec, o->quiet ? NULL : stderr, &cb, &err);
    if (r) {
        rc = fail(&err, r);
    } else {
        dtv_calib_print(stdout, &set, &cb);
        if (o->output)
            rc = save_calibration(o->output, &cb.cal, o->quiet);
        else
            dt_calibration_write(stdout, &cb.cal);
    }
    dtv_calib_free(&cb);
done:
    free(use);
    dtv_runset_free(&set);
    return rc;
}

/* A calibration by path or by name (calibrations/NAME.yaml), checked against the device of
 * every run it will predict: another kind is refused, another name warned about once. */
static int load_calibration(const char *path, const struct dtv_runset *set,
                            struct dt_calibration *cal)
{
    struct dt_error err;
    dt_error_clear(&err);
    char file[1024], warn[512], last[512] = "";
    int rc = dt_locate_data("--calibration", "calibrations", path, file, sizeof file, &err);
    if (!rc)
        rc = dt_calibration_load(file, cal, &err);
    for (int i = 0; i < set->n && !rc; i++) {
        rc = dt_calibration_check_device(cal, set->runs[i].topo, warn, sizeof warn, &err);
        if (!rc && warn[0] && strcmp(warn, last) != 0)
            fprintf(stderr, "%s: warning: %s\n", prog, warn);
        snprintf(last, sizeof last, "%s", warn);
    }
    return rc ? fail(&err, rc) : 0;
}

static int cmd_predict(const struct options *o)
{
    struct dtv_runset set;
    struct dt_error err;
    struct dt_calibration cal;
    dt_error_clear(&err);
    dtv_runset_init(&set);
    int rc = load_inputs(o, &set, &err);
    if (!rc && o->calibration)
        rc = load_calibration(o->calibration, &set, &cal);
    if (rc)
        goto done;
    int w = dtv_label_width(&set);
    if (o->csv)
        printf("file,line,model,nodes,ppn,ranks,strategy,batch,scaling,iter_s,epoch_s,low_s,"
               "high_s,compute_s,comm_s,idle_s,read_s,parallel,bucket_bytes\n");
    else
        printf("Predictions with %s\n%-5s %-*s %6s %11s %25s %10s %10s %10s\n",
               o->calibration ? o->calibration : "dtsim's defaults (no calibration)", "line", w,
               "configuration", "batch", "epoch", "95% prediction interval", "iter", "compute",
               "comm");
    for (int i = 0; i < set.n; i++) {
        const struct dtv_run *r = &set.runs[i];
        struct dtv_pred p;
        int e = dtv_predict_cal(r, o->calibration ? &cal : NULL, &p, &err);
        if (e) {
            rc = fail(&err, e);
            break;
        }
        if (o->csv) {
            printf("%s,%d,%s,%d,%d,%d,%s,%d,%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,\"%s\","
                   "%.0f\n",
                   r->file, r->line, r->model->name, r->nodes, r->ppn, r->ranks,
                   dt_strategy_name(r->strategy), r->batch,
                   r->scaling == DT_SCALING_WEAK ? "weak" : "strong", p.iter_s, p.epoch_s,
                   p.epoch_lo_s, p.epoch_hi_s, p.compute_s, p.comm_s, p.idle_s, p.read_s,
                   r->parallel, r->opt.bucket_bytes);
        } else {
            char iv[64] = "-";
            if (p.epoch_hi_s > p.epoch_lo_s)
                snprintf(iv, sizeof iv, "[%.4g, %.4g] s", p.epoch_lo_s, p.epoch_hi_s);
            printf("%-5d %-*.*s %6d %10.4gs %25s %8.3gms %8.3gms %8.3gms\n", r->line, w, w,
                   r->label, r->batch, p.epoch_s, iv, 1e3 * p.iter_s, 1e3 * p.compute_s,
                   1e3 * p.comm_s);
        }
    }
done:
    dtv_runset_free(&set);
    return rc;
}

static enum dtv_mode mode_of(const struct options *o)
{
    if (o->calibration)
        return DTV_MODE_CAL;
    if (o->train)
        return DTV_MODE_SPLIT;
    if (o->uncalibrated)
        return DTV_MODE_DEFAULTS;
    return DTV_MODE_LOO;
}

/* compare and plot: one validation of the inputs. */
static int cmd_compare(const struct options *o, bool plot)
{
    struct dtv_runset set;
    struct dt_error err;
    struct dt_calibration cal;
    dt_error_clear(&err);
    dtv_runset_init(&set);
    const char *dir = plot ? o->dir : o->plots;
    if (plot && !dir) {
        fprintf(stderr, "%s: plot needs --dir DIR\n", prog);
        return 2;
    }
    if (dir && prepare_dir(plot ? "--dir" : "--plots", dir))
        return 2;
    struct dtv_fitspec spec;
    bool given;
    int rc = load_inputs(o, &set, &err);
    if (!rc)
        rc = get_spec(o, &spec, &given);
    if (!rc && o->calibration)
        rc = load_calibration(o->calibration, &set, &cal);
    if (rc) {
        dtv_runset_free(&set);
        return rc;
    }
    struct dtv_check c;
    int e = dtv_check_run(&set, mode_of(o), o->train, given ? &spec : NULL,
                          o->calibration ? &cal : NULL, o->quiet ? NULL : stderr, &c, &err);
    if (e) {
        rc = fail(&err, e);
    } else {
        if (c.have_calib && !o->csv && !plot) {
            printf("Calibration fitted on the training runs:\n");
            dtv_calib_print(stdout, &set, &c.calib);
            printf("\n");
        }
        if (!plot)
            dtv_check_print(stdout, &set, &c, o->csv);
        if (dir) {
            const struct dt_calibration *pc = o->calibration ? &cal
                                              : c.have_calib ? &c.calib.cal
                                                             : NULL;
            e = dtv_plot(dir, "runs", "measured runs", &set, &c, pc, o->quiet ? NULL : stderr,
                         &err);
            if (e)
                rc = fail(&err, e);
        }
    }
    dtv_check_free(&c);
    dtv_runset_free(&set);
    return rc;
}

/* What the table says about itself: total runtime against read + 5 epochs (the report ran 5
 * epochs; evaluation and start-up are the rest). */
static void seed002_consistency(const struct dtv_runset *set)
{
    printf("\n=== The table against itself: total_s - (read_s + 5 x epoch_s) ===\n"
           "(evaluation and start-up should make this small and positive; the report ran 5 "
           "epochs)\n%-5s %-6s %10s %10s %10s %12s\n", "line", "shape", "read_s", "epoch_s",
           "total_s", "difference");
    for (int i = 0; i < set->n; i++) {
        const struct dtv_run *r = &set->runs[i];
        double d = r->total_s - (r->read_s + 5 * r->epoch_s);
        printf("%-5d %dn%dp   %10.2f %10.2f %10.2f %+11.2fs%s\n", r->line, r->nodes, r->ppn,
               r->read_s, r->epoch_s, r->total_s, d,
               d < -1 ? "  total < 5 epochs: the median epoch is not typical"
               : d > 15 ? "  unexplained extra time" : "");
    }
}

static int cmd_seed002(const struct options *o)
{
    if ((o->plots && prepare_dir("--plots", o->plots)) || (o->output && check_output(o->output)))
        return 2;
    char path[1024];
    if (dt_find_data_file("validate/data", SEED002_TABLE, path, sizeof path)) {
        fprintf(stderr, "%s: cannot find validate/data/%s (run from the source tree, or set "
                        "DTSIM_DATADIR)\n", prog, SEED002_TABLE);
        return 2;
    }
    struct dtv_runset set;
    struct dt_error err;
    dt_error_clear(&err);
    dtv_runset_init(&set);
    int rc = dtv_runset_load(&set, path, NULL, &err);
    if (rc) {
        dtv_runset_free(&set);
        return fail(&err, rc);
    }
    struct dtv_fitspec spec;
    bool given;
    if ((rc = get_spec(o, &spec, &given))) {
        dtv_runset_free(&set);
        return rc;
    }
    FILE *verbose = o->quiet ? NULL : stderr;
    printf("Seed 002, Table 2 (%s): the 690,590-parameter CNN, Reduce + Bcast data\n"
           "parallelism on 1-4 Cascade Lake nodes, batch 128 per process, epoch = median of "
           "5.\n\n", path);
    struct dtv_check c0, c1, c2;
    struct dtv_calib all;
    memset(&c0, 0, sizeof c0);
    memset(&c1, 0, sizeof c1);
    memset(&c2, 0, sizeof c2);
    memset(&all, 0, sizeof all);
    /* 0: what the datasheet model says before any fit */
    int e = dtv_check_run(&set, DTV_MODE_DEFAULTS, NULL, NULL, NULL, NULL, &c0, &err);
    if (!e) {
        printf("=== Uncalibrated: dtsim's defaults and the topologies' datasheet values ===\n");
        dtv_check_print(stdout, &set, &c0, false);
        /* 1: fit the 1-node rows, predict the 2- and 4-node rows */
        e = dtv_check_run(&set, DTV_MODE_SPLIT, "nodes=1", given ? &spec : NULL, NULL, verbose,
                          &c1, &err);
    }
    if (!e) {
        printf("\n=== Calibrated on the 1-node rows, predicting the 2- and 4-node rows ===\n");
        dtv_calib_print(stdout, &set, &c1.calib);
        printf("\n");
        dtv_check_print(stdout, &set, &c1, false);
        /* 2: leave-one-out over all nine rows */
        e = dtv_check_run(&set, DTV_MODE_LOO, NULL, given ? &spec : NULL, NULL, verbose, &c2,
                          &err);
    }
    if (!e) {
        printf("\n=== Leave-one-out over all nine rows ===\n");
        dtv_check_print(stdout, &set, &c2, false);
        /* 3: the calibration from every row (what -o writes) */
        struct dtv_fitspec sp = spec;
        if (!given)
            dtv_fitspec_default(&set, NULL, &sp);
        e = dtv_calibrate(&set, NULL, &sp, verbose, &all, &err);
    }
    if (!e) {
        printf("\n=== Calibrated on all nine rows (what -o writes) ===\n");
        dtv_calib_print(stdout, &set, &all);
        seed002_consistency(&set);
        printf("\nSummary: MAPE %.2f %% uncalibrated; %.2f %% on the 2- and 4-node rows "
               "(fitted on the 1-node rows, in-sample %.2f %%); %.2f %% leave-one-out over all "
               "nine rows.\n", c0.mape_held, c1.mape_held, c1.mape_fit, c2.mape_held);
        if (o->output)
            rc = save_calibration(o->output, &all.cal, o->quiet);
    }
    if (!e && !rc && o->plots) {
        e = dtv_plot(o->plots, "seed002-split", "seed 002, fitted on the 1-node rows", &set,
                     &c1, &c1.calib.cal, verbose, &err);
        if (!e)
            e = dtv_plot(o->plots, "seed002-loo", "seed 002, leave-one-out", &set, &c2,
                         &all.cal, verbose, &err);
    }
    if (e)
        rc = fail(&err, e);
    dtv_calib_free(&all);
    dtv_check_free(&c0);
    dtv_check_free(&c1);
    dtv_check_free(&c2);
    dtv_runset_free(&set);
    return rc;
}

static int cmd_ops(const struct options *o)
{
    if (o->n_inputs != 2) {
        fprintf(stderr, "%s: ops needs RECORDS and TRACE (the records file and the per-op CSV of "
                        "the same dtexec run)\n", prog);
        return 2;
    }
    if (o->output && check_output(o->output))
        return 2;
    struct dtv_runset set;
    struct dt_error err;
    struct dt_calibration cal;
    dt_error_clear(&err);
    dtv_runset_init(&set);
    struct dtv_load_options lo = {.topology = o->topology};
    int rc = dtv_runset_load(&set, o->inputs[0], &lo, &err);
    if (rc) {
        dtv_runset_free(&set);
        return fail(&err, rc);
    }
    if (o->calibration && (rc = load_calibration(o->calibration, &set, &cal))) {
        dtv_runset_free(&set);
        return rc;
    }
    struct dtv_ops_report rep;
    const struct dtv_run *run = &set.runs[set.n - 1];
    int e = dtv_ops_compare(run, o->inputs[1], o->calibration ? &cal : NULL, stdout, &rep, &err);
    if (e) {
        rc = fail(&err, e);
    } else if (o->output) {
        struct dt_calibration out;
        dtv_ops_calibration(run, o->inputs[1], &rep, &out);
        if (out.n_entries == 0) {
            fprintf(stderr, "%s: no class could be fitted: nothing written to %s\n", prog,
                    o->output);
            rc = 1;
        } else {
            rc = save_calibration(o->output, &out, o->quiet);
        }
    }
    dtv_runset_free(&set);
    return rc;
}

static int cmd_gpu(const struct options *o)
{
    if (o->n_inputs > 1) {
        fprintf(stderr, "%s: gpu takes at most one TABLE (got '%s' too)\n", prog, o->inputs[1]);
        return 2;
    }
    struct dtv_fitspec spec;
    bool given;
    int rc = get_spec(o, &spec, &given);
    if (rc || (o->dir && (rc = prepare_dir("--dir", o->dir))))
        return rc ? rc : 2;
    struct dtv_gpu_options go = {.table = o->n_inputs ? o->inputs[0] : NULL,
                                 .spec = given ? &spec : NULL, .dir = o->dir,
                                 .verbose = o->quiet ? NULL : stderr};
    struct dt_error err;
    dt_error_clear(&err);
    rc = dtv_gpu_report(&go, stdout, &err);
    return rc ? fail(&err, rc) : 0;
}

static int cmd_loop(const struct options *o, const char *argv0)
{
    struct dtv_loop_options lo = o->loop;
    lo.dir = o->dir ? o->dir : "dtvalidate-loop";
    if (prepare_dir("--dir", lo.dir))
        return 2;
    if (!lo.train)
        lo.train = o->train;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dtv_loop(argv0, &lo, o->quiet ? NULL : stderr, &err);
    if (rc == DTV_LOOP_SKIP) {
        dt_error_print(prog, &err);
        return 77;
    }
    return rc ? fail(&err, rc) : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    /* Rows on stdout and notes on stderr often go to one file (2>&1): a fully buffered
     * stdout would be written in blocks that cut rows where a note falls. Line buffered, each
     * row is written whole, and each note is one fprintf. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct options o;
    memset(&o, 0, sizeof o);
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("dtvalidate %s\n", PACKAGE_VERSION);
        return 0;
    }
    static const char *const commands[] = {"calibrate", "predict", "compare", "plot",
                                           "seed002", "loop", "ops", "gpu", NULL};
    bool known = false;
    for (const char *const *c = commands; *c; c++)
        known = known || strcmp(*c, cmd) == 0;
    if (!known) {
        fprintf(stderr, "%s: unknown command '%s' (commands: calibrate predict compare plot "
                        "seed002 loop ops gpu; see --help)\n", prog, cmd);
        return 2;
    }
    o.command = cmd;
    int rc = parse_args(argc - 1, argv + 1, &o);
    if (rc)
        return rc;
    if ((strcmp(cmd, "seed002") == 0 || strcmp(cmd, "loop") == 0) && o.n_inputs) {
        fprintf(stderr, "%s: %s takes no INPUT (got '%s')\n", prog, cmd, o.inputs[0]);
        return 2;
    }
    if (strcmp(cmd, "calibrate") == 0)
        return cmd_calibrate(&o);
    if (strcmp(cmd, "predict") == 0)
        return cmd_predict(&o);
    if (strcmp(cmd, "compare") == 0)
        return cmd_compare(&o, false);
    if (strcmp(cmd, "plot") == 0)
        return cmd_compare(&o, true);
    if (strcmp(cmd, "seed002") == 0)
        return cmd_seed002(&o);
    if (strcmp(cmd, "ops") == 0)
        return cmd_ops(&o);
    if (strcmp(cmd, "gpu") == 0)
        return cmd_gpu(&o);
    return cmd_loop(&o, argv[0]);
}
