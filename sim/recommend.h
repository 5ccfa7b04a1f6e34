/* dtsim --recommend: search the parallel configs of a model on a topology for the fastest
 * that fit in memory, and say why every other family of configs lost.
 *
 * The search space: every registered strategy x tensor-parallel width x pipeline stages x
 * micro-batches x model chunks x accumulation x gradient buckets x ZeRO stage x recompute, at
 * a fixed global batch (strong scaling: every config trains the same samples per step). Each
 * candidate that the strategy accepts is compiled; those whose largest rank exceeds the memory
 * limit are discarded by their buffer table; the others are simulated, pruned exactly: a
 * candidate whose busiest rank's compute alone (a lower bound of its iteration) is no faster
 * than the N-th best of a first round (the least-compute member of each family) cannot enter
 * the top N and is not simulated. Which candidates are simulated depends on nothing but the
 * inputs, so the table is the same however the work is split over MPI ranks. */
#ifndef DT_SIM_RECOMMEND_H
#define DT_SIM_RECOMMEND_H

#include <stdio.h>

#include "dt/costmodel.h"
#include "dt/plan.h"

enum dt_rec_format { DT_REC_TABLE, DT_REC_CSV, DT_REC_JSON };

struct dt_rec_request {
    const struct dt_model *model;
    const struct dt_topology *topo;
    struct dt_plan_options base;   /* the user's config: optimizer, precision, ... */
    bool precision_given;          /* search base.precision only (else every one the devices
                                    * have a peak for) */
    const struct dt_cost_params *group_cp; /* per node group of topo; the first group's are
                                            * the plan's default (network, eager limit) */
    long global_batch;             /* samples per step, every config */
    double memory_limit;           /* bytes per device; 0: none */
    long dataset_size;             /* samples per epoch */
    int epochs;
    int top;                       /* configs to print */
    bool no_prune;                 /* simulate every config that fits: no bound pruning (the
                                    * table is the same, slower; tests check the pruning) */
    enum dt_rec_format format;
    int part, parts;               /* this process evaluates candidates i % parts == part */
    /* sums partial results over the processes (every one ends with the whole); NULL when
     * parts is 1 */
    int (*combine)(double *values, long n);
};

/* Runs the search and prints the result on out (process part 0 only). Returns 0, or an
 * error (DT_EINPUT when no config fits, err says why). */
int dt_recommend(const struct dt_rec_request *rq, FILE *out, struct dt_error *err);

#endif
