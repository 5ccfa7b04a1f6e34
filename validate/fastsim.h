/* A measured run's step, predicted at many cost parameters (a fit's evaluations) for a
 * fraction of a simulation each, and the same prediction as dtv_predict's (dt_step_simulate
 * of the whole plan) up to the order of a floating-point sum.
 *
 * Why it is the same: a rank's step program begins with local ops only (the framework's
 * per-iteration overhead, the gradient reset, the data load, then the forward and backward of
 * every micro-batch of an accumulated step) up to its first communication op (SEND, RECV,
 * COLL, WAIT). The player runs those back to back on the rank's device, with nothing of
 * another rank in between, so the rank reaches its first communication at
 *   P_r = iter_overhead + sum of the costs of its local ops,
 * a sum taken here over the distinct ops times how often each occurs (the micro-batches of
 * an accumulated BERT step repeat one another's ops: 255,000 ops on a rank, a few hundred
 * distinct). When every rank gets the same P (a data-parallel step on one kind of device:
 * every published row), the step is the player's run of the rest of the program alone (the
 * tail: the gradient allreduce and the update), every rank started at P by the per-iteration
 * overhead set to P. When the ranks' P differ, the whole plan is played.
 *
 * The plan does not depend on the cost parameters (only its ops' costs do): it is compiled
 * once (dtv_run's plan), the distinct ops are counted once (dtv_fast_init), and an
 * evaluation re-costs the distinct ops and re-plays the tail.
 *
 * The tail is played from 0 and its result shifted by P (every event of the tail happens P
 * later when every rank starts it P later; P is charged as compute, as the player charges
 * the per-iteration overhead), so its result depends on P only through the shift. It depends
 * on the cost parameters only through (a) the cost of each of its ops (dt_cost_op of every
 * rank's tail ops at that rank's parameters), (b) the summing of received floats in
 * collectives (reduce_bw, mem_bw, cache_bw, node_mem_bw, eff_mem) and (c) the links and the
 * eager size: the player reads cost parameters nowhere else. A fit that moves only compute
 * parameters (iter_overhead, the GEMM efficiencies) leaves (a)-(c) unchanged when the tail
 * holds no op they cost (the allreduce and the update of a data-parallel step), so the tail
 * played for (a)-(c) is kept (a few keys, exact comparison) and not played again: the
 * 128- and 256-GPU allreduces of the BERT rows are played once per link or eff_mem value. */
#ifndef DTV_FASTSIM_H
#define DTV_FASTSIM_H

#include <stdbool.h>

#include "dt/costmodel.h"
#include "epoch.h"
#include "runs.h"

struct dtv_fast_op {
    const struct dt_op *op; /* the first of its kind in the rank's local prefix */
    long count;
};

struct dtv_fast_rank {
    int n, cap;             /* distinct ops of the rank's local prefix */
    struct dtv_fast_op *ops;
    int same_as;            /* an earlier rank with the same distinct ops and counts, or -1 */
};

struct dtv_tail_cache; /* tails played, by what they depend on (fastsim.c) */

struct dtv_fast {
    const struct dtv_run *run;
    struct dt_plan tail;            /* the plan from each rank's first communication op on
                                     * (its ranks' ops point into run->plan's) */
    struct dtv_fast_rank *rank;     /* run->plan->n_ranks */
    double *node_samples;           /* dt_step_node_samples of the whole plan */
    struct dtv_tail_cache *cache;   /* mutable through a const dtv_fast: a memo, no state */
    long n_tail_ops;                /* ops of the tail over all ranks */
};

/* dt_step_simulate of plan with cp for every node group (a run's parameters are its device
 * kind's): the whole plan played. */
int dtv_step_simulate(const struct dt_plan *plan, const struct dt_cost_params *cp,
                      struct dt_step *out, struct dt_error *err);

int dtv_fast_init(struct dtv_fast *f, const struct dtv_run *run, struct dt_error *err);
void dtv_fast_free(struct dtv_fast *f);

/* The run's step at cp (as dt_step_simulate of the whole plan); *tail_only (or NULL) says
 * whether the tail alone was played (every rank reached its first communication at once). */
int dtv_fast_step(const struct dtv_fast *f, const struct dt_cost_params *cp,
                  struct dt_step *out, bool *tail_only, struct dt_error *err);

/* Tails played and tails taken from the cache since dtv_fast_init. */
void dtv_fast_tail_counts(const struct dtv_fast *f, long *played, long *reused);

#endif
