/* The strategy registry, the shared emitters, and the data-parallel strategies: each compiles
 * (model, topology, parallel config) into a plan, written once for both the simulator and the
 * executor. The pipelines are in pipeline.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "dt/commpool.h"
#include "dt/collective.h"
#include "dt/tensor.h"

static bool dp_fits(const struct dt_plan_options *o, const struct dt_model *m, int n_ranks,
                    char *why, size_t whylen);
static bool rail_fits(const struct dt_plan_options *o, const struct dt_model *m, int n_ranks,
                      char *why, size_t whylen);

/* pipeline, data_parallel, fits, compile and gradient algorithm of each family (one device:
 * none; the pipelines': --grad-alg, see dtc_grad_alg) */
#define ONE_DEVICE false, false, dp_fits, dtc_compile_data_parallel, DT_ALG_LINEAR
#define DATA_PARALLEL(alg) false, true, dp_fits, dtc_compile_data_parallel, alg
#define PIPELINE true, false, dtc_pipeline_fits, dtc_compile_pipeline, DT_ALG_RING

static const struct dt_strategy_info registry[DT_STRAT_COUNT] = {
    {"sequential", "one device, no communication", "", ONE_DEVICE},
    {"reduce-bcast-linear",
     "gradients sent by every rank to rank 0, summed, averaged gradient sent back to each "
     "(seed 002)", "seed 002 (mpi4py send/recv)", DATA_PARALLEL(DT_ALG_LINEAR)},
    {"reduce-bcast",
     "gradients reduced to rank 0 and broadcast by binomial trees (MPI_Reduce + MPI_Bcast in "
     "MPICH)", "Thakur et al. 2005", DATA_PARALLEL(DT_ALG_BINOMIAL)},
    {"ring", "ring allreduce: reduce-scatter + allgather in 2(p-1) steps (Horovod, NCCL)",
     "Patarasuk and Yuan 2009; Sergeev and Del Balso 2018", DATA_PARALLEL(DT_ALG_RING)},
    {"recursive-doubling", "recursive-doubling allreduce (MPICH, short messages)",
     "Thakur et al. 2005", DATA_PARALLEL(DT_ALG_RECURSIVE_DOUBLING)},
    {"rabenseifner",
     "Rabenseifner allreduce: recursive-halving reduce-scatter + recursive-doubling allgather",
     "Rabenseifner 2004", DATA_PARALLEL(DT_ALG_RABENSEIFNER)},
    {"hierarchical", "intra-node reduce, ring allreduce among node leaders, intra-node broadcast",
     "Jia et al. 2018", DATA_PARALLEL(DT_ALG_BINOMIAL)},
    {"mpi-allreduce",
     "the MPI library's MPI_Allreduce (simulated as MPICH 4.0's default choice)",
     "Thakur et al. 2005", DATA_PARALLEL(DT_ALG_LIBRARY)},
    {"ps-central",
     "central parameter server on rank 0: push gradients, server updates, pull weights",
     "Li et al. 2014", DATA_PARALLEL(DT_ALG_LINEAR)},
    {"ps-sharded",
     "sharded parameter server: each rank owns 1/p of the weights (reduce-scatter, allgather)",
     "Li et al. 2014", DATA_PARALLEL(DT_ALG_DIRECT)},
    {"gpipe",
     "pipeline: all micro-batches forward, then all backward, one flush per step (--pp, "
     "--micro-batches, --dp)", "Huang et al. 2019", PIPELINE},
    {"naive-mp", "model parallelism: layers split over ranks, one micro-batch (--pp, --dp)",
     "seed 003; Huang et al. 2019 (M = 1)", PIPELINE},
    {"1f1b",
     "pipeline, PipeDream-Flush: one forward one backward in the steady state, at most S - s "
     "micro-batches in flight on stage s", "Narayanan et al. 2021 (PipeDream-2BW/Flush)", PIPELINE},
    {"interleaved",
     "interleaved 1F1B: --chunks V model chunks per stage, bubble divided by V",
     "Narayanan et al. 2021 (Megatron-LM)", PIPELINE},
    {"tree",
     "double binary tree allreduce: two trees each reduce and broadcast half, pipelined in "
     "chunks (NCCL 2.4)", "Sanders et al. 2009; Jeaugey 2019 (NCCL 2.4)",
     DATA_PARALLEL(DT_ALG_TREE)},
    {"rail-ring",
     "multi-level ring allreduce: ring reduce-scatter in each node, ring allreduce of each "
     "rank's 1/g across the nodes along its rail, ring allgather in the node (NCCL at scale)",
     "Rashidi et al. 2020 (ASTRA-sim multi-dimensional collectives); Jeaugey 2019 (NCCL)",
     false, true, rail_fits, dtc_compile_data_parallel, DT_ALG_RAIL_RING},
};

const struct dt_strategy_info *dt_strategy_info(enum dt_strategy s) { return &registry[s]; }
const char *dt_strategy_name(enum dt_strategy s) { return registry[s].name; }
const char *dt_strategy_description(enum dt_strategy s) { return registry[s].description; }

int dt_strategy_parse(const char *name)
{
    for (int i = 0; i < DT_STRAT_COUNT; i++)
        if (strcmp(name, registry[i].name) == 0)
            return i;
    /* Aliases people write. */
    static const struct { const char *alias; enum dt_strategy s; } aliases[] = {
        {"reduce-bcast-binomial", DT_STRAT_REDUCE_BCAST_BINOMIAL},
        {"allreduce", DT_STRAT_ALLREDUCE_LIBRARY}, {"library", DT_STRAT_ALLREDUCE_LIBRARY},
        {"ring-allreduce", DT_STRAT_ALLREDUCE_RING}, {"pipedream-flush", DT_STRAT_1F1B},
        {"interleaved-1f1b", DT_STRAT_INTERLEAVED}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0)
            return aliases[i].s;
    return -1;
}

static bool is_allreduce(enum dt_strategy s)
{
    return s == DT_STRAT_ALLREDUCE_RING || s == DT_STRAT_ALLREDUCE_RECURSIVE_DOUBLING ||
           s == DT_STRAT_ALLREDUCE_RABENSEIFNER || s == DT_STRAT_ALLREDUCE_LIBRARY ||
           s == DT_STRAT_ALLREDUCE_TREE;
}

enum dt_coll_alg dtc_grad_alg(const struct dt_plan_options *o)
{
    if (!registry[o->strategy].pipeline)
        return registry[o->strategy].alg;
    /* grad_alg 0 (linear: options not from dt_plan_options_init) means ring (plan.h) */
    return o->grad_alg == DT_ALG_LINEAR ? DT_ALG_RING : o->grad_alg;
}

/* rail-ring: 2 nodes or more, as many ranks on each (its rails). */
static bool rail_nodes_fit(const struct dt_topology *topo, int n_ranks, char *why,
                           size_t whylen)
{
    int nodes = dt_topology_node_of(topo, n_ranks - 1) + 1;
    int g = dt_topology_node_ranks(topo, 0);
    if (nodes < 2) {
        snprintf(why, whylen, "rail-ring needs ranks on at least 2 nodes");
        return false;
    }
    for (int node = 0; node < nodes; node++) {
        int first = dt_topology_node_first_rank(topo, node);
        int here = dt_topology_node_ranks(topo, node);
        here = first + here > n_ranks ? n_ranks - first : here;
        if (here != g) {
            snprintf(why, whylen, "rail-ring needs the same number of ranks on every node "
                     "(node 0 has %d, node %d %d)", g, node, here);
            return false;
        }
    }
    return true;
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
        snprintf(why, whylen, "%s needs at least 2 ranks",
                 registry[s].pipeline ? "a pipeline" : "data parallelism");
        return false;
    }
    if (s == DT_STRAT_ALLREDUCE_HIERARCHICAL) {
        int nodes = dt_topology_node_of(topo, n_ranks - 1) + 1;
        if (nodes < 2) {
            snprintf(why, whylen, "hierarchical allreduce needs ranks on at least 2 nodes");
            return false;
        }
    }
    if (s == DT_STRAT_ALLREDUCE_RAIL_RING)
        return rail_nodes_fit(topo, n_ranks, why, whylen);
    return true;
}

bool dt_strategy_fits_options(const struct dt_plan_options *o, const struct dt_model *m,
                              const struct dt_topology *topo, int n_ranks, char *why,
                              size_t whylen)
{
    if (!dt_strategy_fits(o->strategy, topo, n_ranks, why, whylen))
        return false;
    if (!dtc_seqpar_fits(o, why, whylen))
        return false;
    if (!dt_plan_grad_dtype_fits(o, why, whylen))
        return false;
    if (o->zero && !dtc_zero_fits(o, why, whylen))
        return false;
    return registry[o->strategy].fits(o, m, n_ranks, why, whylen);
}

/* The data-parallel family: no pipeline flags; buckets only where an allreduce can take
 * them. */
static bool dp_fits(const struct dt_plan_options *o, const struct dt_model *m, int n_ranks,
                    char *why, size_t whylen)
{
    if (o->pp || o->dp || o->chunks || o->micro_batches || o->n_stage_cuts ||
        o->grad_alg_given) {
        snprintf(why, whylen, "--pp, --dp, --chunks, --micro-batches, --stages and --grad-alg "
                 "apply to the pipelines (gpipe, naive-mp, 1f1b, interleaved), not to %s",
                 registry[o->strategy].name);
        return false;
    }
    if (o->bucket_bytes > 0 && !is_allreduce(o->strategy) && o->strategy != DT_STRAT_SEQUENTIAL &&
        !o->zero) {
        snprintf(why, whylen, "gradient buckets apply to the allreduce strategies (ring, "
                 "recursive-doubling, rabenseifner, mpi-allreduce), not to %s",
                 registry[o->strategy].name);
        return false;
    }
    return dtc_tensor_fits(o, m, n_ranks, why, whylen);
}

/* rail-ring: its groups are whole nodes and rails, so no tensor groups inside them. */
static bool rail_fits(const struct dt_plan_options *o, const struct dt_model *m, int n_ranks,
                      char *why, size_t whylen)
{
    if (o->tp > 1) {
        snprintf(why, whylen, "--tp does not compose with rail-ring (its groups are whole "
                 "nodes and rails)");
        return false;
    }
    return dp_fits(o, m, n_ranks, why, whylen);
}

/* ---- emitters ---- */

/* A compute op of a layer the rank holds a shard of does that share of its work. */
static void stamp_shards(const struct dt_plan *plan, int rank, struct dt_op *op)
{
    const struct dt_layer_view *v = plan->views[plan->ranks[rank].view];
    if (op->kind == DT_OP_COMPUTE && v[op->layer].shard_kind != DT_SHARD_NONE)
        op->shards = v[op->layer].shard_count;
}

int dtc_push(struct dt_plan *plan, int rank, struct dt_op op)
{
    stamp_shards(plan, rank, &op);
    return dt_plan_push(plan, rank, &op);
}

int dtc_push_eval(struct dt_plan *plan, int rank, struct dt_op op)
{
    stamp_shards(plan, rank, &op);
    return dt_plan_push_eval(plan, rank, &op);
}

int dtc_push_to(struct dt_plan *plan, int rank, struct dt_op op, bool eval)
{
    return eval ? dtc_push_eval(plan, rank, op) : dtc_push(plan, rank, op);
}

struct dt_op dtc_coll(enum dt_coll_kind kind, enum dt_coll_alg alg, int group, int root,
                      enum dt_buf buf, long offset, long count)
{
    return (struct dt_op){.kind = DT_OP_COLL, .coll = kind, .alg = alg, .group = group,
                          .root = root, .layer = -1, .region = {buf, offset, count, -1}};
}

struct dt_op dtc_zero(enum dt_buf buf, long offset, long count)
{
    return (struct dt_op){.kind = DT_OP_ZERO, .layer = -1, .region = {buf, offset, count, -1}};
}

struct dt_op dtc_update(long offset, long count, long opt_offset)
{
    return (struct dt_op){.kind = DT_OP_UPDATE, .layer = -1,
                          .region = {DT_BUF_PARAMS, offset, count, -1},
                          .dst = {DT_BUF_OPT, opt_offset, count, -1}};
}

struct dt_op dtc_load(const struct dt_plan *plan, int rank, int mb, int slot, int row0, int rows)
{
    const struct dt_rank_plan *rp = &plan->ranks[rank];
    double bytes = rp->first ? (double)rows * dt_shape_size(&plan->model->input) * 4.0 : 0;
    return (struct dt_op){.kind = DT_OP_LOAD, .layer = -1, .micro = mb, .slot = slot,
                          .row0 = row0, .samples = rows, .bytes = bytes};
}

struct dt_op dtc_compute(enum dt_phase ph, int l, int mb, int slot, int row0, int rows)
{
    return (struct dt_op){.kind = DT_OP_COMPUTE, .phase = ph, .layer = l, .micro = mb,
                          .slot = slot, .row0 = row0, .samples = rows};
}

struct dt_op dtc_loss(const struct dt_plan *plan, int mb, int slot, int rows, double scale)
{
    return (struct dt_op){.kind = DT_OP_LOSS, .layer = plan->model->n_layers - 1, .micro = mb,
                          .slot = slot, .samples = rows, .scale = scale};
}

long dtc_labels_per_sample(const struct dt_model *m)
{
    const struct dt_layer *L = &m->layers[m->n_layers - 1];
    const struct dt_shape *s = &L->out_shape;
    if (L->kind == DT_L_SIGMOID)
        return dt_shape_size(s);
    return s->rank == 3 ? s->d[1] * s->d[2] : s->rank == 2 ? s->d[0] : 1;
}

int dtc_finish_rank(struct dt_plan *plan, int r)
{
    const struct dt_model *m = plan->model;
    struct dt_rank_plan *rp = &plan->ranks[r];
    const struct dt_layer_view *v = plan->views[rp->view];
    double rows = (double)rp->slots * rp->slot_rows, state = 0;
    int rc = dtc_recompute_program(plan, r);
    const struct dt_recompute_layout *rcmp = rc ? NULL : dt_plan_rank_recompute(plan, r);
    const struct dt_dact_layout *dl = dt_plan_dact(plan, r); /* gradients: pool and own */
    rc |= dl ? DT_OK : DT_ENOMEM;
    if (!rp->eval_rows)
        rp->eval_rows = (int)rows;
    enum dt_precision pr = plan->opt.precision;
    enum dt_dtype S = dt_precision_storage(pr);
    rc |= dt_plan_add_buffer(plan, r, DT_BUF_PARAMS, S, -1, (double)rp->n_params);
    rc |= dt_plan_add_buffer(plan, r, DT_BUF_GRADS, dt_plan_grad_dtype(&plan->opt), -1,
                             (double)(rp->n_grads ? rp->n_grads : rp->n_params));
    rc |= dt_plan_add_buffer(plan, r, DT_BUF_OPT, DT_TYPE_F32, -1,
                             (double)dt_optimizer_moments(plan->opt.optimizer) * rp->n_updated);
    rc |= dtc_precision_buffers(plan, r);
    for (int l = 0; l < m->n_layers; l++)
        if (v[l].runs)
            state += (double)m->layers[l].state_floats;
    rc |= dt_plan_add_buffer(plan, r, DT_BUF_STATE, DT_TYPE_F32, -1, state);
    bool until_sent = false;
    for (int l = 0; l < m->n_layers; l++)
        until_sent |= v[l].act_until_sent;
    rp->ws_rows = rcmp || until_sent ? dt_plan_ws_rows(rp) : 0;
    for (int l = 0; l < m->n_layers && !rc; l++) {
        if (!v[l].holds)
            continue;
        long act = dt_shard_act_floats(m, v, l), kf, ki;
        if (v[l].act_until_sent) /* held until sent: the rows of one op */
            rc |= dt_plan_add_buffer(plan, r, DT_BUF_ACT, S, l, (double)act * rp->ws_rows);
        else if (!rcmp || !rcmp->act_ws[l]) /* else in the recomputation workspace */
            rc |= dt_plan_add_buffer(plan, r, DT_BUF_ACT, S, l, act * rows);
        if (dt_layer_needs_dact(m, l) && dl->at[l] < 0)
            rc |= dt_plan_add_buffer(plan, r, DT_BUF_DACT, S, l, act * rows);
        if (!v[l].runs || (rcmp && rcmp->keep_ws[l]))
            continue;
        dt_shard_keep(m, v, l, &kf, &ki);
        if (kf)
            rc |= dt_plan_add_buffer(plan, r, DT_BUF_KEEP, dt_shard_keep_dtype(m, v, l, S), l,
                                     kf * rows);
        if (ki)
            rc |= dt_plan_add_buffer(plan, r, DT_BUF_KEEP, DT_TYPE_I32, l, ki * rows);
    }
    if (!rc && dl->pool) /* one slot's rows */
        rc |= dt_plan_add_buffer(plan, r, DT_BUF_DACT, S, -1, (double)dl->pool * rp->slot_rows);
    if (rcmp && rcmp->ws_floats)
        rc |= dt_plan_add_buffer(plan, r, DT_BUF_KEEP, S, -1,
                                 (double)rcmp->ws_floats * rp->ws_rows);
    if (rcmp && rcmp->ws_ints)
        rc |= dt_plan_add_buffer(plan, r, DT_BUF_KEEP, DT_TYPE_I32, -1,
                                 (double)rcmp->ws_ints * rp->ws_rows);
    long in = dt_shape_size(&m->input);
    if (rp->first)
        rc |= dt_plan_add_buffer(plan, r, DT_BUF_INPUT, DT_TYPE_F32, -1, in * rows);
    if (rp->first && m->input_is_tokens)
        rc |= dt_plan_add_buffer(plan, r, DT_BUF_INPUT, DT_TYPE_I32, -1, in * rows);
    if (rp->last)
        rc |= dt_plan_add_buffer(plan, r, DT_BUF_INPUT, DT_TYPE_I32, -1,
                                 dtc_labels_per_sample(m) * rows);
    /* receive buffers: one pool per dtype of the regions received, sized by what is in
     * flight at once (dt/commpool.h; f32: the scaler's flag, the vocabulary-parallel loss's
     * statistics; the gradients under --grad-precision fp32) */
    long comm = dt_comm_pool_rank(plan, r, S);
    long comm32 = S == DT_TYPE_F32 ? 0 : dt_comm_pool_rank(plan, r, DT_TYPE_F32);
    rc |= comm < 0 || comm32 < 0 ? DT_ENOMEM : DT_OK;
    rc |= dt_plan_add_buffer(plan, r, DT_BUF_COMM, S, -1, (double)comm);
    if (comm32 > 0)
        rc |= dt_plan_add_buffer(plan, r, DT_BUF_COMM, DT_TYPE_F32, -1, (double)comm32);
    if (!plan->probe) /* a probe's kept ranks name their own peers: rarely alike */
        rc |= dt_plan_share_rank(plan, r); /* now, to keep the compile's peak low */
    return rc ? DT_ENOMEM : DT_OK;
}

/* ---- data parallelism ---- */

int dtc_first_trainable(const struct dt_model *m)
{
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].params > 0)
            return l;
    return m->n_layers;
}

/* The eval program of a rank that runs every layer: load, forward, loss. */
static int eval_whole(struct dt_plan *plan, int r, const struct dtc_tensor *tp)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    int rows = rp->slots * rp->slot_rows;
    plan->ranks[r].eval_rows = rows;
    int rc = dtc_push_eval(plan, r, dtc_load(plan, r, 0, 0, 0, rows));
    for (int l = 0; l < plan->model->n_layers && !rc; l++) {
        rc = dtc_push_eval(plan, r, dtc_compute(DT_PH_FORWARD, l, 0, 0, 0, rows));
        if (!rc)
            rc = dtc_tensor_after(plan, r, tp, DT_PH_FORWARD, l, 0, rows, true);
    }
    return rc ? rc : dtc_tensor_loss(plan, r, tp, dtc_loss(plan, 0, 0, rows, rows), true);
}

/* Micro-batch k of rank r's step: forward and backward; with buckets on the last one,
 * non-blocking allreduces of the gradients start during backward as soon as a bucket is full
 * (PyTorch DDP's overlap; earlier micro-batches accumulate locally, as under no_sync()).
 * world: the rank's data-parallel group (-1: none); tp: its tensor group's layout (NULL:
 * none). */
static int micro_batch(struct dt_plan *plan, int r, int k, int row0, int rows, int world,
                       const struct dtc_tensor *tp, int *n_handles)
{
    const struct dt_model *m = plan->model;
    const struct dt_layer_view *v = plan->views[plan->ranks[r].view];
    int rc = dtc_push(plan, r, dtc_load(plan, r, k, 0, row0, rows));
    for (int l = 0; l < m->n_layers && !rc; l++) {
        rc = dtc_push(plan, r, dtc_compute(DT_PH_FORWARD, l, k, 0, row0, rows));
        if (!rc)
            rc = dtc_tensor_after(plan, r, tp, DT_PH_FORWARD, l, 0, rows, false);
    }
    if (!rc)
        rc = dtc_tensor_loss(plan, r, tp, dtc_loss(plan, k, 0, rows, plan->global_batch),
                             false);
    bool buckets = plan->opt.bucket_bytes > 0 && is_allreduce(plan->strategy) &&
                   k == plan->opt.accumulate - 1 && world >= 0;
    long hi = plan->ranks[r].n_params, lo = hi;
    int stop = dtc_first_trainable(m);
    double grad_bytes = (double)dt_dtype_size(dt_plan_grad_dtype(&plan->opt));
    for (int l = m->n_layers - 1; l >= 0 && l >= stop && !rc; l--) {
        rc = dtc_push(plan, r, dtc_compute(DT_PH_BACKWARD, l, k, 0, row0, rows));
        if (!rc)
            rc = dtc_tensor_after(plan, r, tp, DT_PH_BACKWARD, l, 0, rows, false);
        if (!rc && k == plan->opt.accumulate - 1) /* gradients accumulate until then */
            rc = dtc_tensor_grads(plan, r, tp, l);
        if (rc || !buckets || dt_shard_params(m, v, l) == 0)
            continue;
        lo = v[l].param_offset;
        if ((double)(hi - lo) * grad_bytes >= plan->opt.bucket_bytes || l == stop) {
            struct dt_op op = dtc_coll(DT_COLL_ALLREDUCE, dtc_grad_alg(&plan->opt), world,
                                       0, DT_BUF_GRADS, lo, hi - lo);
            op.nonblocking = true;
            op.handle = (*n_handles)++;
            rc = dtc_push(plan, r, op);
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
    int rc = ranks && lead ? 0 : -1;
    for (int node = 0; node < n_nodes && !rc; node++) {
        int n = 0;
        for (int r = 0; r < p; r++)
            if (dt_topology_node_of(plan->topo, r) == node)
                ranks[n++] = r;
        lead[node] = ranks[0];
        int g = dt_plan_add_group(plan, n, ranks);
        rc = g < 0 ? -1 : 0;
        for (int i = 0; i < n && !rc; i++)
            node_group_of_rank[ranks[i]] = g;
    }
    if (!rc)
        *leaders = dt_plan_add_group(plan, n_nodes, lead);
    free(ranks);
    free(lead);
    return rc || *leaders < 0 ? -1 : 0;
}

/* The gradient exchange over the rank's data-parallel group `world` (-1: it has no peers)
 * and its update, after its backward passes. */
static int synchronise(struct dt_plan *plan, int r, int world, const int *node_group,
                       int leaders, int n_handles)
{
    struct dt_rank_plan *rp = &plan->ranks[r];
    enum dt_strategy s = world < 0 ? DT_STRAT_SEQUENTIAL : plan->strategy;
    const long P = rp->n_params;
    const int p = rp->dp_count;
    const enum dt_coll_alg a = dtc_grad_alg(&plan->opt); /* the registry's */
    int rc = 0;
    switch (s) {
    case DT_STRAT_SEQUENTIAL:
        break;
    case DT_STRAT_REDUCE_BCAST_LINEAR:
    case DT_STRAT_REDUCE_BCAST_BINOMIAL:
        rc = dtc_push(plan, r, dtc_coll(DT_COLL_REDUCE, a, world, 0, DT_BUF_GRADS, 0, P));
        if (!rc)
            rc = dtc_push(plan, r, dtc_coll(DT_COLL_BCAST, a, world, 0, DT_BUF_GRADS, 0, P));
        break;
    case DT_STRAT_ALLREDUCE_RING:
    case DT_STRAT_ALLREDUCE_RECURSIVE_DOUBLING:
    case DT_STRAT_ALLREDUCE_RABENSEIFNER:
    case DT_STRAT_ALLREDUCE_LIBRARY:
    case DT_STRAT_ALLREDUCE_TREE:
        if (n_handles == 0)
            rc = dtc_push(plan, r, dtc_coll(DT_COLL_ALLREDUCE, a, world, 0,
                                            DT_BUF_GRADS, 0, P));
        for (int h = 0; h < n_handles && !rc; h++)
            rc = dtc_push(plan, r, (struct dt_op){.kind = DT_OP_WAIT, .layer = -1, .handle = h});
        break;
    case DT_STRAT_ALLREDUCE_HIERARCHICAL: {
        bool leader = dt_group_index(&plan->groups[node_group[r]], r) == 0;
        rc = dtc_push(plan, r, dtc_coll(DT_COLL_REDUCE, a, node_group[r], 0, DT_BUF_GRADS,
                                        0, P));
        if (!rc && leader)
            rc = dtc_push(plan, r, dtc_coll(DT_COLL_ALLREDUCE, DT_ALG_RING, leaders, 0,
                                            DT_BUF_GRADS, 0, P));
        if (!rc)
            rc = dtc_push(plan, r, dtc_coll(DT_COLL_BCAST, a, node_group[r], 0, DT_BUF_GRADS,
                                            0, P));
        break;
    }
    case DT_STRAT_ALLREDUCE_RAIL_RING: { /* one op over all: every rank's program alike */
        struct dt_op op = dtc_coll(DT_COLL_ALLREDUCE, DT_ALG_RAIL_RING, world, 0, DT_BUF_GRADS,
                                   0, P);
        op.root = dt_topology_node_ranks(plan->topo, 0); /* members per node */
        rc = dtc_push(plan, r, op);
        break;
    }
    case DT_STRAT_PS_CENTRAL:
        rc = dtc_push(plan, r, dtc_coll(DT_COLL_REDUCE, a, world, 0, DT_BUF_GRADS, 0, P));
        if (!rc)
            rc = dtc_optimizer_step(plan, r, rp->dp_index == 0, 0, P, 0);
        if (!rc)
            rc = dtc_push(plan, r, dtc_coll(DT_COLL_BCAST, a, world, 0, DT_BUF_PARAMS, 0, P));
        rp->updates = rp->dp_index == 0;
        rp->n_updated = rp->dp_index == 0 ? P : 0;
        return rc;
    case DT_STRAT_PS_SHARDED: {
        long off, len;
        dt_chunk(P, p, rp->dp_index, &off, &len);
        rc = dtc_push(plan, r, dtc_coll(DT_COLL_REDUCE_SCATTER, a, world, 0, DT_BUF_GRADS,
                                        0, P));
        if (!rc)
            rc = dtc_optimizer_step(plan, r, true, off, len, 0);
        if (!rc)
            rc = dtc_push(plan, r, dtc_coll(DT_COLL_ALLGATHER, a, world, 0, DT_BUF_PARAMS,
                                            0, P));
        rp->n_updated = len;
        return rc;
    }
    default:
        break;
    }
    return rc ? rc : dtc_optimizer_step(plan, r, true, 0, P, 0);
}

/* Data parallelism, and with --tp T tensor parallelism inside each replica (tensor.c):
 * p / T replicas of T ranks each. */
int dtc_compile_data_parallel(struct dt_plan *plan, struct dt_error *err)
{
    const int p = plan->n_ranks, K = plan->opt.accumulate;
    const struct dt_plan_options *opt = &plan->opt;
    const int T = opt->tp > 1 ? opt->tp : 1, D = p / T;
    int *node_group = calloc((size_t)p, sizeof *node_group);
    int *all = malloc((size_t)p * sizeof *all);
    int rc = node_group && all ? DT_OK : DT_ENOMEM;
    if (opt->zero) { /* the same family, its state sharded (zero.c) */
        free(node_group);
        free(all);
        return dtc_compile_zero(plan, err);
    }
    struct dtc_tensor tp = {0};
    if (!rc && T > 1)
        rc = dtc_tensor_init(plan, T, is_allreduce(plan->strategy) ?
                             dtc_grad_alg(opt) : DT_ALG_RING, &tp);
    plan->global_batch = opt->scaling == DT_SCALING_WEAK ? opt->batch * D * K : opt->batch;
    plan->lr_scale = opt->scaling == DT_SCALING_WEAK ? D : 1;
    plan->micro_batches = K;
    plan->dp = D;
    for (int r = 0; r < p && !rc; r++) {
        long off, len;
        struct dt_rank_plan *rp = &plan->ranks[r];
        dt_chunk(plan->global_batch, D, rp->dp_index, &off, &len);
        rp->batch = (int)len;
        rp->slot_rows = (int)((len + K - 1) / K);
        rp->updates = true;
        all[r] = r;
    }
    int world = rc || T > 1 ? -1 : dt_plan_add_group(plan, p, all), leaders = -1;
    if (!rc && ((world < 0 && T == 1) ||
                (plan->strategy == DT_STRAT_ALLREDUCE_HIERARCHICAL &&
                 node_groups(plan, p, node_group, &leaders))))
        rc = DT_ENOMEM;
    for (int r = 0; r < p && !rc; r++) {
        struct dt_rank_plan *rp = &plan->ranks[r];
        int n_handles = 0, dp = T > 1 ? tp.dp_group[r] : world;
        rp->replicas = dp;
        if (dt_plan_dropped(plan, r)) /* a probe's: no ops, no buffers */
            continue;
        rc = dtc_push(plan, r, dtc_zero(DT_BUF_GRADS, 0, rp->n_params));
        for (int k = 0; k < K && !rc; k++) {
            long off, len;
            dt_chunk(rp->batch, K, k, &off, &len);
            rc = micro_batch(plan, r, k, (int)off, (int)len, dp, T > 1 ? &tp : NULL,
                             &n_handles);
        }
        if (!rc)
            rc = synchronise(plan, r, dp, node_group, leaders, n_handles);
        if (!rc)
            rc = eval_whole(plan, r, T > 1 ? &tp : NULL);
        if (!rc)
            rc = dtc_finish_rank(plan, r);
        plan->next_handle = n_handles > plan->next_handle ? n_handles : plan->next_handle;
    }
    free(node_group);
    free(all);
    dtc_tensor_free(&tp);
    return rc == DT_ENOMEM ? dt_fail(err, rc, NULL, 0, 0, "out of memory") : rc;
}

int dt_plan_ranks(const struct dt_plan_options *o, const struct dt_topology *topo)
{
    if (o->strategy == DT_STRAT_SEQUENTIAL)
        return 1;
    if (o->n_ranks)
        return o->n_ranks;
    if (registry[o->strategy].pipeline && o->dp)
        return o->dp * (o->pp ? o->pp : 2) * (o->tp > 1 ? o->tp : 1);
    return topo->n_ranks;
}

void dt_plan_shape(const struct dt_plan_options *o, const struct dt_topology *topo, int *T,
                   int *S, int *D)
{
    bool pipeline = registry[o->strategy].pipeline;
    *T = o->tp > 1 ? o->tp : 1;
    *S = pipeline ? (o->pp > 1 ? o->pp : 2) : 1;
    *D = pipeline && o->dp ? o->dp : dt_plan_ranks(o, topo) / (*T * *S);
}

/* Whether the middle data-parallel replicas are no larger than the first and the last (what
 * a probe assumes), by the registry's gradient algorithm (dtc_grad_alg): not in a tree
 * (binomial, hierarchical's node trees, NCCL's double tree: inner nodes sum more receives),
 * nor in recursive doubling or halving (the library's too) on a group that is not a power of
 * two (the extra ranks). */
static bool replicas_alike(const struct dt_plan_options *o, const struct dt_topology *topo)
{
    int t, stages, d;
    dt_plan_shape(o, topo, &t, &stages, &d);
    switch (dtc_grad_alg(o)) {
    case DT_ALG_BINOMIAL:
    case DT_ALG_TREE: return false;
    case DT_ALG_RECURSIVE_DOUBLING:
    case DT_ALG_RABENSEIFNER:
    case DT_ALG_LIBRARY: return d > 0 && (d & (d - 1)) == 0;
    default: return true; /* linear, ring, direct: every member receives alike */
    }
}

/* What build compiles: the whole plan, a probe (dt_plan_probe), a floor (dt_plan_floor). */
enum build_mode { BUILD_FULL, BUILD_PROBE, BUILD_FLOOR };

/* The plan of build's checked options, K micro-batches accumulated; one_tensor_rank: a
 * probe or floor of a pipeline builds tensor rank 0 alone where it may (probe_tensor.c);
 * one_replica: a probe of a pipeline builds its first replica alone where it may
 * (probe_replica.c). */
static int compile(const struct dt_model *model, const struct dt_topology *topo,
                   const struct dt_plan_options *opt, enum build_mode mode, bool one_tensor_rank,
                   bool one_replica, struct dt_plan **out, struct dt_error *err)
{
    bool probe = mode != BUILD_FULL;
    struct dt_plan *plan;
    *out = NULL;
    if (dt_plan_alloc(model, topo, opt, dt_plan_ranks(opt, topo), &plan))
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    plan->opt.accumulate = opt->accumulate > 0 ? opt->accumulate : 1;
    plan->probe = probe && replicas_alike(opt, topo);
    plan->floor = mode == BUILD_FLOOR;
    plan->probe_tensor = plan->probe && one_tensor_rank ? dtc_probe_tensor_width(plan) : 0;
    plan->probe_replica = plan->probe && mode == BUILD_PROBE && one_replica &&
                          dtc_probe_replica_ok(plan);
    int rc = registry[opt->strategy].compile(plan, err);
    if (!rc && !plan->probe && dt_plan_share(plan))
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    if (!rc && !probe)
        rc = dt_plan_check(plan, err);
    if (rc) {
        dt_plan_destroy(plan);
        return rc;
    }
    *out = plan;
    return DT_OK;
}

static int build(const struct dt_model *model, const struct dt_topology *topo,
                 const struct dt_plan_options *opt, enum build_mode mode, struct dt_plan **out,
                 struct dt_error *err)
{
    *out = NULL;
    enum dt_strategy s = opt->strategy;
    if (s < 0 || s >= DT_STRAT_COUNT)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "unknown strategy %d", (int)s);
    int p = dt_plan_ranks(opt, topo);
    char why[512];
    if (!dt_strategy_fits_options(opt, model, topo, p, why, sizeof why))
        return dt_fail(err, DT_EINPUT, topo->path, 0, 0, "strategy %s does not fit: %s",
                       dt_strategy_name(s), why);
    if (opt->batch < 1)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "batch must be at least 1 (got %d)",
                       opt->batch);
    int K = opt->accumulate > 0 ? opt->accumulate : 1;
    int replicas = opt->tp > 1 ? p / opt->tp : p;
    if (opt->scaling == DT_SCALING_STRONG && !registry[s].pipeline && opt->batch < replicas * K)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "global batch %d is smaller than the %d replicas x %d accumulated "
                       "micro-batches that share it", opt->batch, replicas, K);
    int rc = compile(model, topo, opt, mode, true, true, out, err);
    if (!rc && !dtc_probe_replica_alike(*out)) { /* its last replica differs: build it */
        dt_plan_destroy(*out);
        rc = compile(model, topo, opt, mode, true, false, out, err);
    }
    if (!rc && !dtc_probe_tensor_alike(*out)) { /* its tensor ranks differ: build them all */
        dt_plan_destroy(*out);
        rc = compile(model, topo, opt, mode, false, false, out, err);
    }
    return rc;
}

int dt_plan_build(const struct dt_model *model, const struct dt_topology *topo,
                  const struct dt_plan_options *opt, struct dt_plan **out, struct dt_error *err)
{
    return build(model, topo, opt, BUILD_FULL, out, err);
}

int dt_plan_probe(const struct dt_model *model, const struct dt_topology *topo,
                  const struct dt_plan_options *opt, struct dt_plan **out, struct dt_error *err)
{
    return build(model, topo, opt, BUILD_PROBE, out, err);
}

int dt_plan_floor(const struct dt_model *model, const struct dt_topology *topo,
                  const struct dt_plan_options *opt, struct dt_plan **out, struct dt_error *err)
{
    *out = NULL;
    if (opt->strategy < 0 || opt->strategy >= DT_STRAT_COUNT || !registry[opt->strategy].pipeline)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "a floor plan is a pipeline's");
    return build(model, topo, opt, BUILD_FLOOR, out, err);
}
