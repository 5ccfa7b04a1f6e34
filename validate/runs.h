/* Measured runs: what dtvalidate fits and checks the simulator against. A run is one
 * configuration (model, topology shape, strategy, batch, parallel config) with its
 * measurements; runs come from dtexec's records (JSON lines, `dtexec --record FILE`) and from
 * reference tables of published figures (CSV with provenance comments, validate/data/).
 *
 * Records (validate/README.md, "Records"): besides the times, config.parallel ("pp=2
 * micro-batches=4", as dt_parallel_format writes it; absent or "" for plain data
 * parallelism) is read back with dt_parallel_set, config.bucket_bytes and config.optimizer
 * (with config.momentum) into the plan options, so that the plan dtvalidate simulates is the
 * one dtexec ran; measurements.alloc_bytes (per rank) is compared with that plan's buffer
 * table, and measurements.params_l2 / params_sum are kept.
 *
 * Reference table format (validate/README.md): '#' lines are comments (the provenance);
 * '#% key: value' lines set table-wide defaults for columns that the table does not have
 * (model, strategy, scaling, batch, dataset_size, topology, host, when, data_bytes); then a
 * header line of column names and one line per run. Columns: nodes, ppn, procs, epoch_s
 * (required unless iter_s is given), read_s, update_per_batch_s, total_s, and any of the
 * defaults' keys. `topology` may contain {nodes} and {ppn}. */
#ifndef DTV_RUNS_H
#define DTV_RUNS_H

#include <stdbool.h>
#include <stdio.h>

#include "dt/error.h"
#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"

#define DTV_MAX_REPEATS 32

struct dtv_run {
    char file[512];
    int line;                   /* where the run was read (1-based) */
    char label[300];            /* "1n2p reduce-bcast-linear mlp-fmnist" */
    /* configuration */
    char model_name[128];
    char topo_name[128];
    int nodes, ppn, ranks;
    enum dt_strategy strategy;
    enum dt_scaling scaling;
    int batch;                  /* weak: per rank (pipelines: per replica); strong: global */
    int global_batch;           /* samples per step over all replicas (the plan's) */
    struct dt_plan_options opt; /* what the plan was built from: strategy, scaling, batch,
                                   ranks, and a record's parallel config, bucket, optimizer */
    char parallel[256];         /* dt_parallel_format(&opt): "" for plain data parallelism */
    bool unfused_activations;   /* each activation its own kernel, as the framework that
                                   ran it does (cost params' fuse_activations off) */
    bool conv_nchw;             /* activations in NCHW, as the framework that ran it keeps
                                   them (cost params' conv_nchw on) */
    char setup[192];            /* the strategy and what sets it apart: "ring",
                                   "gpipe(pp=2,micro-batches=4)", "ring(bucket=1MiB)" */
    long iters_per_epoch;       /* iterations each measured epoch ran */
    double data_bytes;          /* bytes each process read at start; 0 unknown */
    /* measurements (NaN when absent) */
    double epoch_s;             /* tables: the published epoch time; records: iterations x
                                   median iteration (robust to stalls of a busy machine) */
    double iter_s;              /* epoch_s / iters_per_epoch: what the fit compares */
    double read_s, update_s, total_s;
    /* dtv_runset_keep_fastest: the median iteration of every repeat of this configuration
     * (the first DTV_MAX_REPEATS of them), for telling strategies apart; 0 before it */
    int repeats;
    double repeat_iter_s[DTV_MAX_REPEATS];
    /* records: the plan buffers each rank allocated (measurements.alloc_bytes) against the
     * rebuilt plan's buffer table (dt_plan_rank_memory); n_alloc 0 when not recorded */
    int n_alloc;
    int alloc_bad_rank;         /* the first rank where they differ, -1 when all agree */
    double alloc_bad_bytes, plan_bad_bytes;     /* that rank's allocation and plan bytes */
    double params_l2, params_sum;   /* the final parameters' checksums (NaN when absent) */
    /* provenance */
    char host[128], when[64], git[64];
    /* resolved (borrowed from the set's caches) */
    const struct dt_model *model;
    const struct dt_topology *topo; /* reshaped to nodes x ppn when the table says so */
    struct dt_plan *plan;       /* owned by the set */
};

struct dtv_runset {
    int n, cap;
    struct dtv_run *runs;
    /* caches: every model and topology loaded once */
    int n_models, n_topos;
    struct dt_model **models;
    struct dt_topology **topos;
    char (*topo_keys)[600];
    /* dtv_runset_keep_fastest: the median over the repeat_configs repeated configurations of
     * (slowest / fastest repeat - 1) (0 until then, NaN when nothing was repeated) */
    double repeat_spread;
    int repeat_configs;
};

struct dtv_load_options {
    const char *topology;       /* for records without a topology file: use this one */
    bool topology_for_all;      /* ... and for every record, whatever file it names */
};

void dtv_runset_init(struct dtv_runset *set);
void dtv_runset_free(struct dtv_runset *set);

/* Loads a records file (.jsonl/.json) or a reference table (.csv) and appends its runs.
 * A bad run fails the whole load with file:line:column and what is wrong (DT_EINPUT). */
int dtv_runset_load(struct dtv_runset *set, const char *path,
                    const struct dtv_load_options *opt, struct dt_error *err);

/* For readers of other formats (published.c): the model and the topology (reshaped to
 * nodes x ppn when both are > 0) by name, loaded once per set, errors at file:line:col; a new
 * run at the end of the set (counted once the caller does set->n++); the run's plan built
 * from its configuration (model, topo, strategy, scaling, batch, ranks, opt), its derived
 * fields filled, errors at the run's line and column col. */
int dtv_runset_model(struct dtv_runset *set, const char *name, const char *file, int line,
                     int col, const struct dt_model **out, struct dt_error *err);
int dtv_runset_topo(struct dtv_runset *set, const char *name, int nodes, int ppn,
                    const char *file, int line, int col, const struct dt_topology **out,
                    struct dt_error *err);
struct dtv_run *dtv_runset_new_run(struct dtv_runset *set, const char *file, int line);
int dtv_run_finish(struct dtv_run *run, int col, struct dt_error *err);

/* Opens an input file for reading; a directory or a file that cannot be opened is DT_EINPUT
 * (NULL, with err set; `what` says what the file should have been). */
FILE *dtv_open_input(const char *path, const char *what, struct dt_error *err);

/* Splits a CSV line in place (double quotes allowed around a field); returns the number of
 * fields, or, with *bad_col, -1 on an unterminated quote and -2 on a field past max (at most
 * 64: dtv_csv_why says which). cols[] gets each field's 1-based column. */
int dtv_split_csv(char *s, char **fields, int *cols, int max, int *bad_col);
const char *dtv_csv_why(int rc);

/* Repeated runs of one configuration: keeps the fastest (smallest median iteration), the one
 * least disturbed by other work on the machine, with every repeat's time in repeat_iter_s;
 * returns how many runs were dropped. */
int dtv_runset_keep_fastest(struct dtv_runset *set);


/* The width of a table's configuration column: the longest label, 40 to 100 characters. */
int dtv_label_width(const struct dtv_runset *set);

/* Whether a run is a pipeline (gpipe, naive-mp, 1f1b, interleaved). */
bool dtv_run_is_pipeline(const struct dtv_run *run);

/* Whether run matches a selection "key=v1,v2 key2=v3" (keys: nodes ppn ranks strategy model
 * topology line label parallel; all words must match; an empty selection matches every run).
 * parallel=PAIR matches a run whose parallel config has the pair (parallel=micro-batches=4);
 * parallel=none matches plain data parallelism. */
int dtv_select_parse_check(const char *sel, char *why, size_t len);
bool dtv_run_matches(const struct dtv_run *run, const char *sel);

#endif
