/* Plays a plan on the topology: every rank's ops as discrete events, collectives expanded
 * into point-to-point flows on the real routes (see libdt/collective.c), flows sharing links
 * max-min fairly. Deterministic: the same plan gives the same result, bit for bit. */
#ifndef DT_SIM_PLAYER_H
#define DT_SIM_PLAYER_H

#include <stdbool.h>
#include <stdio.h>

#include "dt/costmodel.h"
#include "dt/plan.h"
#include "ranklist.h"

struct dt_sim;
struct dt_simnet;

struct dt_rank_stats {
    double end_s;        /* when the rank finished its iteration */
    double compute_s;    /* busy in compute ops (and summing received floats) */
    double comm_s;       /* blocked while its own transfers were moving (exposed communication) */
    double idle_s;       /* blocked waiting for a peer that had not sent yet, or at the end */
    double bytes_sent, bytes_recv;
};

struct dt_sim_result {
    double iter_s;       /* iteration time: the last rank's end */
    int n_ranks;
    struct dt_rank_stats *rank; /* n_ranks entries; freed by dt_sim_result_free */
    long events, flows;
    double bytes_on_links;
};

struct dt_sim_options {
    FILE *trace;         /* Chrome trace JSON of the iteration, or NULL */
    int trace_pid;       /* process id used in the trace (several strategies in one file) */
    const char *trace_name;
    const struct dt_cost_params *group_cp; /* per node group of the plan's topology, each
                                              rank taking its group's (a heterogeneous
                                              cluster); NULL: the cp of dt_sim_run for all */
    const struct dt_ranklist *trace_ranks; /* the ranks the trace shows (and the links their
                                            * flows cross), or NULL: all */
    bool eager;          /* expand every round of a collective when it starts (as before the
                          * lazy expansion; kept to check that both give the same result) */
    /* Called once when the iteration is over, before the network is freed (dtsim --links);
     * an error it returns is the run's. NULL: not called. */
    int (*on_links)(void *ctx, const struct dt_sim *sim, const struct dt_simnet *net,
                    double iter_s, struct dt_error *err);
    void *links_ctx;
    /* The symmetric estimate (symmetry.h): a collective for which closed_coll_s returns >= 0
     * takes that long on its rank alone, without flows (counted as communication; a
     * non-blocking one completes on a timer), its *busy_s of link time (<= the return) queued
     * after the rank's earlier closed ones' (those share its links; their latencies overlap);
     * ranks whose `played` entry is false run nothing. NULL: neither. */
    double (*closed_coll_s)(void *ctx, int rank, const struct dt_op *op, double *busy_s);
    void *closed_ctx;
    const bool *played;
};

int dt_sim_run(const struct dt_plan *plan, const struct dt_cost_params *cp,
               const struct dt_sim_options *opt, struct dt_sim_result *res,
               struct dt_error *err);
void dt_sim_result_free(struct dt_sim_result *res);

#endif
