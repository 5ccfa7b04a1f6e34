/* The strategies: each compiles (model, topology, batch, options) into a plan, written once
 * for both the simulator and the executor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/collective.h"
#include "dt/plan.h"

static bool is_allreduce(enum dt_strategy s)
{
    return s == DT_STRAT_ALLREDUCE_RING || s == DT_STRAT_ALLREDUCE_RECURSIVE_DOUBLING ||
           s == DT_STRAT_ALLREDUCE_RABENSEIFNER || s == DT_STRAT_ALLREDUCE_LIBRARY;
}

static enum dt_coll_alg allreduce_alg(enum dt_strategy s)
{
    switch (s) {
    case DT_STRAT_ALLREDUCE_RING: return DT_ALG_RING;
    case DT_STRAT_ALLREDUCE_RECURSIVE_DOUBLING: return DT_ALG_RECURSIVE_DOUBLING;
    case DT_STRAT_ALLREDUCE_RABENSEIFNER: return DT_ALG_RABENSEIFNER;
    default: return DT_ALG_LIBRARY;
    }
}

bool dt_strategy_fits(enum dt_strategy s, const struct dt_topology *topo, int n_ranks,
                      char *why, size_t whylen)
{
    if (n_ranks < 1 || n_ranks > topo->n_ranks) {
        snprintf(why, whylen, "needs %d ranks, the topology has %d", n_ranks, topo->n_ranks);
        return false;
    }
    if (s == DT_STRAT_SEQUENTIAL)
        return true;
    if (n_ranks < 2) {
        snprintf(why, whylen, "data parallelism needs at least 2 ranks");
        return false;
    }
    if (s == DT_STRAT_ALLREDUCE_HIERARCHICAL) {
        int nodes = dt_topology_node_of(topo, n_ranks - 1) + 1;
        if (nodes < 2) {
            snprintf(why, whylen, "hierarchical allreduce needs ranks on at least 2 nodes");
            return false;
        }
    }
    return true;
}

static int push(struct dt_plan *plan, int rank, struct dt_op op)
{
    return dt_plan_push(plan, rank, &op);
}

static struct dt_op coll(enum dt_coll_kind kind, enum dt_coll_alg alg, int group, int root,
                         enum dt_buf buf, long offset, long count)
{
    return (struct dt_op){.kind = DT_OP_COLL, .coll = kind, .alg = alg, .group = group,
                          .root = root, .region = {buf, offset, count}};
}

static int first_trainable(const struct dt_model *m)
{
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].params > 0)
            return l;
    return m->n_layers;
}

/* Forward and backward of this rank's batch; with buckets, non-blocking allreduces of the
 * gradients start during backward as soon as a bucket is full (PyTorch DDP's overlap). */
static int compute_and_buckets(struct dt_plan *plan, int r, int world, int *n_handles)
{
    const struct dt_model *m = plan->model;
    int b = plan->ranks[r].batch, rc = 0;
    rc = push(plan, r, (struct dt_op){.kind = DT_OP_LOAD, .samples = b,
                                      .bytes = (double)b * dt_shape_size(&m->input) * 4.0});
    for (int l = 0; l < m->n_layers && !rc; l++)
        rc = push(plan, r, (struct dt_op){.kind = DT_OP_COMPUTE, .phase = DT_PH_FORWARD,
                                          .layer = l, .samples = b});
    bool buckets = plan->opt.bucket_bytes > 0 && is_allreduce(plan->strategy);
    long hi = m->total_params, lo = hi;
    int stop = first_trainable(m);
    for (int l = m->n_layers - 1; l >= 0 && l >= stop && !rc; l--) {
        rc = push(plan, r, (struct dt_op){.kind = DT_OP_COMPUTE, .phase = DT_PH_BACKWARD,
                                          .layer = l, .samples = b});
        if (!buckets || m->layers[l].params == 0)
            continue;
        lo = m->layers[l].param_offset;
        if ((double)(hi - lo) * 4.0 >= plan->opt.bucket_bytes || l == stop) {
            struct dt_op op = coll(DT_COLL_ALLREDUCE, allreduce_alg(plan->strategy), world, 0,
                                   DT_BUF_GRADS, lo, hi - lo);
            op.nonblocking = true;
            op.handle = (*n_handles)++;
            rc = push(plan, r, op);
            hi = lo;
        }
    }
    return rc;
}

/* Ranks grouped by node (for hierarchical) and the group of node leaders. */
static int node_groups(struct dt_plan *plan, int p, int *node_group_of_rank, int *leaders)
{
    int n_nodes = dt_topology_node_of(plan->topo, p - 1) + 1;
    int *ranks = malloc((size_t)p * sizeof *ranks), *lead = malloc((size_t)n_nodes * sizeof *lead);
    if (!ranks || !lead) {
        free(ranks);
        free(lead);
        return -1;
    }
    for (int node = 0; node < n_nodes; node++) {
        int n = 0;
        for (int r = 0; r < p; r++)
            if (dt_topology_node_of(plan->topo, r) == node)
                ranks[n++] = r;
        lead[node] = ranks[0];
        int g = dt_plan_add_group(plan, n, ranks);
        for (int i = 0; i < n; i++)
            node_group_of_rank[ranks[i]] = g;
    }
    *leaders = dt_plan_add_group(plan, n_nodes, lead);
    free(ranks);
    free(lead);
    return *leaders < 0 ? -1 : 0;
}

static int group_index(const struct dt_group *g, int rank)
{
    for (int i = 0; i < g->n; i++)
        if (g->ranks[i] == rank)
            return i;
    return -1;
}

int dt_plan_build(const struct dt_model *model, const struct dt_topology *topo,
                  const struct dt_plan_options *opt, struct dt_plan **out, struct dt_error *err)
{
    *out = NULL;
    enum dt_strategy s = opt->strategy;
    int p = s == DT_STRAT_SEQUENTIAL ? 1 : (opt->n_ranks ? opt->n_ranks : topo->n_ranks);
    char why[256];
    if (!dt_strategy_fits(s, topo, p, why, sizeof why))
        return dt_fail(err, DT_EINPUT, topo->path, 0, 0, "strategy %s does not fit: %s",
                       dt_strategy_name(s), why);
    if (opt->batch < 1)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "batch must be at least 1 (got %d)",
                       opt->batch);
    if (opt->scaling == DT_SCALING_STRONG && opt->batch < p)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "global batch %d is smaller than the %d ranks that share it", opt->batch, p);
    if (opt->bucket_bytes > 0 && !is_allreduce(s) && s != DT_STRAT_SEQUENTIAL)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "gradient buckets apply to the allreduce strategies (ring, "
                       "recursive-doubling, rabenseifner, mpi-allreduce), not to %s",
                       dt_strategy_name(s));
    struct dt_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    plan->strategy = s;
    plan->opt = *opt;
    plan->model = model;
    plan->topo = topo;
    plan->n_ranks = p;
    plan->ranks = calloc((size_t)p, sizeof *plan->ranks);
    int *node_group = calloc((size_t)p, sizeof *node_group);
    int *all = malloc((size_t)p * sizeof *all);
    int rc = plan->ranks && node_group && all ? DT_OK : DT_ENOMEM;
    if (rc)
        goto done;

    plan->global_batch = opt->scaling == DT_SCALING_WEAK ? opt->batch * p : opt->batch;
    plan->lr_scale = opt->scaling == DT_SCALING_WEAK ? p : 1;
    for (int r = 0; r < p; r++) {
        long off, len;
        dt_chunk(plan->global_batch, p, r, &off, &len);
        plan->ranks[r].batch = (int)len;
        plan->ranks[r].grad_scale = (double)len / plan->global_batch;
        plan->ranks[r].updates = true;
        all[r] = r;
    }
    int world = dt_plan_add_group(plan, p, all), leaders = -1;
    if (world < 0 || (s == DT_STRAT_ALLREDUCE_HIERARCHICAL &&
                      node_groups(plan, p, node_group, &leaders))) {
        rc = DT_ENOMEM;
        goto done;
    }

    const long P = model->total_params;
    for (int r = 0; r < p && !rc; r++) {
        struct dt_rank_plan *rp = &plan->ranks[r];
        int n_handles = 0;
        rc = compute_and_buckets(plan, r, world, &n_handles);
        double comm = 0; /* receive buffers the algorithm needs */
        switch (s) {
        case DT_STRAT_SEQUENTIAL:
            break;
        case DT_STRAT_REDUCE_BCAST_LINEAR:
        case DT_STRAT_REDUCE_BCAST_BINOMIAL: {
            enum dt_coll_alg a = s == DT_STRAT_REDUCE_BCAST_LINEAR ? DT_ALG_LINEAR
                                                                    : DT_ALG_BINOMIAL;
            if (!rc)
                rc = push(plan, r, coll(DT_COLL_REDUCE, a, world, 0, DT_BUF_GRADS, 0, P));
            if (!rc)
                rc = push(plan, r, coll(DT_COLL_BCAST, a, world, 0, DT_BUF_GRADS, 0, P));
            comm = (a == DT_ALG_LINEAR && r == 0 ? p - 1 : 1) * (double)P * 4;
            break;
        }
        case DT_STRAT_ALLREDUCE_RING:
        case DT_STRAT_ALLREDUCE_RECURSIVE_DOUBLING:
        case DT_STRAT_ALLREDUCE_RABENSEIFNER:
        case DT_STRAT_ALLREDUCE_LIBRARY:
            if (n_handles == 0 && !rc)
                rc = push(plan, r, coll(DT_COLL_ALLREDUCE, allreduce_alg(s), world, 0,
                                        DT_BUF_GRADS, 0, P));
            for (int h = 0; h < n_handles && !rc; h++)
                rc = push(plan, r, (struct dt_op){.kind = DT_OP_WAIT, .handle = h});
            comm = (s == DT_STRAT_ALLREDUCE_RING ? 1.0 / p : 1.0) * (double)P * 4;
            break;
        case DT_STRAT_ALLREDUCE_HIERARCHICAL: {
            const struct dt_group *ng = &plan->groups[node_group[r]];
            bool leader = group_index(ng, r) == 0;
            if (!rc)
                rc = push(plan, r, coll(DT_COLL_REDUCE, DT_ALG_BINOMIAL, node_group[r], 0,
                                        DT_BUF_GRADS, 0, P));
            if (!rc && leader)
                rc = push(plan, r, coll(DT_COLL_ALLREDUCE, DT_ALG_RING, leaders, 0,
                                        DT_BUF_GRADS, 0, P));
            if (!rc)
                rc = push(plan, r, coll(DT_COLL_BCAST, DT_ALG_BINOMIAL, node_group[r], 0,
                                        DT_BUF_GRADS, 0, P));
            comm = (double)P * 4;
            break;
        }
        case DT_STRAT_PS_CENTRAL:
            if (!rc)
                rc = push(plan, r, coll(DT_COLL_REDUCE, DT_ALG_LINEAR, world, 0, DT_BUF_GRADS,
                                        0, P));
            if (!rc && r == 0)
                rc = push(plan, r, (struct dt_op){.kind = DT_OP_COMPUTE, .phase = DT_PH_UPDATE,
                                                  .layer = -1,
                                                  .region = {DT_BUF_PARAMS, 0, P}});
            if (!rc)
                rc = push(plan, r, coll(DT_COLL_BCAST, DT_ALG_LINEAR, world, 0, DT_BUF_PARAMS,
                                        0, P));
            rp->updates = r == 0;
            comm = (r == 0 ? p - 1 : 0) * (double)P * 4;
            break;
        case DT_STRAT_PS_SHARDED: {
            long off, len;
            dt_chunk(P, p, r, &off, &len);
            if (!rc)
                rc = push(plan, r, coll(DT_COLL_REDUCE_SCATTER, DT_ALG_DIRECT, world, 0,
                                        DT_BUF_GRADS, 0, P));
            if (!rc)
                rc = push(plan, r, (struct dt_op){.kind = DT_OP_COMPUTE, .phase = DT_PH_UPDATE,
                                                  .layer = -1,
                                                  .region = {DT_BUF_PARAMS, off, len}});
            if (!rc)
                rc = push(plan, r, coll(DT_COLL_ALLGATHER, DT_ALG_DIRECT, world, 0,
                                        DT_BUF_PARAMS, 0, P));
            comm = (double)(p - 1) * len * 4;
            break;
        }
        default:
            break;
        }
        /* Every strategy but the parameter servers updates the whole model on every rank. */
        if (!rc && s != DT_STRAT_PS_CENTRAL && s != DT_STRAT_PS_SHARDED)
            rc = push(plan, r, (struct dt_op){.kind = DT_OP_COMPUTE, .phase = DT_PH_UPDATE,
                                              .layer = -1, .region = {DT_BUF_PARAMS, 0, P}});
        plan->next_handle = n_handles > plan->next_handle ? n_handles : plan->next_handle;
        rp->mem_weights = (double)P * 4;
        rp->mem_grads = (double)P * 4;
        double opt_floats = 2.0 * P; /* Adam's two moments */
        if (s == DT_STRAT_PS_CENTRAL)
            opt_floats = r == 0 ? 2.0 * P : 0;
        if (s == DT_STRAT_PS_SHARDED) {
            long off, len;
            dt_chunk(P, p, r, &off, &len);
            opt_floats = 2.0 * len;
        }
        rp->mem_optimizer = opt_floats * 4;
        rp->mem_activations = model->act_bytes * rp->batch;
        rp->mem_comm = comm;
    }
done:
    free(node_group);
    free(all);
    if (rc) {
        dt_plan_destroy(plan);
        return rc == DT_ENOMEM ? dt_fail(err, rc, NULL, 0, 0, "out of memory") : rc;
    }
    *out = plan;
    return DT_OK;
}
