/* What dtexec writes for others to read: the run record (one JSON object per line, appended:
 * dtvalidate reads these), the per-op timings as CSV, and a Chrome trace (Perfetto) of the
 * sampled iterations with the op names dtsim's trace uses, so that the two can be compared op
 * by op. Only rank 0 writes; the other ranks' timings are gathered to it first. */
#ifndef DTX_RECORD_H
#define DTX_RECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dt/error.h"
#include "dt/plan.h"
#include "executor.h"

/* The configuration and measurements of one run. Arrays have `epochs` entries. */
struct dtx_record {
    /* configuration */
    const char *command_line;
    const char *model_name, *model_path;
    long params;
    const char *topology_name, *topology_path; /* path NULL when derived from the MPI layout */
    const char *strategy;
    int ranks;
    const char *scaling;
    int batch;             /* as given: per rank (weak) or global (strong) */
    int global_batch;
    double lr, lr_scale, lr_effective;
    const char *optimizer;
    double momentum;
    const char *init;
    int epochs;
    double bucket_bytes;
    const char *data;      /* dataset description */
    long train_samples, test_samples;
    long test_evaluated;   /* test samples evaluated each epoch (--test-samples bounds it) */
    bool read_whole;
    uint64_t seed;
    long max_iters;        /* 0 = whole epochs */
    long iters_per_epoch;
    /* environment */
    const char *host;
    const char *cpu;       /* the CPU the run executed on, as detected (not the topology's) */
    const char *mpi_library;
    const char *git_revision;
    const char *version;
    const char *start_utc;
    int blas_threads;
    const char *bound_cpus; /* rank 0's CPUs under --bind ("0", "0-3"); "" when not pinned */
    /* measurements */
    double read_s;         /* loading the data (slowest rank) */
    double read_bytes;     /* bytes rank 0 read from the data files (its shard, or all) */
    double *epoch_s;       /* training iterations of each epoch (without evaluation) */
    double epoch_median_s;
    double update_per_batch_s; /* median iteration time */
    double eval_s;         /* all evaluations together */
    double total_s;        /* from start to the end of the last evaluation */
    double *train_loss, *train_accuracy;
    double *test_loss, *test_accuracy;
    double samples_per_s;
    double peak_rss_bytes; /* largest over ranks */
    double net_bytes;      /* rank 0's neural-network allocations (layers_alloc_bytes) */
    bool params_agree;     /* every rank ended with identical parameters */
    const char *parallel;  /* the parallel config beyond strategy, batch, scaling and buckets,
                              as dt_parallel_format writes it ("pp=2 micro-batches=4") */
    const double *alloc_bytes; /* per rank (ranks entries): the plan buffers it allocated */
    double params_l2, params_sum; /* of the full parameter vector at the end, in double */
};

/* Appends the record to path as one line of JSON. */
int dtx_record_append(const char *path, const struct dtx_record *r, struct dt_error *err);
/* Writes the record to f (one line). */
void dtx_record_write(FILE *f, const struct dtx_record *r);

/* JSON string literal of s (quotes and escapes), into f. */
void dtx_json_string(FILE *f, const char *s);

/* Timings gathered on rank 0: for each rank, n_iters x n_ops[r] entries (iteration-major). */
struct dtx_timings {
    int n_ranks;
    int n_iters;
    long *iter_index;            /* n_iters: the global iteration number of each sample */
    int *epoch_of;               /* n_iters */
    int *n_ops;                  /* per rank */
    struct dtx_op_time **t;      /* per rank */
};

/* Writes the CSV header and rows: rank,epoch,iteration,op,kind,name,layer,phase,coll,alg,
 * nonblocking,start_s,duration_s,end_s,bytes,bytes_sent,bytes_recv. bytes is the region's size
 * for communication ops and the input bytes for LOAD, 0 for compute. */
int dtx_write_ops_csv(const char *path, const struct dt_plan *plan,
                      const struct dtx_timings *tm, struct dt_error *err);
/* Chrome trace JSON: one process (pid 1, named after the strategy), one track per rank
 * (tid = rank) for the ops in program order, and one more per rank (tid = 1000 + rank) showing
 * non-blocking collectives from their start to their completion. */
int dtx_write_trace(const char *path, const struct dt_plan *plan, const struct dtx_timings *tm,
                    struct dt_error *err);

/* Median of n values (the array is reordered); NaN when n = 0. */
double dtx_median(double *v, int n);

#endif
