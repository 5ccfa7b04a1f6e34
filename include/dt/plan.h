/* The plan: the seam between simulation and execution.
 *
 * A strategy compiles (model, topology, batch settings, options) into, for every rank, the
 * ordered ops of ONE training iteration. dtsim gives each op a cost and plays all ranks as
 * discrete events; dtexec walks the same ops with real kernels and MPI. Nothing about a
 * strategy lives elsewhere.
 *
 * Ops of one rank run in program order. A non-blocking op (COLL or SEND/RECV with
 * nonblocking=true) starts at its place and completes at the WAIT that names its handle.
 * A region is (buffer, first float, floats): it tells the simulator how many bytes move and
 * the executor which floats to move.
 */
#ifndef DT_PLAN_H
#define DT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "dt/error.h"
#include "dt/model.h"
#include "dt/topology.h"

enum dt_buf { DT_BUF_PARAMS, DT_BUF_GRADS, DT_BUF_COUNT };

struct dt_region {
    enum dt_buf buf;
    long offset; /* first float */
    long count;  /* floats */
};

enum dt_op_kind { DT_OP_COMPUTE, DT_OP_SEND, DT_OP_RECV, DT_OP_COLL, DT_OP_WAIT, DT_OP_LOAD };

enum dt_phase {
    DT_PH_FORWARD,          /* layer forward (the last layer includes the loss) */
    DT_PH_BACKWARD,         /* layer backward: data (if needed) and weights */
    DT_PH_UPDATE            /* optimizer step over `region` of the parameters */
};

enum dt_coll_kind { DT_COLL_ALLREDUCE, DT_COLL_REDUCE, DT_COLL_BCAST, DT_COLL_REDUCE_SCATTER,
                    DT_COLL_ALLGATHER, DT_COLL_KIND_COUNT };

enum dt_coll_alg {
    DT_ALG_LINEAR,       /* every rank to/from the root directly (seed 002's mpi4py pattern) */
    DT_ALG_BINOMIAL,     /* binomial tree (MPICH's reduce and short bcast) */
    DT_ALG_RING,         /* ring: reduce-scatter + allgather in 2(p-1) steps of n/p */
    DT_ALG_RECURSIVE_DOUBLING,
    DT_ALG_RABENSEIFNER, /* recursive-halving reduce-scatter + recursive-doubling allgather */
    DT_ALG_DIRECT,       /* reduce-scatter/allgather by direct exchange (sharded PS) */
    DT_ALG_LIBRARY,      /* the MPI library's own collective (dtsim models MPICH's choice) */
    DT_ALG_COUNT
};

struct dt_op {
    enum dt_op_kind kind;
    enum dt_phase phase;     /* COMPUTE */
    int layer;               /* COMPUTE: layer index; -1 for UPDATE */
    int samples;             /* COMPUTE, LOAD: samples of this rank's (micro-)batch */
    int peer;                /* SEND/RECV: the other rank */
    int tag;                 /* SEND/RECV */
    bool sum;                /* RECV: add into the region instead of overwriting */
    struct dt_region region; /* SEND/RECV/COLL/UPDATE */
    enum dt_coll_kind coll;  /* COLL */
    enum dt_coll_alg alg;    /* COLL */
    int group;               /* COLL: index into plan->groups */
    int root;                /* COLL reduce/bcast: index of the root within the group */
    bool nonblocking;        /* COLL/SEND/RECV: completes at a WAIT */
    int handle;              /* non-blocking op: its handle (unique per rank); WAIT: the one awaited */
    double bytes;            /* LOAD: bytes of input data copied into the batch */
};

struct dt_group {
    int n;
    int *ranks; /* global ranks, in group order */
};

struct dt_rank_plan {
    int n_ops, cap_ops;
    struct dt_op *ops;
    int batch;              /* samples this rank computes per iteration */
    double grad_scale;      /* local mean gradient x this before the sum: batch / global batch */
    bool updates;           /* runs the optimizer (not a parameter-server worker) */
    /* memory this rank holds (bytes) */
    double mem_weights, mem_grads, mem_optimizer, mem_activations, mem_comm;
};

enum dt_strategy {
    DT_STRAT_SEQUENTIAL,
    DT_STRAT_REDUCE_BCAST_LINEAR,
    DT_STRAT_REDUCE_BCAST_BINOMIAL,
    DT_STRAT_ALLREDUCE_RING,
    DT_STRAT_ALLREDUCE_RECURSIVE_DOUBLING,
    DT_STRAT_ALLREDUCE_RABENSEIFNER,
    DT_STRAT_ALLREDUCE_HIERARCHICAL,
    DT_STRAT_ALLREDUCE_LIBRARY,
    DT_STRAT_PS_CENTRAL,
    DT_STRAT_PS_SHARDED,
    DT_STRAT_COUNT
};

enum dt_scaling { DT_SCALING_WEAK, DT_SCALING_STRONG };

struct dt_plan_options {
    enum dt_strategy strategy;
    enum dt_scaling scaling;
    int batch;              /* weak: per rank; strong: global */
    double bucket_bytes;    /* > 0: gradient buckets of this size, overlapped with backward */
    int n_ranks;            /* ranks to use; 0 = all ranks of the topology */
};

struct dt_plan {
    enum dt_strategy strategy;
    struct dt_plan_options opt;
    const struct dt_model *model;       /* borrowed */
    const struct dt_topology *topo;     /* borrowed */
    int n_ranks;
    struct dt_rank_plan *ranks;
    int n_groups;
    struct dt_group *groups;
    int global_batch;
    double lr_scale;        /* learning rate factor (seed 002: x processes under weak scaling) */
    int next_handle;
};

const char *dt_strategy_name(enum dt_strategy s);
const char *dt_strategy_description(enum dt_strategy s);
/* Parses a strategy name ("ring", "reduce-bcast", ...); -1 if unknown. */
int dt_strategy_parse(const char *name);
const char *dt_coll_kind_name(enum dt_coll_kind k);
const char *dt_coll_alg_name(enum dt_coll_alg a);
const char *dt_phase_name(enum dt_phase p);

/* Whether the strategy can run on n ranks of topo (e.g. data parallel needs >= 2 ranks,
 * hierarchical needs >= 2 nodes). why says why not. */
bool dt_strategy_fits(enum dt_strategy s, const struct dt_topology *topo, int n_ranks,
                      char *why, size_t whylen);

/* Compiles a plan. The model and topology must outlive it. */
int dt_plan_build(const struct dt_model *model, const struct dt_topology *topo,
                  const struct dt_plan_options *opt, struct dt_plan **out, struct dt_error *err);
void dt_plan_destroy(struct dt_plan *plan);

/* Builders used by the strategies (and by tests). */
int dt_plan_push(struct dt_plan *plan, int rank, const struct dt_op *op);
int dt_plan_add_group(struct dt_plan *plan, int n, const int *ranks);

/* Name of an op in traces, the same in dtsim and dtexec: "load", "forward conv2d",
 * "backward dense", "update", "allreduce/ring", "wait", "send", "recv". */
const char *dt_op_name(const struct dt_plan *plan, const struct dt_op *op, char *buf, size_t len);

/* Human-readable listing of every rank's ops (for --dump-plan and tests). */
void dt_plan_print(const struct dt_plan *plan, FILE *out);

#endif
