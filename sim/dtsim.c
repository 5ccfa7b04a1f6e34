/* dtsim: predicts the epoch time of distributed-training strategies on a cluster. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/calibration.h"
#include "dt/costmodel.h"
#include "dt/datafile.h"
#include "dt/table.h"
#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "dt/units.h"
#include "epoch.h"
#include "estimate.h"
#include "heap.h"
#include "links.h"
#include "player.h"
#include "recommend.h"
#include "split.h"

#define DEFAULT_MODEL "cnn690k"
#define MAX_SWEEP 32

enum format { FMT_TABLE, FMT_CSV, FMT_JSON };

struct row {
    int nodes, ppn, ranks;
    enum dt_strategy strategy;
    int global_batch;
    long iters;                    /* per epoch */
    double iter_s, epoch_s, compute_s, comm_s, idle_s, samples_per_s;
    double read_s;                 /* reading one step's data (the slowest node) */
    double util;                   /* busy compute share of the iteration, mean per rank */
    double price_h;                /* USD/h of the nodes it holds; 0 = no price */
    double epoch_lo_s, epoch_hi_s; /* --calibration: 95% prediction interval */
    double mem_weights, mem_grads, mem_opt, mem_act, mem_comm, mem_total;
    /* the rank that misses its own device's memory by the most (-1: every rank fits; a mixed
     * cluster's devices differ), its need and its device's memory */
    int over_rank;
    double over_need, over_cap;
    double speedup, efficiency;
    long events, flows;
    /* pipelines: stages, micro-batches, idle share, per-stage compute and activations */
    int stages, micro_batches, chunks;
    double bubble;
    double *stage_compute_s, *stage_act_B;
    int *stage_first;   /* first layer of each stage's first chunk */
    struct dt_link_report *links; /* --links: the busiest links of its iteration, or NULL */
};

struct options {
    const char *topology, *model, *trace, *output;
    bool strategies[DT_STRAT_COUNT];
    bool strategies_given;
    struct dt_plan_options par;   /* the parallel config (batch, scaling, buckets, pipelines) */
    int epochs;
    long dataset_size;
    enum format format;
    bool summary, dump_plan, detect, topology_info;
    bool eager;                   /* --expansion eager: every collective round up front */
    struct dt_ranklist trace_ranks; /* --trace-ranks (n == 0: every rank) */
    FILE *out;                    /* where the table, --summary and --dump-plan go */
    int sweep_nodes[MAX_SWEEP], n_sweep_nodes;
    int sweep_ppn[MAX_SWEEP], n_sweep_ppn;
    bool recommend;               /* --recommend: search the parallel configs */
    long global_batch;            /* --recommend: samples per step (0: -b x devices) */
    double memory_limit;          /* --memory-limit bytes (0: the smallest device's) */
    int top;                      /* --top N */
    bool no_prune;                /* --no-prune: --recommend simulates every config that fits */
    bool precision_given;         /* --precision: --recommend searches that one only */
    int links;                    /* --links N: the N busiest links of each strategy (0: no) */
    bool estimate;                /* --estimate: forecast each simulation's run time, run none */
};

static const char *prog = "dtsim";

/* --calibration FILE: cost parameters fitted by dtvalidate replace dt_cost_defaults; when the
 * file carries their covariance, each epoch time gets a 95% prediction interval by the delta
 * method (include/dt/calibration.h): one more simulation per fitted parameter. */
static const char *calibration_path;
static struct dt_calibration calibration;

/* --activations fused|separate: whether an activation after a conv, dense, norm or add costs a
 * kernel of its own (-1: the device's default, fused on GPUs). The shipped GPU calibrations were
 * fitted with each framework's own choice (PyTorch's eager ReLUs separate: validate/published.c). */
static int fused_activations = -1;

/* --conv-layout nhwc|nchw: whether tensor-core convolutions get NCHW activations, which cuDNN
 * transposes to NHWC and back (dt_op_layout_bytes; -1: NHWC). The shipped GPU calibrations were
 * fitted with each framework's layout (NCHW for fp32 and tf32: validate/published.c). */
static int conv_nchw = -1;

/* One simulation of a plan: the first run (the calibrated parameters themselves) keeps its
 * result and writes the trace; the interval's perturbed runs keep only the iteration time. */
struct sim_run {
    const struct dt_plan *plan;
    const struct dt_sim_options *opt;
    struct dt_sim_result res;
    bool have_res;
};

/* Warns on stderr before a simulation forecast to take minutes; with --estimate, prints the
 * forecast and returns true: the caller simulates nothing. */
static bool forecast(const struct options *o, const struct dt_plan *plan, enum dt_strategy s,
                     const struct dt_topology *topo)
{
    double rate, flows = dt_estimate_flows(plan), secs = dt_estimate_seconds(flows, &rate);
    if (o->estimate)
        fprintf(o->out, "%s on %s (%d ranks): about %.3g flows, about %.3g s to simulate\n",
                dt_strategy_name(s), topo->name, plan->n_ranks, flows, secs);
    if (secs > DT_ESTIMATE_WARN_S)
        fprintf(stderr, "%s: warning: simulating %s on %d ranks may take about %.0f s (%.0f "
                        "min): about %.3g flows (from the plan's sends and collective rounds) "
                        "at %.2g flows/s (measured on a 2-core machine)\n",
                prog, dt_strategy_name(s), plan->n_ranks, secs, secs / 60, flows, rate);
    return o->estimate;
}

/* dt_sim_options.on_links for --links: ctx is the row's report. */
static int fill_links(void *ctx, const struct dt_sim *sim, const struct dt_simnet *net,
                      double iter_s, struct dt_error *err)
{
    return dt_link_report_fill(ctx, sim, net, iter_s, err);
}

static int simulated_iter(void *ctx, const struct dt_cost_params *cp, double *iter_s,
                          struct dt_error *err)
{
    struct sim_run *run = ctx;
    struct dt_sim_result res;
    bool first = !run->have_res;
    int rc = dt_sim_run(run->plan, cp, first ? run->opt : NULL, &res, err);
    *iter_s = rc ? 0 : res.iter_s;
    if (!rc && first) {
        run->res = res;
        run->have_res = true;
    } else if (!rc) {
        dt_sim_result_free(&res);
    }
    return rc;
}

static void usage(FILE *out)
{
    fprintf(out,
        "Usage: dtsim --topology FILE [options]\n"
        "Predicts, for a model and a cluster, the epoch time of every distributed-training\n"
        "strategy that fits, ranked.\n\n"
        "  -t, --topology FILE      cluster description (topologies/*.yaml, or a name: 2n4p)\n"
        "      --detect             use this machine as the topology (hwloc)\n"
        "  -m, --model FILE         network description (default: %s)\n"
        "      --summary            print the model's layer table and exit\n"
        "      --topology-info      print the topology's job shape (key=value lines) and exit\n"
        "  -s, --strategy LIST      comma-separated strategies (default: all that fit)\n"
        "  -e, --epochs N           epochs (default 1)\n"
        "      --dataset-size N     training samples per epoch (default: the model's\n"
        "                           dataset, else 60000)\n"
        "      --calibration FILE   cost parameters fitted by dtvalidate; epoch times then get\n"
        "                           a 95%% prediction interval\n"
        "      --activations fused|separate  activations fused into the kernel before them\n"
        "                           or each its own pass (default: fused on GPUs only)\n"
        "      --conv-layout nhwc|nchw  activations' layout: in nchw tensor-core convolutions\n"
        "                           transpose them (default nhwc)\n"
        "  -f, --format table|csv|json  output format (default table)\n"
        "  -o, --output FILE        write the output to FILE instead of stdout\n"
        "      --trace FILE         Chrome trace (Perfetto) of one iteration of each strategy\n"
        "      --sweep SPEC         shapes from the topology's node: 'nodes=1,2,4 ppn=1,2,4,8'\n"
        "      --estimate           forecast each simulation's run time (flows x a measured\n"
        "                           rate) and simulate nothing; dtsim warns by itself\n"
        "                           before a simulation forecast over 60 s\n"
        "      --links [N]          the N busiest network links of each strategy's\n"
        "                           iteration (default 10): busy time, bytes\n"
        "      --trace-ranks LIST   the trace shows these ranks only (and the links their\n"
        "                           flows cross): '0-7,1024'\n"
        "      --expansion lazy|eager  collectives' rounds expanded as each rank reaches\n"
        "                           them, or all when they start (same result; default lazy)\n"
        "      --dump-plan          print each strategy's plan (per-rank ops) and exit\n"
        "      --recommend          search strategy x dp/tp/pp x micro-batches x chunks x\n"
        "                           accumulation x buckets x ZeRO x recompute for the fastest\n"
        "                           configs that fit memory (under mpiexec -n K: split K ways)\n"
        "      --global-batch N     --recommend: samples per step (default: -b x devices)\n"
        "      --memory-limit SIZE  --recommend: memory per device (default: the device's)\n"
        "      --top N              --recommend: configs to print (default 5)\n"
        "      --no-prune           --recommend: simulate every config that fits (no\n"
        "                           bound pruning; slow, for checking the pruning)\n"
        "  -h, --help               this help\n"
        "  -V, --version            version\n\n"
        "Parallel config (shared with dtexec):\n", DEFAULT_MODEL);
    dt_parallel_usage(out);
    fprintf(out, "\nStrategies:\n");
    for (int s = 0; s < DT_STRAT_COUNT; s++)
        fprintf(out, "  %-20s %s\n", dt_strategy_name(s), dt_strategy_description(s));
}

static int bad_flag(const char *flag, const char *fmt, const char *value)
{
    fprintf(stderr, "%s: %s: ", prog, flag);
    fprintf(stderr, fmt, value);
    fprintf(stderr, "\n");
    return 2;
}

/* A whole positive integer in [1, max]. */
static int parse_count(const char *flag, const char *s, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < 1 || v > max) {
        char fmt[128];
        snprintf(fmt, sizeof fmt, "expected a whole number from 1 to %ld, got '%%s'", max);
        return bad_flag(flag, fmt, s);
    }
    *out = v;
    return 0;
}

static int parse_list(const char *flag, const char *list, int *vals, int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    *n = 0;
    size_t len = strlen(list);
    if (!len || list[0] == ',' || list[len - 1] == ',' || strstr(list, ",,"))
        return bad_flag(flag, "an empty item in '%s'", list);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long v;
        if (*n == MAX_SWEEP)
            return bad_flag(flag, "at most 32 values in '%s'", list);
        if (parse_count(flag, tok, 4096, &v))
            return 2;
        vals[(*n)++] = (int)v;
    }
    if (*n == 0)
        return bad_flag(flag, "empty list in '%s'", list);
    return 0;
}

/* "nodes=1,2,4 ppn=1,2" (one or several words). */
static int parse_sweep(struct options *o, const char *spec)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        bool nodes = strncmp(w, "nodes=", 6) == 0, ppn = strncmp(w, "ppn=", 4) == 0;
        if ((nodes && o->n_sweep_nodes) || (ppn && o->n_sweep_ppn))
            return bad_flag("--sweep", "'%s' repeats a key already given", w);
        if (nodes) {
            if (parse_list("--sweep", w + 6, o->sweep_nodes, &o->n_sweep_nodes))
                return 2;
        } else if (ppn) {
            if (parse_list("--sweep", w + 4, o->sweep_ppn, &o->n_sweep_ppn))
                return 2;
        } else {
            return bad_flag("--sweep", "expected nodes=LIST and/or ppn=LIST, got '%s'", w);
        }
    }
    return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
    static const struct option own[] = {
        {"topology", required_argument, NULL, 't'}, {"model", required_argument, NULL, 'm'},
        {"strategy", required_argument, NULL, 's'}, {"epochs", required_argument, NULL, 'e'},
        {"dataset-size", required_argument, NULL, 'D'},
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},   {"trace", required_argument, NULL, 'T'},
        {"sweep", required_argument, NULL, 'w'},    {"summary", no_argument, NULL, 'y'},
        {"dump-plan", no_argument, NULL, 'P'},      {"detect", no_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},           {"version", no_argument, NULL, 'V'},
        {"calibration", required_argument, NULL, 'C'},
        {"activations", required_argument, NULL, 'A'},
        {"conv-layout", required_argument, NULL, 'H'},
        {"topology-info", no_argument, NULL, 'I'},
        {"recommend", no_argument, NULL, 'R'},
        {"global-batch", required_argument, NULL, 'G'},
        {"memory-limit", required_argument, NULL, 'L'},
        {"top", required_argument, NULL, 'N'},
        {"no-prune", no_argument, NULL, 'U'},
        {"expansion", required_argument, NULL, 'X'},
        {"trace-ranks", required_argument, NULL, 'K'},
        {"links", optional_argument, NULL, 'Q'},
        {"estimate", no_argument, NULL, 'E'}};
    /* dtsim's own flags, then the parallel config's (dt_parallel_set parses those) */
    struct option longopts[64];
    const struct option *par = dt_parallel_longopts();
    if (dt_parallel_merge_longopts(own, (int)(sizeof own / sizeof own[0]), longopts, 64) < 0)
        return bad_flag("--help", "%s", "internal: too many options");
    long v;
    struct dt_error perr;
    int c;
    bool sweeping = false;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":t:m:s:b:e:f:o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 't': o->topology = optarg; break;
        case 'm': o->model = optarg; break;
        case 's': {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", optarg);
            o->strategies_given = true;
            for (char *save, *tok = strtok_r(buf, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
                int s = dt_strategy_parse(tok);
                if (s < 0)
                    return bad_flag("--strategy", "unknown strategy '%s' (see --help)", tok);
                o->strategies[s] = true;
            }
            break;
        }
        case 'b':
            if (dt_parallel_set(&o->par, "batch", optarg, &perr)) {
                dt_error_print(prog, &perr);
                return 2;
            }
            break;
        case 'e':
            if (parse_count("--epochs", optarg, 1000000, &v))
                return 2;
            o->epochs = (int)v;
            break;
        case 'D':
            if (parse_count("--dataset-size", optarg, 1L << 40, &v))
                return 2;
            o->dataset_size = v;
            break;
        case 'f':
            if (strcmp(optarg, "table") == 0)
                o->format = FMT_TABLE;
            else if (strcmp(optarg, "csv") == 0)
                o->format = FMT_CSV;
            else if (strcmp(optarg, "json") == 0)
                o->format = FMT_JSON;
            else
                return bad_flag("--format", "expected table, csv or json, got '%s'", optarg);
            break;
        case 'o': o->output = optarg; break;
        case 'T': o->trace = optarg; break;
        case 'w':
            if (sweeping)
                return bad_flag("--sweep", "given twice (%s): put every key in one --sweep",
                                optarg);
            if (parse_sweep(o, optarg))
                return 2;
            sweeping = true;
            break;
        case 'y': o->summary = true; break;
        case 'P': o->dump_plan = true; break;
        case 'd': o->detect = true; break;
        case 'I': o->topology_info = true; break;
        case 'C': calibration_path = optarg; break;
        case 'A':
            if (strcmp(optarg, "fused") != 0 && strcmp(optarg, "separate") != 0)
                return bad_flag("--activations", "expected fused or separate, got '%s'", optarg);
            fused_activations = strcmp(optarg, "fused") == 0;
            break;
        case 'H':
            if (strcmp(optarg, "nhwc") != 0 && strcmp(optarg, "nchw") != 0)
                return bad_flag("--conv-layout", "expected nhwc or nchw, got '%s'", optarg);
            conv_nchw = strcmp(optarg, "nchw") == 0;
            break;
        case 'R': o->recommend = true; break;
        case 'G':
            if (parse_count("--global-batch", optarg, 1L << 24, &v))
                return 2;
            o->global_batch = v;
            break;
        case 'L': {
            char why[256] = "";
            if (dt_parse_quantity(optarg, DT_UNIT_BYTES, &o->memory_limit, why, sizeof why) ||
                !(o->memory_limit >= 1))
                return bad_flag("--memory-limit", "expected a size such as '80 GiB', got '%s'",
                                optarg);
            break;
        }
        case 'N':
            if (parse_count("--top", optarg, 1000, &v))
                return 2;
            o->top = (int)v;
            break;
        case 'K':
            if (dt_ranklist_parse(prog, "--trace-ranks", optarg, &o->trace_ranks))
                return 2;
            break;
        case 'E': o->estimate = true; break;
        case 'U': o->no_prune = true; break;
        case 'Q': /* --links, --links=N or --links N */
            o->links = 10;
            if (!optarg && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9')
                optarg = argv[optind++];
            if (optarg && parse_count("--links", optarg, 100000, &v))
                return 2;
            if (optarg)
                o->links = (int)v;
            break;
        case 'X':
            if (strcmp(optarg, "lazy") != 0 && strcmp(optarg, "eager") != 0)
                return bad_flag("--expansion", "expected lazy or eager, got '%s'", optarg);
            o->eager = strcmp(optarg, "eager") == 0;
            break;
        case 'h': usage(stdout); dt_split_finalize(); exit(0);
        case 'V': printf("dtsim %s\n", PACKAGE_VERSION); dt_split_finalize(); exit(0);
        case ':':
            fprintf(stderr, "%s: %s needs a value\n", prog, argv[optind - 1]);
            return 2;
        default:
            if (c >= 0x400 && c < 0x400 + 64) {
                if (dt_parallel_set(&o->par, par[c - 0x400].name, optarg, &perr)) {
                    dt_error_print(prog, &perr);
                    return 2;
                }
                o->precision_given |= strcmp(par[c - 0x400].name, "precision") == 0;
                break;
            }
            fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, argv[optind - 1]);
            return 2;
        }
    }
    /* `--sweep nodes=1,2 ppn=1,2`: the second word arrives as an operand. */
    for (; optind < argc; optind++) {
        if (!sweeping || !strchr(argv[optind], '=')) {
            fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, argv[optind]);
            return 2;
        }
        if (parse_sweep(o, argv[optind]))
            return 2;
    }
    if (o->detect && o->topology)
        return bad_flag("--detect", "%s", "describes this machine: give it or --topology, not both");
    if ((o->dump_plan || o->summary || o->topology_info) && o->format != FMT_TABLE)
        return bad_flag(o->dump_plan ? "--dump-plan" : o->summary ? "--summary" : "--topology-info",
                        "%s", "prints text only: drop --format");
    if (!o->recommend && (o->global_batch || o->memory_limit > 0 || o->top || o->no_prune))
        return bad_flag(o->global_batch ? "--global-batch" : o->memory_limit > 0 ?
                        "--memory-limit" : o->top ? "--top" : "--no-prune", "%s",
                        "applies to --recommend only");
    if (o->recommend && (o->n_sweep_nodes || o->n_sweep_ppn || o->strategies_given ||
                         o->dump_plan || o->trace || o->summary || o->topology_info))
        return bad_flag("--recommend", "%s", "searches every strategy on the topology as given: "
                        "drop --sweep, --strategy, --dump-plan, --trace, --summary and "
                        "--topology-info");
    if (o->links && (o->recommend || o->n_sweep_nodes || o->n_sweep_ppn || o->dump_plan ||
                     o->summary || o->topology_info))
        return bad_flag("--links", "%s", "reports the links of each strategy on the topology as "
                        "given: drop --recommend, --sweep, --dump-plan, --summary and "
                        "--topology-info");
    if (o->estimate && (o->recommend || o->dump_plan || o->summary || o->topology_info ||
                        o->trace || o->links))
        return bad_flag("--estimate", "%s", "forecasts the simulations and runs none: drop "
                        "--recommend, --dump-plan, --summary, --topology-info, --trace and "
                        "--links");
    if (o->trace_ranks.n && !o->trace)
        return bad_flag("--trace-ranks", "%s", "bounds the trace: give --trace FILE too");
    if (o->topology_info && (o->summary || o->dump_plan))
        return bad_flag("--topology-info", "%s", "give one of --topology-info, --summary and --dump-plan");
    return 0;
}

static int load_inputs(const struct options *o, struct dt_model **model,
                       struct dt_topology **topo)
{
    struct dt_error err;
    char path[1024];
    dt_error_clear(&err);
    /* --topology-info needs no model */
    if (!o->topology_info && (dt_locate_data("--model", "models", o->model, path, sizeof path,
                                             &err) ||
                              dt_model_load(path, model, &err))) {
        dt_error_print(prog, &err);
        return 2;
    }
    if (o->summary)
        return 0;
    if (o->detect) {
        if (dt_topology_detect(topo, &err)) {
            dt_error_print(prog, &err);
            return 2;
        }
        return 0;
    }
    if (!o->topology) {
        fprintf(stderr, "%s: --topology FILE is required (e.g. --topology topologies/2n4p.yaml)\n",
                prog);
        return 2;
    }
    if (dt_locate_data("--topology", "topologies", o->topology, path, sizeof path, &err) ||
        dt_topology_load(path, topo, &err)) {
        dt_error_print(prog, &err);
        return 2;
    }
    return 0;
}

/* Pipelines: stages, micro-batches, the idle share of the iteration (the bubble), compute and
 * activation bytes per stage (mean over the stage's replicas, the largest replica). */
static int pipeline_figures(const struct dt_plan *plan, const struct dt_sim_result *res,
                            struct row *row)
{
    int S = plan->stages;
    row->stages = S;
    row->micro_batches = plan->micro_batches;
    row->bubble = res->iter_s > 0 ? row->idle_s / res->iter_s : 0;
    row->stage_compute_s = calloc((size_t)S, sizeof *row->stage_compute_s);
    row->stage_act_B = calloc((size_t)S, sizeof *row->stage_act_B);
    row->chunks = plan->chunks;
    row->stage_first = calloc((size_t)(S * plan->chunks), sizeof *row->stage_first);
    if (!row->stage_compute_s || !row->stage_act_B || !row->stage_first)
        return DT_ENOMEM;
    for (int c = 0; c < S * plan->chunks; c++)
        row->stage_first[c] = plan->chunk_first[c];
    int per_stage = plan->n_ranks / S; /* its data-parallel replicas x its tensor group */
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        struct dt_memory mem;
        dt_plan_rank_memory(plan, r, &mem);
        row->stage_compute_s[rp->stage] += res->rank[r].compute_s / per_stage;
        if (mem.activations > row->stage_act_B[rp->stage])
            row->stage_act_B[rp->stage] = mem.activations;
    }
    return DT_OK;
}

static void row_free(struct row *r)
{
    free(r->stage_compute_s);
    free(r->stage_act_B);
    free(r->stage_first);
    dt_link_report_free(r->links);
    free(r->links);
    r->links = NULL;
}

/* Each node group's cost parameters: its device kind's defaults, with --calibration's fitted
 * values over them (a mixed cluster's CPUs and GPUs each keep their own terms). */
static struct dt_cost_params *group_params(const struct dt_topology *topo)
{
    struct dt_cost_params *gcp = calloc((size_t)topo->n_groups, sizeof *gcp);
    for (int g = 0; gcp && g < topo->n_groups; g++) {
        dt_cost_defaults(&gcp[g], topo->groups[g].device.kind);
        if (calibration_path)
            dt_calibration_apply(&calibration, &gcp[g]);
        if (fused_activations >= 0)
            gcp[g].fuse_activations = fused_activations;
        if (conv_nchw >= 0)
            gcp[g].conv_nchw = conv_nchw;
    }
    return gcp;
}

static const struct dt_cost_params *rank_params(const struct dt_cost_params *gcp,
                                                const struct dt_topology *topo, int rank)
{
    return &gcp[dt_topology_group_of_rank(topo, rank) - topo->groups];
}

/* Simulates one strategy on one topology shape; fills a row. */
static int simulate(const struct options *o, const struct dt_model *model,
                    const struct dt_topology *topo, enum dt_strategy s, FILE *trace,
                    int *trace_pid, struct row *row, struct dt_error *err)
{
    struct dt_plan_options po = o->par;
    po.strategy = s;
    struct dt_plan *plan;
    int rc = dt_plan_build(model, topo, &po, &plan, err);
    if (rc)
        return rc;
    if (o->dump_plan) {
        dt_plan_print(plan, o->out);
        dt_plan_destroy(plan);
        return DT_OK;
    }
    if (forecast(o, plan, s, topo)) {
        dt_plan_destroy(plan);
        return DT_OK;
    }
    if (o->trace_ranks.n && dt_ranklist_max(&o->trace_ranks) >= topo->n_ranks) {
        dt_plan_destroy(plan);
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--trace-ranks: rank %d is not among the "
                       "%d ranks of %s", dt_ranklist_max(&o->trace_ranks), topo->n_ranks,
                       topo->name);
    }
    struct dt_cost_params *gcp = group_params(topo);
    if (!gcp) {
        dt_plan_destroy(plan);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    /* the plan's default parameters (network, eager limit): the first group's, calibrated
     * (the interval applies the calibration again, which sets the same values) */
    const struct dt_cost_params *cp = &gcp[0];
    /* a sweep's traces hold one process per strategy and shape: name both */
    char name[96];
    snprintf(name, sizeof name, "%s on %d node%s x %d", dt_strategy_name(s), topo->n_nodes,
             topo->n_nodes > 1 ? "s" : "", topo->groups[0].devices);
    struct dt_sim_options so = {.trace = trace, .trace_pid = (*trace_pid)++, .trace_name = name,
                                .group_cp = gcp, .eager = o->eager,
                                .trace_ranks = o->trace_ranks.n ? &o->trace_ranks : NULL};
    struct dt_link_report *links = NULL;
    if (o->links && !(links = calloc(1, sizeof *links))) {
        free(gcp);
        dt_plan_destroy(plan);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    if (links) {
        links->want = o->links;
        so.on_links = fill_links;
        so.links_ctx = links;
    }
    struct sim_run run = {.plan = plan, .opt = &so};
    double iter_c = 0, iter_lo = 0, iter_hi = 0;
    /* with a calibration, the interval's first run is the row's: each plan runs once */
    if (calibration_path)
        rc = dt_calibration_interval(&calibration, cp, DT_CAL_PREDICTION, simulated_iter, &run,
                                     &iter_c, &iter_lo, &iter_hi, err);
    else
        rc = simulated_iter(&run, cp, &iter_c, err);
    if (rc) {
        if (run.have_res)
            dt_sim_result_free(&run.res);
        dt_link_report_free(links);
        free(links);
        free(gcp);
        dt_plan_destroy(plan);
        return rc;
    }
    struct dt_sim_result res = run.res;
    memset(row, 0, sizeof *row);
    row->links = links;
    row->strategy = s;
    row->ranks = plan->n_ranks;
    row->nodes = dt_topology_node_of(topo, plan->n_ranks - 1) + 1;
    row->ppn = topo->groups[0].devices;
    row->global_batch = plan->global_batch;
    /* the step as dtvalidate predicts it: the slower of the play and the read ahead, and the
     * ranks' mean compute, communication and idle time */
    struct dt_step step;
    dt_step_fill(&res, dt_step_read_s(plan, cp), &step);
    row->read_s = step.read_s;
    row->iter_s = step.iter_s;
    row->compute_s = step.compute_s;
    row->comm_s = step.comm_s;
    row->idle_s = step.idle_s;
    long iters = dt_epoch_iterations(o->dataset_size, plan->global_batch);
    row->iters = iters;
    row->epoch_s = iters * row->iter_s;
    row->epoch_lo_s = iters * (calibration_path ? fmax(iter_lo, row->read_s) : row->iter_s);
    row->epoch_hi_s = iters * (calibration_path ? fmax(iter_hi, row->read_s) : row->iter_s);
    row->price_h = dt_topology_nodes_price_per_h(topo, row->nodes);
    row->over_rank = -1;
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_rank_stats *st = &res.rank[r];
        struct dt_memory mem;
        dt_plan_rank_memory(plan, r, &mem);
        double cap = dt_topology_group_of_rank(topo, r)->device.mem_bytes;
        if (cap > 0 && mem.total - cap > (row->over_rank < 0 ? 0 : row->over_need - row->over_cap)) {
            row->over_rank = r;
            row->over_need = mem.total;
            row->over_cap = cap;
        }
        /* the framework's per-iteration host work leaves the device idle */
        row->util += (st->compute_s - rank_params(gcp, topo, r)->iter_overhead_s) /
                     (row->iter_s * plan->n_ranks);
        if (mem.total > row->mem_total) {
            row->mem_total = mem.total;
            row->mem_weights = mem.weights;
            row->mem_grads = mem.grads;
            row->mem_opt = mem.optimizer;
            row->mem_act = mem.activations + mem.input + mem.state;
            row->mem_comm = mem.comm;
        }
    }
    if (dt_strategy_info(s)->pipeline && (rc = pipeline_figures(plan, &res, row))) {
        dt_sim_result_free(&res);
        dt_plan_destroy(plan);
        free(gcp);
        return dt_fail(err, rc, NULL, 0, 0, "out of memory");
    }
    row->samples_per_s = plan->global_batch / row->iter_s;
    row->events = res.events;
    row->flows = res.flows;
    dt_sim_result_free(&res);
    free(gcp);
    dt_plan_destroy(plan);
    return DT_OK;
}

static int cmp_rows(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    if (x->nodes != y->nodes)
        return x->nodes - y->nodes;
    if (x->ppn != y->ppn)
        return x->ppn - y->ppn;
    return (x->epoch_s > y->epoch_s) - (x->epoch_s < y->epoch_s);
}

#define MIB (1024.0 * 1024.0)

/* Under the table: each pipeline's stages, bubble, compute and activations per stage. */
static void print_pipelines(FILE *out, const struct dt_model *m, const struct row *rows, int n)
{
    bool any = false;
    for (int i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        if (!r->stages)
            continue;
        if (!any)
            fprintf(out, "\nPipelines (bubble: idle share of the iteration; per stage: its layers, "
                         "compute (ms), activations (MiB)):\n");
        any = true;
        fprintf(out, "%-20s %2d stages x %2d micro-batches, bubble %5.1f %%:", 
                dt_strategy_name(r->strategy), r->stages, r->micro_batches, 100 * r->bubble);
        int C = r->stages * r->chunks;
        for (int s = 0; s < r->stages; s++) {
            fputs(s ? " |" : "", out);
            for (int c = s; c < C; c += r->stages)
                fprintf(out, "%s%d-%d", c == s ? " " : ",", r->stage_first[c],
                        c + 1 < C ? r->stage_first[c + 1] - 1 : m->n_layers - 1);
            fprintf(out, " %.3f %.1f", r->stage_compute_s[s] * 1e3, r->stage_act_B[s] / MIB);
        }
        fputc('\n', out);
    }
}

/* Per-stage figures as "a;b;c" for CSV and JSON arrays. */
static void stage_list(char *buf, size_t len, const double *v, int n, const char *sep)
{
    size_t k = 0;
    buf[0] = 0;
    for (int s = 0; s < n && k < len; s++)
        k += (size_t)snprintf(buf + k, len - k, "%s%.9g", s ? sep : "", v[s]);
}

/* Optional columns of the ranked table, shown when some row has something to say. */
struct columns {
    bool run, read, price, price_run, interval;
};

static struct columns optional_columns(const struct options *o, const struct row *rows, int n)
{
    struct columns c = {.run = o->epochs > 1, .interval = calibration_path != NULL};
    for (int i = 0; i < n; i++) {
        c.read = c.read || rows[i].read_s > 0;
        c.price = c.price || rows[i].price_h > 0;
    }
    c.price_run = c.price && c.run;
    return c;
}

/* A dollar figure, or "-" without a price. */
static void price_cell(struct dt_table *tb, double price_h, double seconds)
{
    if (price_h > 0)
        dt_table_cell(tb, "%.2f", price_h * seconds / 3600);
    else
        dt_table_cell(tb, "%s", "-");
}

/* The ranked table: one section per topology shape, one row per strategy. */
static void fill_ranking(struct dt_table *tb, const struct options *o, const struct row *rows,
                         int n)
{
    struct columns oc = optional_columns(o, rows, n);
    const char *heads[] = {"rank", "strategy", "ranks", "epoch (s)", "run (h)", "iter (ms)",
                           "compute (ms)", "comm (ms)", "idle (ms)", "read (ms)", "samples/s",
                           "util (%)", "mem (MiB)", "speedup", "eff (%)", "$/epoch", "$/run",
                           "epoch 95% interval (s)"};
    bool shown[] = {1, 1, 1, 1, oc.run, 1, 1, 1, 1, oc.read, 1, 1, 1, 1, 1, oc.price,
                    oc.price_run, oc.interval};
    for (int c = 0, k = 0; c < 18; c++)
        if (shown[c])
            dt_table_column(tb, k++, heads[c], c < 2);
    int shape_n = -1, shape_p = -1, rank = 0;
    for (int i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        if (r->nodes != shape_n || r->ppn != shape_p) {
            char line[96];
            snprintf(line, sizeof line, "%d node%s x %d per node:", r->nodes,
                     r->nodes > 1 ? "s" : "", r->ppn);
            dt_table_section(tb, line);
            shape_n = r->nodes;
            shape_p = r->ppn;
            rank = 0;
        }
        dt_table_cell(tb, "%d", ++rank);
        dt_table_cell(tb, "%s", dt_strategy_name(r->strategy));
        dt_table_cell(tb, "%d", r->ranks);
        dt_table_cell(tb, "%.2f", r->epoch_s);
        if (oc.run)
            dt_table_cell(tb, "%.2f", r->epoch_s * o->epochs / 3600);
        dt_table_cell(tb, "%.3f", r->iter_s * 1e3);
        dt_table_cell(tb, "%.3f", r->compute_s * 1e3);
        dt_table_cell(tb, "%.3f", r->comm_s * 1e3);
        dt_table_cell(tb, "%.3f", r->idle_s * 1e3);
        if (oc.read)
            dt_table_cell(tb, "%.3f", r->read_s * 1e3);
        dt_table_cell(tb, "%.0f", r->samples_per_s);
        dt_table_cell(tb, "%.1f", r->util * 100);
        dt_table_cell(tb, "%.1f", r->mem_total / MIB);
        dt_table_cell(tb, "%.2f", r->speedup);
        dt_table_cell(tb, "%.1f", r->efficiency * 100);
        if (oc.price)
            price_cell(tb, r->price_h, r->epoch_s);
        if (oc.price_run)
            price_cell(tb, r->price_h, r->epoch_s * o->epochs);
        if (oc.interval && r->epoch_hi_s > r->epoch_lo_s)
            dt_table_cell(tb, "[%.2f, %.2f]", r->epoch_lo_s, r->epoch_hi_s);
        else if (oc.interval)
            dt_table_cell(tb, "none");
    }
}

static void fill_memory(struct dt_table *tb, const struct row *rows, int n)
{
    const char *heads[] = {"strategy", "ranks", "weights", "grads", "optimizer",
                           "activations", "buffers", "total"};
    for (int c = 0; c < 8; c++)
        dt_table_column(tb, c, heads[c], c < 1);
    for (int i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        dt_table_cell(tb, "%s", dt_strategy_name(r->strategy));
        dt_table_cell(tb, "%d", r->ranks);
        double v[] = {r->mem_weights, r->mem_grads, r->mem_opt, r->mem_act, r->mem_comm,
                      r->mem_total};
        for (int k = 0; k < 6; k++)
            dt_table_cell(tb, "%.1f", v[k] / MIB);
    }
}

static int print_tables(FILE *out, const struct options *o, const struct row *rows, int n)
{
    struct columns oc = optional_columns(o, rows, n);
    struct dt_table *rank = dt_table_new(13 + oc.run + oc.read + oc.price + oc.price_run +
                                         oc.interval);
    struct dt_table *mem = dt_table_new(8);
    int rc = rank && mem ? 0 : -1;
    if (!rc) {
        fill_ranking(rank, o, rows, n);
        fill_memory(mem, rows, n);
        rc = dt_table_print(rank, out);
        fprintf(out, "\nMemory of the largest rank (MiB):\n");
        if (!rc)
            rc = dt_table_print(mem, out);
    }
    dt_table_destroy(rank);
    dt_table_destroy(mem);
    return rc;
}

static int print_table(FILE *out, const struct options *o, const struct dt_model *m,
                       const struct dt_topology *t, const struct row *rows, int n)
{
    char params[96];
    dt_model_describe_params(m, params, sizeof params);
    fprintf(out, "model %s (parameters: %s), topology %s, %s scaling, batch %d %s, "
                 "%ld samples/epoch, %d epoch%s\n",
            m->name, params, t->name, o->par.scaling == DT_SCALING_WEAK ? "weak" : "strong",
            o->par.batch, o->par.scaling != DT_SCALING_WEAK ? "global"
                          : o->par.tp > 1 ? "per replica (a tensor-parallel group)"
                          : "per device (per pipeline replica for pipelines)", o->dataset_size,
            o->epochs, o->epochs > 1 ? "s" : "");
    if (print_tables(out, o, rows, n))
        return -1;
    print_pipelines(out, m, rows, n);
    if (calibration_path)
        fprintf(out, "\ncost parameters: %s (fitted by %s on %d runs%s%s; %s)\n",
                calibration.path, calibration.tool[0] ? calibration.tool : "dtvalidate",
                calibration.n_obs, calibration.device_name[0] ? " of " : "",
                calibration.device_name,
                !dt_calibration_has_interval(&calibration)
                    ? "no interval: the file has neither a covariance nor a residual spread"
                : calibration.n_cov ? "95% prediction interval from the parameters' "
                                      "covariance and the fit's residual spread"
                                    : "95% prediction interval from the fit's residual spread "
                                      "alone: the file has no covariance");
    fprintf(out, "\nepoch = floor(samples / global batch) iterations x iteration time (the "
                 "final partial batch is dropped, as dtexec does)%s; compute/comm/idle: mean "
                 "per rank per iteration; mem: the largest rank (weights + gradients + "
                 "optimizer + activations + receive buffers); speedup against sequential on "
                 "one device.\n",
            o->epochs > 1 ? "; run = all the epochs" : "");
    for (int i = 0; i < n; i++)
        if (rows[i].links) {
            char title[96];
            snprintf(title, sizeof title, "%s on %d ranks", dt_strategy_name(rows[i].strategy),
                     rows[i].ranks);
            dt_link_report_table(rows[i].links, title, out);
        }
    return 0;
}

static void print_csv(FILE *out, const struct options *o, const struct dt_model *m,
                      const struct dt_topology *t, const struct row *rows, int n)
{
    fprintf(out, "model,topology,nodes,ppn,ranks,strategy,scaling,batch,global_batch,epochs,"
                 "epoch_s,iter_s,compute_s,comm_s,idle_s,samples_per_s,mem_weights_B,"
                 "mem_grads_B,mem_optimizer_B,mem_activations_B,mem_comm_B,mem_total_B,"
                 "speedup,efficiency,events,flows,stages,micro_batches,bubble,stage_compute_s,"
                 "stage_activations_B,iterations,run_s,read_s,util,mem_total_MiB,price_per_h,"
                 "usd_per_epoch,usd_per_run%s\n",
            calibration_path ? ",epoch_low_s,epoch_high_s" : "");
    for (int i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        fprintf(out, "%s,%s,%d,%d,%d,%s,%s,%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.0f,%.0f,"
                     "%.0f,%.0f,%.0f,%.0f,%.6g,%.6g,%ld,%ld",
                m->name, t->name, r->nodes, r->ppn, r->ranks, dt_strategy_name(r->strategy),
                o->par.scaling == DT_SCALING_WEAK ? "weak" : "strong", o->par.batch, r->global_batch,
                o->epochs, r->epoch_s, r->iter_s, r->compute_s, r->comm_s,
                r->idle_s, r->samples_per_s, r->mem_weights, r->mem_grads, r->mem_opt,
                r->mem_act, r->mem_comm, r->mem_total, r->speedup, r->efficiency, r->events,
                r->flows);
        char sc[4096], sa[4096];
        stage_list(sc, sizeof sc, r->stage_compute_s, r->stages, ";");
        stage_list(sa, sizeof sa, r->stage_act_B, r->stages, ";");
        fprintf(out, ",%d,%d,%.6g,%s,%s,%ld,%.9g", r->stages, r->micro_batches, r->bubble, sc,
                sa, r->iters, r->epoch_s * o->epochs);
        fprintf(out, ",%.9g,%.6g,%.1f", r->read_s, r->util, r->mem_total / MIB);
        if (r->price_h > 0) /* empty fields: no price */
            fprintf(out, ",%.6g,%.6g,%.6g", r->price_h, r->price_h * r->epoch_s / 3600,
                    r->price_h * r->epoch_s * o->epochs / 3600);
        else
            fputs(",,,", out);
        if (calibration_path && r->epoch_hi_s > r->epoch_lo_s)
            fprintf(out, ",%.9g,%.9g", r->epoch_lo_s, r->epoch_hi_s);
        else if (calibration_path)
            fputs(",,", out);
        fputc('\n', out);
    }
    if (!o->links)
        return;
    fputc('\n', out); /* the links: a second table after an empty line */
    dt_link_report_csv_header(out);
    for (int i = 0; i < n; i++) {
        char prefix[96];
        snprintf(prefix, sizeof prefix, "%s,%d,%d,%d,", dt_strategy_name(rows[i].strategy),
                 rows[i].nodes, rows[i].ppn, rows[i].ranks);
        if (rows[i].links)
            dt_link_report_csv(rows[i].links, prefix, out);
    }
}

static void print_json(FILE *out, const struct options *o, const struct dt_model *m,
                       const struct dt_topology *t, const struct row *rows, int n)
{
    fprintf(out, "{\n  \"model\": \"%s\", \"parameters\": %ld, \"topology\": \"%s\",\n"
                 "  \"scaling\": \"%s\", \"batch\": %d, \"dataset_size\": %ld, \"epochs\": %d,\n"
                 "  \"results\": [\n",
            m->name, m->total_params, t->name, o->par.scaling == DT_SCALING_WEAK ? "weak" : "strong",
            o->par.batch, o->dataset_size, o->epochs);
    for (int i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        char iv[128] = "", pj[8400] = "", usd[160] = "null, \"usd_per_epoch\": null, "
                                                    "\"usd_per_run\": null";
        if (r->price_h > 0)
            snprintf(usd, sizeof usd, "%.6g, \"usd_per_epoch\": %.6g, \"usd_per_run\": %.6g",
                     r->price_h, r->price_h * r->epoch_s / 3600,
                     r->price_h * r->epoch_s * o->epochs / 3600);
        if (calibration_path && r->epoch_hi_s > r->epoch_lo_s)
            snprintf(iv, sizeof iv, ", \"epoch_low_s\": %.9g, \"epoch_high_s\": %.9g",
                     r->epoch_lo_s, r->epoch_hi_s);
        else if (calibration_path)
            snprintf(iv, sizeof iv, ", \"epoch_low_s\": null, \"epoch_high_s\": null");
        if (r->stages) {
            char sc[4096], sa[4096];
            stage_list(sc, sizeof sc, r->stage_compute_s, r->stages, ", ");
            stage_list(sa, sizeof sa, r->stage_act_B, r->stages, ", ");
            snprintf(pj, sizeof pj, ", \"stages\": %d, \"micro_batches\": %d, \"bubble\": %.6g, "
                     "\"stage_compute_s\": [%s], \"stage_activations_B\": [%s]", r->stages,
                     r->micro_batches, r->bubble, sc, sa);
        }
        fprintf(out, "    {\"strategy\": \"%s\", \"nodes\": %d, \"ppn\": %d, \"ranks\": %d, "
                     "\"global_batch\": %d, \"iterations\": %ld, \"epoch_s\": %.9g, "
                     "\"run_s\": %.9g, \"iter_s\": %.9g, "
                     "\"compute_s\": %.9g, \"comm_s\": %.9g, \"idle_s\": %.9g, "
                     "\"samples_per_s\": %.9g, \"memory_B\": {\"weights\": %.0f, "
                     "\"gradients\": %.0f, \"optimizer\": %.0f, \"activations\": %.0f, "
                     "\"comm\": %.0f, \"total\": %.0f}, \"speedup\": %.6g, \"efficiency\": %.6g, "
                     "\"events\": %ld, \"flows\": %ld, \"read_s\": %.9g, \"util\": %.6g, "
                     "\"mem_total_MiB\": %.1f, \"price_per_h\": %s%s%s",
                dt_strategy_name(r->strategy), r->nodes, r->ppn, r->ranks, r->global_batch,
                r->iters, r->epoch_s, r->epoch_s * o->epochs, r->iter_s, r->compute_s, r->comm_s, r->idle_s,
                r->samples_per_s, r->mem_weights, r->mem_grads, r->mem_opt, r->mem_act,
                r->mem_comm, r->mem_total, r->speedup, r->efficiency, r->events, r->flows,
                r->read_s, r->util, r->mem_total / MIB, usd, iv, pj);
        if (r->links) {
            fputs(", \"links\": ", out);
            dt_link_report_json(r->links, out);
        }
        fprintf(out, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(out, "  ]\n}\n");
}

/* With no -s, strategies that do not fit the config are passed over in silence; when none
 * fits, says why they did not, one line per reason (a reason that ends in the strategy's
 * own name ends in "these" for the group), so that "see the messages above" has messages. */
static void explain_unfit(const struct options *o, const struct dt_model *model,
                          const struct dt_topology *topo)
{
    char why[DT_STRAT_COUNT][512];
    bool told[DT_STRAT_COUNT] = {0};
    for (int s = 0; s < DT_STRAT_COUNT; s++) {
        struct dt_plan_options po = o->par;
        po.strategy = s;
        told[s] = (s == DT_STRAT_SEQUENTIAL && topo->n_ranks > 1) ||
                  dt_strategy_fits_options(&po, model, topo, dt_plan_ranks(&po, topo), why[s],
                                           sizeof why[s]);
        size_t n = strlen(dt_strategy_name(s)), w = strlen(why[s]);
        if (!told[s] && w >= n && !strcmp(why[s] + w - n, dt_strategy_name(s)))
            snprintf(why[s] + w - n, sizeof why[s] - (w - n), "these");
    }
    for (int s = 0; s < DT_STRAT_COUNT; s++) {
        if (told[s])
            continue;
        fprintf(stderr, "%s: skipped on %s: %s", prog, topo->name, dt_strategy_name(s));
        for (int t = s + 1; t < DT_STRAT_COUNT; t++)
            if (!told[t] && !strcmp(why[t], why[s])) {
                fprintf(stderr, ", %s", dt_strategy_name(t));
                told[t] = true;
            }
        fprintf(stderr, ": %s\n", why[s]);
    }
}

/* Simulates every requested strategy on one topology shape; appends rows. */
static int run_shape(const struct options *o, const struct dt_model *model,
                     const struct dt_topology *topo, FILE *trace, int *trace_pid,
                     struct row **rows, int *n_rows, int *cap)
{
    struct dt_error err;
    dt_error_clear(&err);
    /* Baseline for speedup: the same per-device work on one device. */
    struct row base = {0};
    struct options seq = *o; /* one device: the parallel config without pipelines or --tp */
    struct dt_plan_options *q = &seq.par;
    q->pp = q->dp = q->chunks = q->micro_batches = q->n_stage_cuts = q->tp = 0;
    q->sequence_parallel = false; /* it splits the tokens over a tensor group */
    q->grad_alg_given = false;
    q->bucket_bytes = 0;
    q->zero = 0; /* one device holds the whole model: nothing to shard */
    seq.links = 0;  /* the baseline is no row: no link report */
    int rc = o->dump_plan || o->estimate ? DT_OK
                          : simulate(&seq, model, topo, DT_STRAT_SEQUENTIAL, NULL, trace_pid,
                                     &base, &err);
    if (rc) {
        dt_error_print(prog, &err);
        return 2;
    }
    int rows_before = *n_rows;
    for (int s = 0; s < DT_STRAT_COUNT; s++) {
        char why[512];
        struct dt_plan_options po = o->par;
        po.strategy = s;
        bool fits = dt_strategy_fits_options(&po, model, topo, dt_plan_ranks(&po, topo), why,
                                             sizeof why);
        if (!o->strategies_given && (!fits || (s == DT_STRAT_SEQUENTIAL && topo->n_ranks > 1)))
            continue;
        if (o->strategies_given && !o->strategies[s])
            continue;
        if (!fits) {
            fprintf(stderr, "%s: strategy %s skipped on %s: %s\n", prog, dt_strategy_name(s),
                    topo->name, why);
            continue;
        }
        if (*n_rows == *cap) {
            *cap = *cap ? 2 * *cap : 16;
            *rows = realloc(*rows, (size_t)*cap * sizeof **rows);
            if (!*rows) {
                fprintf(stderr, "%s: out of memory\n", prog);
                return 1;
            }
        }
        struct row *r = &(*rows)[*n_rows];
        rc = simulate(o, model, topo, s, trace, trace_pid, r, &err);
        if (rc) {
            dt_error_print(prog, &err);
            return rc == DT_EINPUT ? 2 : 1;
        }
        if (o->dump_plan || o->estimate)
            continue;
        if (r->over_rank >= 0) {
            fprintf(stderr, "%s: strategy %s skipped on %s: rank %d needs %.2f GiB, its device "
                            "(%s) has %.2f GiB\n", prog, dt_strategy_name(s), topo->name,
                    r->over_rank, r->over_need / (1 << 30),
                    dt_topology_group_of_rank(topo, r->over_rank)->device.name,
                    r->over_cap / (1 << 30));
            row_free(r);
            continue;
        }
        if (dt_epoch_iterations(o->dataset_size, r->global_batch) == 0) {
            fprintf(stderr, "%s: strategy %s skipped on %s: its global batch %d is larger than "
                            "the dataset (--dataset-size %ld): an epoch holds no full batch\n",
                    prog, dt_strategy_name(s), topo->name, r->global_batch, o->dataset_size);
            row_free(r);
            continue;
        }
        /* Speedup in throughput against one device with the baseline's batch. */
        r->speedup = r->samples_per_s / base.samples_per_s;
        r->efficiency = r->speedup / r->ranks;
        if (o->par.scaling == DT_SCALING_STRONG) {
            r->speedup = base.iter_s > 0 ? (base.epoch_s / r->epoch_s) : 0;
            r->efficiency = r->speedup / r->ranks;
        }
        (*n_rows)++;
    }
    if (!o->strategies_given && *n_rows == rows_before && !o->dump_plan && !o->estimate)
        explain_unfit(o, model, topo);
    return 0;
}

/* ---- sweeps split over MPI processes: shape k is simulated by process k % K, and its rows
 * travel as bytes (the struct, then its per-stage arrays) to every process ---- */

static size_t row_size(const struct row *r)
{
    return sizeof *r + 2 * (size_t)r->stages * sizeof(double) +
           (size_t)r->stages * (size_t)r->chunks * sizeof(int);
}

static unsigned char *row_pack(const struct row *r, unsigned char *p)
{
    size_t s = (size_t)r->stages * sizeof(double), f = (size_t)(r->stages * r->chunks) * sizeof(int);
    memcpy(p, r, sizeof *r);
    p += sizeof *r;
    if (r->stages) {
        memcpy(p, r->stage_compute_s, s);
        memcpy(p + s, r->stage_act_B, s);
        memcpy(p + 2 * s, r->stage_first, f);
    }
    return p + 2 * s + f;
}

static const unsigned char *row_unpack(const unsigned char *p, struct row *r)
{
    memcpy(r, p, sizeof *r);
    p += sizeof *r;
    r->stage_compute_s = r->stage_act_B = NULL;
    r->stage_first = NULL;
    if (!r->stages)
        return p;
    size_t s = (size_t)r->stages * sizeof(double), f = (size_t)(r->stages * r->chunks) * sizeof(int);
    r->stage_compute_s = malloc(s);
    r->stage_act_B = malloc(s);
    r->stage_first = malloc(f);
    if (!r->stage_compute_s || !r->stage_act_B || !r->stage_first)
        return NULL;
    memcpy(r->stage_compute_s, p, s);
    memcpy(r->stage_act_B, p + s, s);
    memcpy(r->stage_first, p + 2 * s, f);
    return p + 2 * s + f;
}

/* Gives every process the rows of every shape. first[k], count[k]: this process's rows of
 * the shapes it ran (count -1: the shape failed, its message already printed). */
static int exchange_rows(int n_shapes, const int *first, long *count, struct row **rows,
                         int *n_rows, int *cap)
{
    long *len = calloc(2 * (size_t)n_shapes, sizeof *len); /* bytes, then rows, per shape */
    if (!len)
        return 1;
    for (int k = 0; k < n_shapes; k++) {
        for (long i = 0; i < count[k]; i++)
            len[k] += (long)row_size(&(*rows)[first[k] + i]);
        len[n_shapes + k] = count[k];
    }
    int rc = dt_split_or(len, 2 * (size_t)n_shapes * sizeof *len) ? 1 : 0;
    size_t total = 0;
    for (int k = 0; k < n_shapes && !rc; k++) {
        if (len[n_shapes + k] < 0)
            rc = 2;
        total += (size_t)len[k];
    }
    unsigned char *buf = rc ? NULL : calloc(total + 1, 1);
    if (!rc && !buf)
        rc = 1;
    for (int k = 0, at = 0; k < n_shapes && !rc; at += (int)len[k], k++) {
        unsigned char *p = buf + at;
        for (long i = 0; i < count[k]; i++)
            p = row_pack(&(*rows)[first[k] + i], p);
    }
    if (!rc)
        rc = dt_split_or(buf, total) ? 1 : 0;
    for (int i = 0; i < *n_rows; i++)
        row_free(&(*rows)[i]);
    *n_rows = 0;
    long all = 0;
    for (int k = 0; k < n_shapes && !rc; k++)
        all += len[n_shapes + k];
    if (!rc && all > *cap) {
        struct row *grown = realloc(*rows, (size_t)all * sizeof *grown);
        rc = grown ? 0 : 1;
        if (grown) {
            *rows = grown;
            *cap = (int)all;
        }
    }
    const unsigned char *p = buf;
    for (long i = 0; i < all && !rc && p; i++, (*n_rows)++)
        p = row_unpack(p, &(*rows)[i]);
    if (!rc && !p)
        rc = 1;
    free(buf);
    free(len);
    return rc;
}

/* --sweep: every shape nodes x ppn of the topology's node, in order; split over the
 * processes under mpiexec. */
static int run_sweep(const struct options *o, const struct dt_model *model,
                     const struct dt_topology *topo, FILE *trace, int *trace_pid,
                     struct row **rows, int *n_rows, int *cap, int part, int parts)
{
    int n_nodes = o->n_sweep_nodes ? o->n_sweep_nodes : 1;
    int n_ppn = o->n_sweep_ppn ? o->n_sweep_ppn : 1, n_shapes = n_nodes * n_ppn;
    int first[MAX_SWEEP * MAX_SWEEP];
    long count[MAX_SWEEP * MAX_SWEEP] = {0};
    int rc = 0;
    for (int k = 0; k < n_shapes && (parts > 1 || !rc); k++) {
        first[k] = *n_rows;
        if (k % parts != part)
            continue;
        int nodes = o->n_sweep_nodes ? o->sweep_nodes[k / n_ppn] : topo->n_nodes;
        int ppn = o->n_sweep_ppn ? o->sweep_ppn[k % n_ppn] : topo->groups[0].devices;
        struct dt_topology *shape;
        struct dt_error err;
        dt_error_clear(&err);
        if (dt_topology_reshape(topo, nodes, ppn, &shape, &err)) {
            dt_error_print(prog, &err);
            rc = 2;
        } else {
            int got = run_shape(o, model, shape, trace, trace_pid, rows, n_rows, cap);
            rc = rc ? rc : got;
            dt_topology_destroy(shape);
        }
        count[k] = rc ? -1 : *n_rows - first[k];
    }
    if (parts > 1) {
        int got = exchange_rows(n_shapes, first, count, rows, n_rows, cap);
        rc = rc ? rc : got;
    }
    return rc;
}

/* --recommend: the search of recommend.c with this run's cost parameters. */
static int recommend(const struct options *o, const struct dt_model *model,
                     const struct dt_topology *topo, int part, int parts)
{
    struct dt_cost_params *gcp = group_params(topo);
    if (!gcp) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    double limit = o->memory_limit;
    for (int g = 0; g < topo->n_groups && !(o->memory_limit > 0); g++) {
        double m = topo->groups[g].device.mem_bytes;
        if (m > 0 && (limit == 0 || m < limit))
            limit = m;
    }
    struct dt_rec_request rq = {
        .model = model, .topo = topo, .base = o->par, .group_cp = gcp,
        .precision_given = o->precision_given,
        .global_batch = o->global_batch ? o->global_batch : (long)o->par.batch * topo->n_ranks,
        .memory_limit = limit, .dataset_size = o->dataset_size, .epochs = o->epochs,
        .top = o->top ? o->top : 5, .no_prune = o->no_prune, .part = part, .parts = parts,
        .format = o->format == FMT_CSV ? DT_REC_CSV : o->format == FMT_JSON ? DT_REC_JSON
                                                                            : DT_REC_TABLE,
        .combine = parts > 1 ? dt_split_sum : NULL};
    struct dt_error err;
    dt_error_clear(&err);
    dt_heap_keep_freed(); /* the search frees each candidate's plans: their pages kept */
    int rc = dt_recommend(&rq, o->out, &err);
    if (rc)
        dt_error_print(prog, &err);
    free(gcp);
    return rc == DT_EINPUT ? 2 : rc ? 1 : 0;
}

/* A calibration fitted on another kind of device is refused; on another device of the same
 * kind, applied with a warning naming both. */
static int check_calibration_device(const struct dt_topology *topo)
{
    char warn[512];
    struct dt_error err;
    dt_error_clear(&err);
    if (dt_calibration_check_device(&calibration, topo, warn, sizeof warn, &err)) {
        dt_error_print(prog, &err);
        return 2;
    }
    if (warn[0])
        fprintf(stderr, "%s: warning: %s\n", prog, warn);
    return 0;
}

int main(int argc, char **argv)
{
    struct options o = {.model = DEFAULT_MODEL, .epochs = 1};
    dt_plan_options_init(&o.par);
    int part, parts;
    if (dt_split_init(&argc, &argv, &part, &parts)) {
        fprintf(stderr, "%s: started by mpiexec but MPI_Init failed\n", prog);
        return 1;
    }
    int rc = parse_args(argc, argv, &o);
    char why[256];
    /* gradients the compute precision cannot keep: said once, naming the flag, not as every
     * strategy's refusal (--recommend without --precision searches the precisions that can) */
    if (!rc && (!o.recommend || o.precision_given) &&
        !dt_plan_grad_dtype_fits(&o.par, why, sizeof why)) {
        fprintf(stderr, "%s: %s\n", prog, why);
        rc = 2;
    }
    if (!rc && parts > 1 && ((!o.recommend && !o.n_sweep_nodes && !o.n_sweep_ppn) ||
                             o.trace || o.dump_plan))
        rc = bad_flag("mpiexec", "%s", "dtsim splits --recommend and --sweep (without --trace "
                      "and --dump-plan) over MPI processes; run anything else as one process");
    if (rc) {
        dt_split_finalize();
        return rc;
    }
    if (calibration_path) {
        struct dt_error cerr;
        dt_error_clear(&cerr);
        /* a path, or a shipped calibration by name: calibrations/NAME.yaml */
        static char cal_file[1024];
        if (dt_locate_data("--calibration", "calibrations", calibration_path, cal_file,
                           sizeof cal_file, &cerr) ||
            dt_calibration_load(cal_file, &calibration, &cerr)) {
            dt_error_print(prog, &cerr);
            dt_split_finalize();
            return 2;
        }
    }
    struct dt_model *model = NULL;
    struct dt_topology *topo = NULL;
    if ((rc = load_inputs(&o, &model, &topo))) {
        dt_model_destroy(model);
        dt_split_finalize();
        return rc;
    }
    if (!o.dataset_size) /* the model's dataset, else MNIST's 60,000 */
        o.dataset_size = model && model->dataset_samples ? model->dataset_samples : 60000;
    if (calibration_path && (rc = check_calibration_device(topo))) {
        dt_model_destroy(model);
        dt_topology_destroy(topo);
        dt_split_finalize();
        return rc;
    }
    FILE *out = stdout, *trace = NULL;
    struct row *rows = NULL;
    int n_rows = 0, cap = 0, trace_pid = 1;
    if (o.output && !(out = fopen(o.output, "w"))) {
        fprintf(stderr, "%s: --output %s: %s\n", prog, o.output, strerror(errno));
        rc = 2;
        goto done;
    }
    o.out = out;
    if (o.summary) {
        dt_model_print_summary(model, out);
        dt_precision_print_memory(model, &o.par, out);
        goto done;
    }
    if (o.topology_info) {
        dt_topology_print_shape(topo, out);
        goto done;
    }
    if (o.recommend) {
        rc = recommend(&o, model, topo, part, parts);
        goto done;
    }
    if (o.trace) {
        if (!(trace = fopen(o.trace, "w"))) {
            fprintf(stderr, "%s: --trace %s: %s\n", prog, o.trace, strerror(errno));
            rc = 2;
            goto done;
        }
        fprintf(trace, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n"
                       "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, "
                       "\"args\": {\"name\": \"dtsim\"}}");
    }
    if (o.n_sweep_nodes || o.n_sweep_ppn)
        rc = run_sweep(&o, model, topo, trace, &trace_pid, &rows, &n_rows, &cap, part, parts);
    else
        rc = run_shape(&o, model, topo, trace, &trace_pid, &rows, &n_rows, &cap);
    if (part > 0)
        goto done;
    if (rc || o.dump_plan || o.estimate)
        goto done;
    if (n_rows == 0) {
        fprintf(stderr, "%s: no strategy fits %s (see the messages above)\n", prog, topo->name);
        rc = 2;
        goto done;
    }
    qsort(rows, (size_t)n_rows, sizeof *rows, cmp_rows);
    if (o.format == FMT_CSV)
        print_csv(out, &o, model, topo, rows, n_rows);
    else if (o.format == FMT_JSON)
        print_json(out, &o, model, topo, rows, n_rows);
    else if (print_table(out, &o, model, topo, rows, n_rows)) {
        fprintf(stderr, "%s: out of memory\n", prog);
        rc = 1;
    }
done:
    /* a full disk or a closed pipe is an error, not a silent success */
    if (trace) {
        fprintf(trace, "\n]}\n");
        if ((ferror(trace) | fclose(trace)) && !rc) {
            fprintf(stderr, "%s: --trace %s: cannot write it all\n", prog, o.trace);
            rc = 1;
        }
    }
    if (out && (ferror(out) | (out == stdout ? fflush(out) : fclose(out))) && !rc) {
        fprintf(stderr, "%s: %s: cannot write it all\n", prog,
                out == stdout ? "standard output" : o.output);
        rc = 1;
    }
    for (int i = 0; i < n_rows; i++)
        row_free(&rows[i]);
    free(rows);
    dt_topology_destroy(topo);
    dt_model_destroy(model);
    dt_split_finalize();
    return rc;
}
