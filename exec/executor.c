/* The plan walker: see executor.h. */
#include "executor.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dt/collective.h"

/* MPI counts are ints: longer transfers go in pieces of this many floats. */
#define PIECE_FLOATS (1L << 28)
#define TAG_BLOCKING 1
#define TAG_HANDLE0 2
#define TAG_P2P0 20000
#define MAX_HANDLES 16000

/* One communication op of this rank (COLL, SEND or RECV) and its progress. */
struct comm_state {
    int op;                 /* index in the rank's ops */
    const struct dt_op *o;
    struct dt_schedule sched;
    bool library;
    MPI_Comm gcomm;         /* library: the group's communicator */
    const int *granks;      /* group members' ranks in the executor's comm */
    int gsize, me;
    int tag;
    float *scratch;
    long scratch_floats;
    MPI_Request *req;
    MPI_Status *status;     /* a real array: GCC rejects MPI_STATUSES_IGNORE's fake pointer */
    int max_req, n_req;
    int round;
    bool active;
    int *counts, *displs;   /* library reduce-scatter / allgather */
    long my_off, my_len;    /* library reduce-scatter: this member's chunk */
    double bytes_sent, bytes_recv;
    double end_s;
};

struct dtx_exec {
    const struct dt_plan *plan;
    const struct dt_rank_plan *rp;
    struct dtk_net *net;
    MPI_Comm comm;
    int rank, size;
    struct dtx_optimizer opt;
    float *x;
    int *y;
    long in_floats;
    int label_rows;
    struct comm_state **state;    /* per op, NULL for compute/load/wait */
    struct comm_state **handle;   /* per handle */
    int n_handles;
    MPI_Comm *gcomm;              /* per plan group: MPI_COMM_NULL when unused or not a member */
    bool *gcomm_owned;
    long steps;
    double t0;
    double scratch_bytes;
};

static float *buffer_of(struct dtx_exec *ex, enum dt_buf b)
{
    return b == DT_BUF_PARAMS ? dtk_net_params(ex->net) : dtk_net_grads(ex->net);
}

static float *region_base(struct dtx_exec *ex, const struct dt_op *o)
{
    return buffer_of(ex, o->region.buf) + o->region.offset;
}

/* ---- setup ---- */

static int group_index(const struct dt_group *g, int rank)
{
    for (int i = 0; i < g->n; i++)
        if (g->ranks[i] == rank)
            return i;
    return -1;
}

static int pieces(long count)
{
    return (int)((count + PIECE_FLOATS - 1) / PIECE_FLOATS);
}

/* Scratch floats and requests the widest round of a schedule needs. */
static void schedule_needs(const struct dt_schedule *s, long *floats, int *reqs)
{
    *floats = 0;
    *reqs = 1;
    for (int r = 0; r < s->n_rounds; r++) {
        long f = 0;
        int q = 0;
        for (int i = s->round_start[r]; i < s->round_start[r + 1]; i++) {
            q += pieces(s->xfers[i].count);
            if (!s->xfers[i].send)
                f += s->xfers[i].count;
        }
        if (f > *floats)
            *floats = f;
        if (q > *reqs)
            *reqs = q;
    }
}

static int setup_comm_op(struct dtx_exec *ex, int i, struct dt_error *err)
{
    const struct dt_op *o = &ex->rp->ops[i];
    long total = dtk_net_n_params(ex->net);
    if (o->region.offset < 0 || o->region.count < 0 || o->region.offset + o->region.count > total)
        return dt_fail(err, DT_EINTERNAL, NULL, 0, 0,
                       "rank %d op %d: region [%ld+%ld] outside the %ld parameters", ex->rank, i,
                       o->region.offset, o->region.count, total);
    struct comm_state *c = calloc(1, sizeof *c);
    if (!c)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    ex->state[i] = c;
    c->op = i;
    c->o = o;
    dt_schedule_init(&c->sched);
    c->tag = o->nonblocking ? TAG_HANDLE0 + o->handle : TAG_BLOCKING;
    if (o->nonblocking) {
        if (o->handle < 0 || o->handle >= ex->n_handles || ex->handle[o->handle])
            return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "rank %d op %d: bad or reused handle %d",
                           ex->rank, i, o->handle);
        ex->handle[o->handle] = c;
    }
    if (o->kind == DT_OP_SEND || o->kind == DT_OP_RECV) {
        if (o->peer < 0 || o->peer >= ex->size || o->peer == ex->rank)
            return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "rank %d op %d: bad peer %d", ex->rank,
                           i, o->peer);
        c->tag = TAG_P2P0 + (o->tag % 10000 + 10000) % 10000;
        c->max_req = pieces(o->region.count) + 1;
        c->scratch_floats = o->kind == DT_OP_RECV ? o->region.count : 0;
    } else {
        if (o->group < 0 || o->group >= ex->plan->n_groups)
            return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "rank %d op %d: no group %d", ex->rank,
                           i, o->group);
        const struct dt_group *g = &ex->plan->groups[o->group];
        c->granks = g->ranks;
        c->gsize = g->n;
        c->me = group_index(g, ex->rank);
        if (c->me < 0)
            return dt_fail(err, DT_EINTERNAL, NULL, 0, 0,
                           "rank %d op %d: a collective of group %d, which does not hold it",
                           ex->rank, i, o->group);
        c->library = o->alg == DT_ALG_LIBRARY;
        if (c->library) {
            if (o->region.count > INT_MAX)
                return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                               "a library collective of %ld floats exceeds MPI's int count",
                               o->region.count);
            c->gcomm = ex->gcomm[o->group];
            c->max_req = 1;
            if (o->coll == DT_COLL_REDUCE_SCATTER || o->coll == DT_COLL_ALLGATHER) {
                c->counts = malloc((size_t)g->n * sizeof *c->counts);
                c->displs = malloc((size_t)g->n * sizeof *c->displs);
                if (!c->counts || !c->displs)
                    return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
                for (int k = 0; k < g->n; k++) {
                    long off, len;
                    dt_chunk(o->region.count, g->n, k, &off, &len);
                    c->counts[k] = (int)len;
                    c->displs[k] = (int)off;
                }
                dt_chunk(o->region.count, g->n, c->me, &c->my_off, &c->my_len);
                if (o->coll == DT_COLL_REDUCE_SCATTER)
                    c->scratch_floats = c->my_len;
            } else if (o->coll != DT_COLL_ALLREDUCE && o->coll != DT_COLL_REDUCE &&
                       o->coll != DT_COLL_BCAST) {
                return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "unknown collective %d", o->coll);
            }
        } else {
            int rc = dt_coll_schedule(o->coll, o->alg, g->n, c->me, o->root, o->region.count,
                                      &c->sched, err);
            if (rc)
                return rc;
            schedule_needs(&c->sched, &c->scratch_floats, &c->max_req);
        }
    }
    c->req = malloc((size_t)c->max_req * sizeof *c->req);
    c->status = malloc((size_t)c->max_req * sizeof *c->status);
    c->scratch = malloc((size_t)(c->scratch_floats > 0 ? c->scratch_floats : 1) * sizeof(float));
    if (!c->req || !c->status || !c->scratch)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0,
                       "out of memory for %ld floats of receive buffer", c->scratch_floats);
    ex->scratch_bytes += (double)c->scratch_floats * sizeof(float);
    return DT_OK;
}

/* One communicator per group that some rank's library collective uses (collective over
 * comm: the plan is the same on every rank, so every rank makes the same calls). */
static int make_group_comms(struct dtx_exec *ex, struct dt_error *err)
{
    const struct dt_plan *p = ex->plan;
    ex->gcomm = malloc((size_t)(p->n_groups ? p->n_groups : 1) * sizeof *ex->gcomm);
    ex->gcomm_owned = calloc((size_t)(p->n_groups ? p->n_groups : 1), sizeof *ex->gcomm_owned);
    if (!ex->gcomm || !ex->gcomm_owned)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int g = 0; g < p->n_groups; g++) {
        ex->gcomm[g] = MPI_COMM_NULL;
        bool used = false;
        for (int r = 0; r < p->n_ranks && !used; r++)
            for (int i = 0; i < p->ranks[r].n_ops && !used; i++) {
                const struct dt_op *o = &p->ranks[r].ops[i];
                used = o->kind == DT_OP_COLL && o->alg == DT_ALG_LIBRARY && o->group == g;
            }
        if (!used)
            continue;
        const struct dt_group *G = &p->groups[g];
        bool identity = G->n == ex->size;
        for (int i = 0; i < G->n && identity; i++)
            identity = G->ranks[i] == i;
        if (identity) {
            ex->gcomm[g] = ex->comm;
            continue;
        }
        int idx = group_index(G, ex->rank);
        MPI_Comm_split(ex->comm, idx >= 0 ? 0 : MPI_UNDEFINED, idx, &ex->gcomm[g]);
        ex->gcomm_owned[g] = ex->gcomm[g] != MPI_COMM_NULL;
    }
    return DT_OK;
}

int dtx_exec_create(const struct dt_plan *plan, struct dtk_net *net, MPI_Comm comm,
                    const struct dtx_optimizer *opt, struct dtx_exec **out, struct dt_error *err)
{
    *out = NULL;
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (plan->n_ranks != size)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "the %s plan has %d ranks but %d MPI processes run it",
                       dt_strategy_name(plan->strategy), plan->n_ranks, size);
    const struct dt_rank_plan *rp = &plan->ranks[rank];
    if (rp->batch > dtk_net_max_batch(net))
        return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "net built for %d samples, plan needs %d",
                       dtk_net_max_batch(net), rp->batch);
    if (plan->next_handle < 0 || plan->next_handle > MAX_HANDLES)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "the plan uses %d handles (at most %d)",
                       plan->next_handle, MAX_HANDLES);
    struct dtx_exec *ex = calloc(1, sizeof *ex);
    if (!ex)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    ex->plan = plan;
    ex->rp = rp;
    ex->net = net;
    ex->comm = comm;
    ex->rank = rank;
    ex->size = size;
    ex->opt = *opt;
    const struct dt_model *m = dtk_net_model(net);
    ex->in_floats = dtk_net_out_floats(net, -1);
    ex->label_rows = (int)dtk_net_labels_per_sample(net);
    ex->n_handles = plan->next_handle;
    ex->x = malloc((size_t)(rp->batch ? rp->batch : 1) * (size_t)ex->in_floats * sizeof *ex->x);
    ex->y = calloc((size_t)(rp->batch ? rp->batch : 1) * (size_t)ex->label_rows, sizeof *ex->y);
    ex->state = calloc((size_t)(rp->n_ops ? rp->n_ops : 1), sizeof *ex->state);
    ex->handle = calloc((size_t)(ex->n_handles ? ex->n_handles : 1), sizeof *ex->handle);
    int rc = ex->x && ex->y && ex->state && ex->handle
                 ? DT_OK
                 : dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    if (!rc)
        rc = make_group_comms(ex, err);
    for (int i = 0; i < rp->n_ops && !rc; i++) {
        const struct dt_op *o = &rp->ops[i];
        if (o->kind == DT_OP_COLL || o->kind == DT_OP_SEND || o->kind == DT_OP_RECV)
            rc = setup_comm_op(ex, i, err);
        else if (o->kind == DT_OP_COMPUTE && o->phase != DT_PH_UPDATE &&
                 (o->layer < 0 || o->layer >= m->n_layers || o->samples < 1 ||
                  o->samples > rp->batch))
            rc = dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "rank %d op %d: bad layer %d or samples %d",
                         rank, i, o->layer, o->samples);
        else if (o->kind == DT_OP_COMPUTE && o->phase == DT_PH_UPDATE &&
                 (o->region.offset < 0 || o->region.count < 0 ||
                  o->region.offset + o->region.count > dtk_net_n_params(net)))
            rc = dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "rank %d op %d: update region outside",
                         rank, i);
        else if (o->kind == DT_OP_WAIT && (o->handle < 0 || o->handle >= ex->n_handles))
            rc = dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "rank %d op %d: wait for unknown handle %d",
                         rank, i, o->handle);
    }
    if (rc) {
        dtx_exec_destroy(ex);
        return rc;
    }
    *out = ex;
    return DT_OK;
}

void dtx_exec_destroy(struct dtx_exec *ex)
{
    if (!ex)
        return;
    for (int i = 0; ex->state && i < ex->rp->n_ops; i++) {
        struct comm_state *c = ex->state[i];
        if (!c)
            continue;
        dt_schedule_free(&c->sched);
        free(c->scratch);
        free(c->req);
        free(c->status);
        free(c->counts);
        free(c->displs);
        free(c);
    }
    for (int g = 0; ex->gcomm && g < ex->plan->n_groups; g++)
        if (ex->gcomm_owned[g])
            MPI_Comm_free(&ex->gcomm[g]);
    free(ex->gcomm);
    free(ex->gcomm_owned);
    free(ex->state);
    free(ex->handle);
    free(ex->x);
    free(ex->y);
    free(ex);
}

long dtx_exec_steps(const struct dtx_exec *ex) { return ex->steps; }
double dtx_exec_scratch_bytes(const struct dtx_exec *ex) { return ex->scratch_bytes; }

/* ---- rounds of the project's own algorithms ---- */

static void post_round(struct dtx_exec *ex, struct comm_state *c)
{
    const struct dt_schedule *s = &c->sched;
    float *base = region_base(ex, c->o);
    int a = s->round_start[c->round], b = s->round_start[c->round + 1];
    long roff = 0;
    c->n_req = 0;
    /* receives first, so that a message finds its buffer posted */
    for (int i = a; i < b; i++) {
        const struct dt_xfer *t = &s->xfers[i];
        if (t->send)
            continue;
        for (long off = 0; off < t->count; off += PIECE_FLOATS) {
            long len = t->count - off < PIECE_FLOATS ? t->count - off : PIECE_FLOATS;
            MPI_Irecv(c->scratch + roff + off, (int)len, MPI_FLOAT, c->granks[t->peer], c->tag,
                      ex->comm, &c->req[c->n_req++]);
        }
        roff += t->count;
        c->bytes_recv += (double)t->count * sizeof(float);
    }
    for (int i = a; i < b; i++) {
        const struct dt_xfer *t = &s->xfers[i];
        if (!t->send)
            continue;
        for (long off = 0; off < t->count; off += PIECE_FLOATS) {
            long len = t->count - off < PIECE_FLOATS ? t->count - off : PIECE_FLOATS;
            MPI_Isend(base + t->offset + off, (int)len, MPI_FLOAT, c->granks[t->peer], c->tag,
                      ex->comm, &c->req[c->n_req++]);
        }
        c->bytes_sent += (double)t->count * sizeof(float);
    }
}

static void combine(float *dst, const float *src, long n, bool sum)
{
    if (!sum) {
        memcpy(dst, src, (size_t)n * sizeof *dst);
        return;
    }
    for (long k = 0; k < n; k++)
        dst[k] += src[k];
}

/* After the round's requests completed: sum or copy what arrived into the region. */
static void finish_round(struct dtx_exec *ex, struct comm_state *c)
{
    const struct dt_schedule *s = &c->sched;
    float *base = region_base(ex, c->o);
    long roff = 0;
    for (int i = s->round_start[c->round]; i < s->round_start[c->round + 1]; i++) {
        const struct dt_xfer *t = &s->xfers[i];
        if (t->send)
            continue;
        combine(base + t->offset, c->scratch + roff, t->count, t->sum);
        roff += t->count;
    }
    c->round++;
}

/* ---- library collectives and point-to-point ops: one request ---- */

static void start_library(struct dtx_exec *ex, struct comm_state *c, bool blocking)
{
    const struct dt_op *o = c->o;
    float *base = region_base(ex, o);
    int n = (int)o->region.count;
    bool root = c->me == o->root;
    double bytes = (double)o->region.count * sizeof(float);
    c->n_req = 0;
    MPI_Request *r = &c->req[0];
    switch (o->coll) {
    case DT_COLL_ALLREDUCE:
        if (blocking)
            MPI_Allreduce(MPI_IN_PLACE, base, n, MPI_FLOAT, MPI_SUM, c->gcomm);
        else
            MPI_Iallreduce(MPI_IN_PLACE, base, n, MPI_FLOAT, MPI_SUM, c->gcomm, r);
        c->bytes_sent += bytes;
        c->bytes_recv += bytes;
        break;
    case DT_COLL_REDUCE: {
        const void *sb = root ? MPI_IN_PLACE : base;
        void *rb = root ? base : NULL;
        if (blocking)
            MPI_Reduce(sb, rb, n, MPI_FLOAT, MPI_SUM, o->root, c->gcomm);
        else
            MPI_Ireduce(sb, rb, n, MPI_FLOAT, MPI_SUM, o->root, c->gcomm, r);
        *(root ? &c->bytes_recv : &c->bytes_sent) += bytes;
        break;
    }
    case DT_COLL_BCAST:
        if (blocking)
            MPI_Bcast(base, n, MPI_FLOAT, o->root, c->gcomm);
        else
            MPI_Ibcast(base, n, MPI_FLOAT, o->root, c->gcomm, r);
        *(root ? &c->bytes_sent : &c->bytes_recv) += bytes;
        break;
    case DT_COLL_REDUCE_SCATTER:
        if (blocking)
            MPI_Reduce_scatter(base, c->scratch, c->counts, MPI_FLOAT, MPI_SUM, c->gcomm);
        else
            MPI_Ireduce_scatter(base, c->scratch, c->counts, MPI_FLOAT, MPI_SUM, c->gcomm, r);
        c->bytes_sent += bytes;
        c->bytes_recv += (double)c->my_len * sizeof(float);
        break;
    case DT_COLL_ALLGATHER:
        if (blocking)
            MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, base, c->counts, c->displs,
                           MPI_FLOAT, c->gcomm);
        else
            MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, base, c->counts, c->displs,
                            MPI_FLOAT, c->gcomm, r);
        c->bytes_sent += (double)c->my_len * sizeof(float);
        c->bytes_recv += bytes - (double)c->my_len * sizeof(float);
        break;
    default:
        break;
    }
    if (!blocking)
        c->n_req = 1;
}

static void finish_library(struct dtx_exec *ex, struct comm_state *c)
{
    if (c->o->coll == DT_COLL_REDUCE_SCATTER)
        memcpy(region_base(ex, c->o) + c->my_off, c->scratch, (size_t)c->my_len * sizeof(float));
}

static void start_p2p(struct dtx_exec *ex, struct comm_state *c)
{
    const struct dt_op *o = c->o;
    float *base = region_base(ex, o);
    c->n_req = 0;
    for (long off = 0; off < o->region.count; off += PIECE_FLOATS) {
        long len = o->region.count - off < PIECE_FLOATS ? o->region.count - off : PIECE_FLOATS;
        if (o->kind == DT_OP_SEND)
            MPI_Isend(base + off, (int)len, MPI_FLOAT, o->peer, c->tag, ex->comm,
                      &c->req[c->n_req++]);
        else
            MPI_Irecv(c->scratch + off, (int)len, MPI_FLOAT, o->peer, c->tag, ex->comm,
                      &c->req[c->n_req++]);
    }
    *(o->kind == DT_OP_SEND ? &c->bytes_sent : &c->bytes_recv) +=
        (double)o->region.count * sizeof(float);
}

static void finish_p2p(struct dtx_exec *ex, struct comm_state *c)
{
    if (c->o->kind == DT_OP_RECV)
        combine(region_base(ex, c->o), c->scratch, c->o->region.count, c->o->sum);
}

/* ---- progress ---- */

static bool is_round_based(const struct comm_state *c)
{
    return c->o->kind == DT_OP_COLL && !c->library;
}

/* Advances c as far as it goes without blocking: when the posted round (or library/p2p
 * request) is complete, combines what arrived and posts the next round. */
static void advance(struct dtx_exec *ex, struct comm_state *c)
{
    while (c->active) {
        if (c->n_req > 0) {
            int done = 0;
            MPI_Testall(c->n_req, c->req, &done, c->status);
            if (!done)
                return;
        }
        c->n_req = 0;
        if (is_round_based(c))
            finish_round(ex, c);
        else if (c->library)
            finish_library(ex, c);
        else
            finish_p2p(ex, c);
        if (!is_round_based(c) || c->round >= c->sched.n_rounds) {
            c->active = false;
            c->end_s = MPI_Wtime() - ex->t0;
            return;
        }
        post_round(ex, c);
    }
}

/* Polls every non-blocking op in flight (but `self`). */
static void progress_all(struct dtx_exec *ex, const struct comm_state *self)
{
    for (int h = 0; h < ex->n_handles; h++) {
        struct comm_state *c = ex->handle[h];
        if (c && c->active && c != self)
            advance(ex, c);
    }
}

/* Waits for c's posted requests while polling the others. */
static void wait_polling(struct dtx_exec *ex, struct comm_state *c)
{
    for (;;) {
        int done = 0;
        MPI_Testall(c->n_req, c->req, &done, c->status);
        if (done)
            return;
        progress_all(ex, c);
    }
}

static void start_comm(struct dtx_exec *ex, struct comm_state *c)
{
    c->bytes_sent = c->bytes_recv = 0;
    c->round = 0;
    c->n_req = 0;
    c->active = true;
    if (c->library && !c->o->nonblocking) {
        start_library(ex, c, true);
        finish_library(ex, c);
        c->active = false;
        return;
    }
    if (c->library)
        start_library(ex, c, false);
    else if (!is_round_based(c))
        start_p2p(ex, c);
    else if (c->sched.n_rounds == 0)
        c->active = false;
    else
        post_round(ex, c);
    if (c->o->nonblocking)
        return;
    /* blocking: complete every round here */
    while (c->active) {
        wait_polling(ex, c);
        advance(ex, c);
    }
}

static void complete(struct dtx_exec *ex, struct comm_state *c)
{
    while (c->active) {
        wait_polling(ex, c);
        advance(ex, c);
    }
}

/* ---- the iteration ---- */

static void optimizer_step(struct dtx_exec *ex, const struct dt_region *r)
{
    float *p = dtk_net_params(ex->net) + r->offset, *g = dtk_net_grads(ex->net) + r->offset;
    float *m = dtk_net_opt_m(ex->net) + r->offset, *v = dtk_net_opt_v(ex->net) + r->offset;
    switch (ex->opt.kind) {
    case DTX_OPT_ADAM:
    case DTX_OPT_ADAM_TORCH:
        dtk_adam_step(p, g, m, v, r->count, ex->steps, &ex->opt.adam);
        break;
    case DTX_OPT_SGD:
        dtk_sgd_step(p, g, ex->opt.sgd.momentum != 0 ? m : NULL, r->count, ex->steps,
                     &ex->opt.sgd);
        break;
    }
}

int dtx_exec_iteration(struct dtx_exec *ex, dtx_load_fn load, void *load_ctx, double *loss,
                       long *correct, struct dtx_op_time *times, double t0,
                       struct dt_error *err)
{
    const struct dt_rank_plan *rp = ex->rp;
    const struct dt_model *m = dtk_net_model(ex->net);
    const int last = m->n_layers - 1;
    /* local gradients are summed across ranks: seed them with 1/global batch per sample */
    const double denom = rp->grad_scale > 0 ? rp->batch / rp->grad_scale : rp->batch;
    bool forward_started = false;
    ex->t0 = t0;
    ex->steps++;
    *loss = 0;
    *correct = 0;
    for (int i = 0; i < rp->n_ops; i++) {
        const struct dt_op *o = &rp->ops[i];
        double start = MPI_Wtime();
        struct comm_state *c = ex->state[i];
        int rc = DT_OK;
        switch (o->kind) {
        case DT_OP_LOAD:
            load(load_ctx, ex->x, ex->y);
            break;
        case DT_OP_COMPUTE:
            if (o->phase == DT_PH_FORWARD) {
                if (!forward_started) {
                    rc = dtk_net_begin_forward(ex->net, ex->x, 0, o->samples, true, err);
                    forward_started = true;
                }
                if (rc)
                    return rc;
                dtk_net_forward_layer(ex->net, o->layer, 0, o->samples);
                if (o->layer == last) {
                    dtk_net_zero_grads(ex->net);
                    rc = dtk_net_begin_backward(ex->net, ex->y, 0, o->samples,
                                                denom * o->samples / rp->batch, loss, err);
                    if (rc)
                        return rc;
                    *correct = dtk_net_correct(ex->net, ex->y, o->samples);
                }
            } else if (o->phase == DT_PH_BACKWARD) {
                dtk_net_backward_layer(ex->net, o->layer, 0, o->samples);
            } else {
                optimizer_step(ex, &o->region);
            }
            progress_all(ex, NULL);
            break;
        case DT_OP_COLL:
        case DT_OP_SEND:
        case DT_OP_RECV:
            start_comm(ex, c);
            break;
        case DT_OP_WAIT: {
            struct comm_state *h = ex->handle[o->handle];
            if (!h)
                return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "wait for handle %d never started",
                               o->handle);
            complete(ex, h);
            break;
        }
        }
        if (times) {
            double end = MPI_Wtime();
            struct dtx_op_time *t = &times[i];
            t->start_s = start - t0;
            t->dur_s = end - start;
            t->end_s = end - t0;
            t->bytes_sent = c ? c->bytes_sent : 0;
            t->bytes_recv = c ? c->bytes_recv : 0;
        }
    }
    /* Anything still in flight (a plan without its WAIT) completes before the next step. */
    for (int h = 0; h < ex->n_handles; h++)
        if (ex->handle[h] && ex->handle[h]->active)
            complete(ex, ex->handle[h]);
    if (times)
        for (int i = 0; i < rp->n_ops; i++) {
            struct comm_state *c = ex->state[i];
            if (c && c->o->nonblocking) {
                times[i].end_s = c->end_s;
                times[i].bytes_sent = c->bytes_sent;
                times[i].bytes_recv = c->bytes_recv;
            }
        }
    return DT_OK;
}

uint64_t dtx_params_hash(const float *p, long n)
{
    /* FNV-1a's step on 32-bit words, then a final avalanche: any differing bit changes the
     * hash, and it runs at memory speed (the check runs after every epoch) */
    uint64_t h = 1469598103934665603ull;
    for (long i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, p + i, sizeof w);
        h ^= w;
        h *= 1099511628211ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

bool dtx_exec_params_agree(struct dtx_exec *ex)
{
    uint64_t h = dtx_params_hash(dtk_net_params(ex->net), dtk_net_n_params(ex->net)), lo, hi;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, ex->comm);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, ex->comm);
    return lo == hi;
}
