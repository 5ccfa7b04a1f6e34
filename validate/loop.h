/* `dtvalidate loop`: the calibration loop on this machine. Runs dtexec on 1 and 2 MPI ranks
 * (mpiexec -n 1, -n 2) for every data-parallel strategy and several small models, and on 2
 * ranks the pipelines gpipe and 1f1b with --pp 2 and 2, 4 and 8 micro-batches on mlp-wide and
 * cnn690k (-b twice the per-rank batch: a step trains on as many samples as data parallelism's
 * on 2 ranks, so that the ranking compares them), ring with --tp 2 and with --zero 1, 2, 3
 * on mlp-wide and tiny-gpt, with short epochs (--max-iters) on
 * synthetic data, each rank pinned to its core (dtexec --bind); collects the records, fits the
 * cost model on one part of the runs, predicts the others, and draws the plots. */
#ifndef DTV_LOOP_H
#define DTV_LOOP_H

#include <stdbool.h>
#include <stdio.h>

#include "dt/error.h"

struct dtv_loop_options {
    const char *dir;        /* where records, calibration, report and plots go */
    const char *dtexec;     /* the dtexec program (default: beside dtvalidate, then PATH) */
    const char *mpiexec;    /* default: configure's MPIEXEC, then "mpiexec" */
    const char *topology;   /* default: topologies/localhost.yaml */
    const char *models;     /* comma-separated (default: mlp-fmnist,mlp-wide,cnn21k,cnn690k,
                               tiny-gpt) */
    const char *fit;        /* parameters to fit (default: dtvalidate's default) */
    const char *train;      /* selection of the runs to fit (default: every other run) */
    int max_iters;          /* iterations per epoch (default: per model, epochs of about
                               0.25 s at the device's peak, 30 to 2000) */
    int epochs;             /* default 3 */
    int batch;              /* per rank (default 64) */
    int max_ranks;          /* 1..max_ranks (default 2) */
    int repeat;             /* runs of each configuration; the fastest is kept, all of them
                               decide which strategies differ (default 5) */
    const char *pipelines;  /* pipeline strategies run beside data parallelism, with --pp 2 on
                               every even rank count (default gpipe,1f1b; "none": none) */
    const char *pipeline_models; /* the models of `models` they run on (default
                               mlp-wide,cnn690k) */
    const char *micro_batches;   /* their micro-batch counts (default 2,4,8; naive-mp: 1) */
    const char *tensor_models;   /* models of `models` run with --tp 2 on ring on every even
                               rank count (default mlp-wide,tiny-gpt; "none": none) */
    const char *zero_models;     /* models of `models` run with --zero 1, 2, 3 on ring on
                               every even rank count (default mlp-wide,tiny-gpt; "none") */
    bool reuse;             /* keep an existing records file and only analyse it */
    bool current_topology;  /* analyse every record with `topology`, not the file it names */
};

/* What dtv_loop returns when dtexec (or mpiexec) is not there: err says so; dtvalidate exits
 * with it so that automake's tests count the loop as skipped. */
#define DTV_LOOP_SKIP 77

/* Returns DT_OK, a DT_ status with err filled, or DTV_LOOP_SKIP. */
int dtv_loop(const char *argv0, const struct dtv_loop_options *o, FILE *log,
             struct dt_error *err);

#endif
