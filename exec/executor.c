/* The plan walker: see executor.h. */
#include "executor.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_net.h"
#include "dt/collective.h"
#include "dt/commpool.h"
#include "cpu/half.h"
#include "dt/tensor.h"
#include "idle.h"
#include "watchdog.h"

/* MPI counts are ints: longer transfers go in pieces of this many floats. */
#define PIECE_FLOATS (1L << 28)

/* One communication op of this rank (COLL, SEND or RECV) and its progress. */
struct comm_state {
    const struct dt_op *o;
    struct dt_region where;  /* the region it works on: dst when out of place, else region */
    struct dt_schedule sched;
    bool library;
    MPI_Comm comm;          /* the group's communicator (COLL), the world's (SEND/RECV) */
    int gsize, me;
    int tag;
    char *scratch;          /* its place in the receive pool of its dtype (dt/commpool.h) */
    long scratch_floats;    /* elements of the region's dtype */
    enum dt_dtype dtype;    /* of the region: f32, or 2-byte under mixed precision */
    size_t esz;             /* its bytes */
    MPI_Datatype type;      /* MPI_FLOAT, or MPI_UINT16_T for 2-byte floats */
    MPI_Op op;              /* the library's reduction: MPI_SUM / MPI_MAX on floats; on 2-byte
                               floats the executor's own sum (half_sum) */
    MPI_Request *req;
    MPI_Status *status;     /* a real array: GCC rejects MPI_STATUSES_IGNORE's fake pointer */
    int max_req, n_req;
    int round;
    bool active;
    int *counts, *displs;   /* library reduce-scatter / allgather */
    long my_off, my_len;    /* library reduce-scatter: this member's chunk */
    double bytes_sent, bytes_recv;
    double end_s;
    bool landed;            /* a summing receive's data has been added */
};

/* A program (step or eval) and the state of its communication ops. */
struct program {
    const struct dt_op *ops;
    int n_ops;
    struct comm_state **state;    /* per op, NULL for local ops */
};

struct dtx_exec {
    const struct dt_plan *plan;
    const struct dt_rank_plan *rp;
    struct dtk_net *net;
    MPI_Comm comm;
    int rank, size;
    struct dtx_optimizer opt;
    float *x, *opt_state;
    int *y;
    long in_floats, opt_block;   /* opt_block: floats of one optimizer moment */
    int label_rows;
    struct program step, eval;
    struct comm_state **handle;   /* per handle */
    int n_handles;
    MPI_Comm *gcomm;              /* per plan group: MPI_COMM_NULL when not a member */
    bool *gcomm_owned;
    long steps;
    double t0;
    struct dtx_watchdog *wd;      /* NULL: waits are not watched */
    const struct program *running; /* the program being walked (for the watchdog's message) */
    char *pool[2];                /* receive pools (DT_BUF_COMM): [0] the parameters' dtype,
                                     [1] float32 under mixed precision (the scaler's flag) */
    double scratch_bytes, alloc_bytes;
    /* mixed precision (executor.h) */
    enum dt_dtype dtype;          /* of parameters, gradients, activations: F32 or 2-byte */
    float *master, *scaler;       /* fp32 master weights (n_updated) and DT_SCALER_* */
    float *wide;                  /* the 2-byte parameters widened (float_params) */
    MPI_Op half_sum, half_max;    /* MPI_OP_NULL without mixed precision */
    long overflow_at, skipped;    /* testing: the step whose gradients overflow; steps skipped */
    struct dtx_cuda_net *gpu;     /* --device cuda: the net's buffers on the GPU (NULL: CPU) */
};

static bool is_mixed(const struct dtx_exec *ex)
{
    return ex->dtype != DT_TYPE_F32;
}

static char *buffer_of(struct dtx_exec *ex, const struct dt_region *g)
{
    bool h = is_mixed(ex);
    switch (g->buf) {
    case DT_BUF_PARAMS:
        return h ? (char *)dtk_net_params16(ex->net) : (char *)dtk_net_params(ex->net);
    case DT_BUF_GRADS: /* float32 but under mixed precision with 2-byte gradients */
        return dtk_net_grads(ex->net) ? (char *)dtk_net_grads(ex->net)
                                      : (char *)dtk_net_grads16(ex->net);
    case DT_BUF_OPT: return (char *)ex->opt_state;
    case DT_BUF_ACT:
        return h ? (char *)dtk_net_act16(ex->net, g->layer) : (char *)dtk_net_act(ex->net, g->layer);
    case DT_BUF_DACT:
        return h ? (char *)dtk_net_dact16(ex->net, g->layer)
                 : (char *)dtk_net_dact(ex->net, g->layer);
    case DT_BUF_KEEP: return (char *)dtk_net_keep(ex->net, g->layer);
    case DT_BUF_MASTER: return (char *)ex->master;
    case DT_BUF_SCALER: return (char *)ex->scaler;
    default: return NULL;
    }
}

static enum dt_dtype dtype_of(const struct dtx_exec *ex, const struct dt_region *g)
{
    return dt_plan_region_dtype(ex->plan, ex->rank, g);
}

/* The region's first element (its buffer's dtype says how wide elements are; a pooled
 * gradient holds one slot's rows). */
static char *at(struct dtx_exec *ex, const struct dt_region *g)
{
    long offset = g->buf == DT_BUF_DACT  ? dtk_net_dact_offset(ex->net, g->layer, g->offset)
                  : g->buf == DT_BUF_ACT ? dtk_net_act_offset(ex->net, g->layer, g->offset)
                                         : g->offset;
    return buffer_of(ex, g) + (size_t)offset * dt_dtype_size(dtype_of(ex, g));
}

/* A sum of 2-byte floats for the MPI library's reductions: each hop adds in float32 and
 * rounds once, as NCCL's bf16 allreduce does; the wire carries 2 bytes per element. */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    dtk_half_add(DT_TYPE_BF16, inout, in, *len);
}

static void f16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    dtk_half_add(DT_TYPE_F16, inout, in, *len);
}

/* The largest of 2-byte floats (MPI_MAX knows no bf16 or fp16). */
static void bf16_max(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    dtk_max_into(DT_TYPE_BF16, inout, in, *len);
}

static void f16_max(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    dtk_max_into(DT_TYPE_F16, inout, in, *len);
}

/* ---- setup ---- */

static int pieces(long count)
{
    return (int)((count + PIECE_FLOATS - 1) / PIECE_FLOATS);
}

/* Requests the widest round of a schedule needs. */
static int schedule_requests(const struct dt_schedule *s)
{
    int reqs = 1;
    for (int r = 0; r < s->n_rounds; r++) {
        int q = 0, lo, hi;
        dt_schedule_round(s, r, &lo, &hi);
        for (int i = lo; i < hi; i++)
            q += pieces(s->xfers[i].count);
        reqs = q > reqs ? q : reqs;
    }
    return reqs;
}

static int setup_coll(struct dtx_exec *ex, struct comm_state *c, int seq, struct dt_error *err)
{
    const struct dt_op *o = c->o;
    const struct dt_group *g = &ex->plan->groups[o->group];
    c->comm = ex->gcomm[o->group];
    c->gsize = g->n;
    MPI_Comm_rank(c->comm, &c->me);
    c->tag = seq; /* its place among the group's collectives: the same on every member */
    c->library = o->alg == DT_ALG_LIBRARY;
    c->scratch_floats = dt_coll_scratch_floats(o, g->n, c->me);
    if (!c->library) {
        int rc = dt_coll_schedule(o->coll, o->alg, g->n, c->me, o->root, c->where.count,
                                  &c->sched, err);
        c->max_req = rc ? 1 : schedule_requests(&c->sched);
        return rc;
    }
    if (c->where.count > INT_MAX)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "a library collective of %ld floats exceeds MPI's int count",
                       c->where.count);
    c->max_req = 1;
    if (o->coll == DT_COLL_REDUCE_SCATTER || o->coll == DT_COLL_ALLGATHER) {
        c->counts = malloc((size_t)g->n * sizeof *c->counts);
        c->displs = malloc((size_t)g->n * sizeof *c->displs);
        if (!c->counts || !c->displs)
            return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        for (int k = 0; k < g->n; k++) {
            long off, len;
            dt_chunk(c->where.count, g->n, k, &off, &len);
            c->counts[k] = (int)len;
            c->displs[k] = (int)off;
        }
        dt_chunk(c->where.count, g->n, c->me, &c->my_off, &c->my_len);
    }
    return DT_OK;
}

static int setup_comm_op(struct dtx_exec *ex, struct program *pg, int i, int *group_seq,
                         struct dt_error *err)
{
    const struct dt_op *o = &pg->ops[i];
    struct comm_state *c = calloc(1, sizeof *c);
    if (!c)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    pg->state[i] = c;
    c->o = o;
    c->where = o->kind == DT_OP_COLL && o->dst.count > 0 ? o->dst : o->region;
    c->dtype = dtype_of(ex, &o->region);
    c->esz = dt_dtype_size(c->dtype);
    c->type = c->dtype == DT_TYPE_F32 ? MPI_FLOAT : MPI_UINT16_T;
    c->op = o->reduction == DT_RED_MAX ? (c->dtype == DT_TYPE_F32 ? MPI_MAX : ex->half_max)
            : c->dtype != DT_TYPE_F32 ? ex->half_sum : MPI_SUM;
    dt_schedule_init(&c->sched);
    if (o->nonblocking)
        ex->handle[o->handle] = c;
    int rc = DT_OK;
    if (o->kind == DT_OP_COLL) {
        rc = setup_coll(ex, c, group_seq[o->group]++, err);
    } else {
        int *ub, flag = 0;
        MPI_Comm_get_attr(ex->comm, MPI_TAG_UB, &ub, &flag);
        if (flag && o->tag > *ub)
            return dt_fail(err, DT_EINPUT, NULL, 0, 0, "rank %d op %d: tag %d above the MPI "
                           "library's largest, %d", ex->rank, i, o->tag, *ub);
        c->comm = ex->comm;
        c->tag = o->tag;
        c->max_req = pieces(o->region.count) + 1;
        c->scratch_floats = dt_coll_scratch_floats(o, 1, 0);
    }
    if (rc)
        return rc;
    c->req = malloc((size_t)c->max_req * sizeof *c->req);
    c->status = malloc((size_t)c->max_req * sizeof *c->status);
    if (!c->req || !c->status)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    return DT_OK;
}

/* Points each op of pg whose regions have dtype at its offset in pool (dt_comm_pool's
 * layout: the one dtsim sizes DT_BUF_COMM by). */
static int place_in_pool(struct dtx_exec *ex, struct program *pg, enum dt_dtype dtype,
                         char *pool, struct dt_error *err)
{
    long *at = malloc((size_t)(pg->n_ops ? pg->n_ops : 1) * sizeof *at);
    if (!at || dt_comm_pool(ex->plan, ex->rank, pg->ops, pg->n_ops, dtype, at, NULL) < 0) {
        free(at);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    for (int i = 0; i < pg->n_ops; i++) {
        struct comm_state *c = pg->state[i];
        if (c && c->dtype == dtype)
            c->scratch = pool + (size_t)(at[i] > 0 ? at[i] : 0) * c->esz; /* -1: none used */
    }
    free(at);
    return DT_OK;
}

/* The receive pools, one per dtype received, each the larger of the step's and the eval's. */
static int allocate_pools(struct dtx_exec *ex, struct dt_error *err)
{
    enum dt_dtype t[2] = {ex->dtype, DT_TYPE_F32};
    int rc = DT_OK;
    for (int k = 0; k < (is_mixed(ex) ? 2 : 1) && !rc; k++) {
        long n = dt_comm_pool_rank(ex->plan, ex->rank, t[k]);
        size_t esz = dt_dtype_size(t[k]);
        ex->pool[k] = n < 0 ? NULL : malloc((size_t)(n > 0 ? n : 1) * esz);
        if (!ex->pool[k])
            return dt_fail(err, DT_ENOMEM, NULL, 0, 0,
                           "out of memory for %ld elements of receive buffer", n);
        ex->scratch_bytes += (double)n * (double)esz;
        rc = place_in_pool(ex, &ex->step, t[k], ex->pool[k], err);
        if (!rc)
            rc = place_in_pool(ex, &ex->eval, t[k], ex->pool[k], err);
    }
    return rc;
}

/* One communicator per plan group (collective over comm: the plan is the same on every rank,
 * so every rank makes the same calls in the same order). */
static int make_group_comms(struct dtx_exec *ex, struct dt_error *err)
{
    const struct dt_plan *p = ex->plan;
    ex->gcomm = malloc((size_t)(p->n_groups ? p->n_groups : 1) * sizeof *ex->gcomm);
    ex->gcomm_owned = calloc((size_t)(p->n_groups ? p->n_groups : 1), sizeof *ex->gcomm_owned);
    if (!ex->gcomm || !ex->gcomm_owned)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int g = 0; g < p->n_groups; g++) {
        const struct dt_group *G = &p->groups[g];
        int idx = -1;
        for (int i = 0; i < G->n; i++)
            idx = G->ranks[i] == ex->rank ? i : idx;
        MPI_Comm_split(ex->comm, idx >= 0 ? 0 : MPI_UNDEFINED, idx, &ex->gcomm[g]);
        ex->gcomm_owned[g] = ex->gcomm[g] != MPI_COMM_NULL;
    }
    return DT_OK;
}

static int setup_program(struct dtx_exec *ex, struct program *pg, const struct dt_op *ops,
                         int n, struct dt_error *err)
{
    pg->ops = ops;
    pg->n_ops = n;
    pg->state = calloc((size_t)(n ? n : 1), sizeof *pg->state);
    int *seq = calloc((size_t)(ex->plan->n_groups + 1), sizeof *seq);
    int rc = pg->state && seq ? DT_OK : dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int i = 0; i < n && !rc; i++)
        if (ops[i].kind == DT_OP_COLL || ops[i].kind == DT_OP_SEND || ops[i].kind == DT_OP_RECV)
            rc = setup_comm_op(ex, pg, i, seq, err);
    free(seq);
    return rc;
}

/* The master weights start as the 2-byte parameters they are cast into: each cast of the
 * step program (COPY from MASTER to PARAMS, written after every UPDATE) read backwards. Whole
 * replicas own every parameter; a ZeRO shard, a tensor-parallel shard or a stage only theirs. */
static void init_master(struct dtx_exec *ex)
{
    const uint16_t *p = dtk_net_params16(ex->net);
    for (int i = 0; i < ex->rp->n_ops; i++) {
        const struct dt_op *o = &ex->rp->ops[i];
        if (o->kind == DT_OP_COPY && o->region.buf == DT_BUF_MASTER)
            dtk_half_to_f32(ex->dtype, p + o->dst.offset, ex->master + o->region.offset,
                            o->region.count);
    }
}

/* Mixed precision: the master weights, the loss scaler, the MPI sum of 2-byte floats, and
 * the float32 image of the parameters the checks and the gather read (not a training buffer:
 * outside the plan's table, like the gather's receive buffer). */
static int allocate_mixed(struct dtx_exec *ex, struct dt_error *err)
{
    ex->master = calloc((size_t)(ex->opt_block + 1), sizeof *ex->master);
    ex->scaler = calloc(DT_SCALER_ELEMS, sizeof *ex->scaler);
    ex->wide = malloc((size_t)(dtk_net_n_params(ex->net) + 1) * sizeof *ex->wide);
    if (!ex->master || !ex->scaler || !ex->wide)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory for the master weights");
    init_master(ex);
    ex->scaler[DT_SCALER_SCALE] = (float)DT_SCALER_INIT;
    MPI_Op_create(ex->dtype == DT_TYPE_BF16 ? bf16_sum : f16_sum, 1, &ex->half_sum);
    MPI_Op_create(ex->dtype == DT_TYPE_BF16 ? bf16_max : f16_max, 1, &ex->half_max);
    return DT_OK;
}

/* --device cuda: the GPU mirrors the net and the rest of the buffer table (cuda_net.h). */
static int allocate_gpu(struct dtx_exec *ex, int device, int rows, long moments,
                        struct dt_error *err)
{
    int rc = dtx_cuda_create(ex->net, device, &ex->gpu, err);
    size_t x = ex->x ? (size_t)rows * (size_t)ex->in_floats * sizeof *ex->x : 0;
    size_t y = ex->y ? (size_t)rows * (size_t)ex->label_rows * sizeof *ex->y : 0;
    if (!rc)
        rc = dtx_cuda_mirror(ex->gpu, ex->x, x, err);
    if (!rc)
        rc = dtx_cuda_mirror(ex->gpu, ex->y, y, err);
    if (!rc)
        rc = dtx_cuda_mirror(ex->gpu, ex->opt_state,
                             (size_t)(moments * ex->opt_block) * sizeof *ex->opt_state, err);
    if (!rc)
        dtx_cuda_set_input(ex->gpu, ex->x);
    return rc;
}

/* The network and the rest of the buffer table. */
static int allocate(struct dtx_exec *ex, enum dtk_init init, uint64_t seed, int gpu,
                    struct dt_error *err)
{
    const struct dt_plan *plan = ex->plan;
    const struct dt_rank_plan *rp = ex->rp;
    const struct dt_model *m = plan->model;
    int rows = rp->slots * rp->slot_rows;
    struct dtk_net_view v = {.rows = rows, .layers = plan->views[rp->view],
                             .n_params = rp->n_params, .n_grads = rp->n_grads,
                             .owned = rp->owned, .n_owned = rp->n_owned, .opt_moments = 0,
                             .dtype = ex->dtype,
                             .grads_f32 = dt_plan_grad_dtype(&plan->opt) == DT_TYPE_F32,
                             .recompute = dt_plan_rank_recompute(plan, (int)(rp - plan->ranks)),
                             .dact = dt_plan_rank_dact(plan, (int)(rp - plan->ranks)),
                             .slot_rows = rp->slot_rows, .ws_rows = rp->ws_rows};
    int rc = dtk_net_create_view(m, &v, init, seed, &ex->net, err);
    if (rc)
        return rc;
    ex->in_floats = dt_shape_size(&m->input);
    ex->label_rows = (int)dtk_net_labels_per_sample(ex->net);
    ex->opt_block = rp->n_updated;
    long moments = dt_optimizer_moments(plan->opt.optimizer);
    ex->x = rp->first ? malloc((size_t)rows * (size_t)ex->in_floats * sizeof *ex->x) : NULL;
    ex->y = rp->last ? calloc((size_t)rows * (size_t)ex->label_rows, sizeof *ex->y) : NULL;
    ex->opt_state = calloc((size_t)(moments * ex->opt_block + 1), sizeof *ex->opt_state);
    if ((rp->first && !ex->x) || (rp->last && !ex->y) || !ex->opt_state)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory for the input rows");
    if (is_mixed(ex) && (rc = allocate_mixed(ex, err)))
        return rc;
    if (gpu >= 0 && (rc = allocate_gpu(ex, gpu, rows, moments, err)))
        return rc;
    ex->alloc_bytes = dtk_net_bytes(ex->net) + (double)moments * ex->opt_block * sizeof(float) +
                      (is_mixed(ex) ? (double)(ex->opt_block + DT_SCALER_ELEMS) * sizeof(float)
                                    : 0) +
                      (rp->first ? (double)rows * ex->in_floats * sizeof(float) : 0) +
                      (rp->last ? (double)rows * ex->label_rows * sizeof(int) : 0);
    return DT_OK;
}

int dtx_exec_create(const struct dt_plan *plan, MPI_Comm comm, const struct dtx_optimizer *opt,
                    enum dtk_init init, uint64_t seed, struct dtx_exec **out,
                    struct dt_error *err)
{
    return dtx_exec_create_on(plan, comm, opt, init, seed, -1, out, err);
}

int dtx_exec_create_on(const struct dt_plan *plan, MPI_Comm comm,
                       const struct dtx_optimizer *opt, enum dtk_init init, uint64_t seed,
                       int gpu, struct dtx_exec **out, struct dt_error *err)
{
    *out = NULL;
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (plan->n_ranks != size)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "the %s plan has %d ranks but %d MPI processes run it",
                       dt_strategy_name(plan->strategy), plan->n_ranks, size);
    struct dtx_exec *ex = calloc(1, sizeof *ex);
    if (!ex)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    ex->plan = plan;
    ex->rp = &plan->ranks[rank];
    ex->comm = comm;
    ex->rank = rank;
    ex->size = size;
    ex->opt = *opt;
    ex->dtype = dt_buf_dtype(plan->opt.precision, DT_BUF_PARAMS);
    ex->half_sum = ex->half_max = MPI_OP_NULL;
    ex->n_handles = plan->next_handle;
    ex->handle = calloc((size_t)(ex->n_handles ? ex->n_handles : 1), sizeof *ex->handle);
    int rc = ex->handle ? DT_OK : dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    if (!rc)
        rc = dt_plan_check(plan, err);
    if (!rc)
        rc = make_group_comms(ex, err);
    if (!rc)
        rc = allocate(ex, init, seed, gpu, err);
    if (!rc)
        rc = setup_program(ex, &ex->step, ex->rp->ops, ex->rp->n_ops, err);
    if (!rc)
        rc = setup_program(ex, &ex->eval, ex->rp->eval.ops, ex->rp->eval.n_ops, err);
    if (!rc)
        rc = allocate_pools(ex, err);
    if (!rc && ex->gpu) /* what the GPU really holds, with the host's receive buffers */
        ex->alloc_bytes = dtx_cuda_bytes(ex->gpu);
    ex->alloc_bytes += ex->scratch_bytes;
    if (rc) {
        dtx_exec_destroy(ex);
        return rc;
    }
    *out = ex;
    return DT_OK;
}

static void free_program(struct program *pg)
{
    for (int i = 0; pg->state && i < pg->n_ops; i++) {
        struct comm_state *c = pg->state[i];
        if (!c)
            continue;
        dt_schedule_free(&c->sched);
        free(c->req);
        free(c->status);
        free(c->counts);
        free(c->displs);
        free(c);
    }
    free(pg->state);
}

void dtx_exec_destroy(struct dtx_exec *ex)
{
    if (!ex)
        return;
    free_program(&ex->step);
    free_program(&ex->eval);
    free(ex->pool[0]);
    free(ex->pool[1]);
    for (int g = 0; ex->gcomm && g < ex->plan->n_groups; g++)
        if (ex->gcomm_owned[g])
            MPI_Comm_free(&ex->gcomm[g]);
    free(ex->gcomm);
    free(ex->gcomm_owned);
    free(ex->handle);
    free(ex->x);
    free(ex->y);
    free(ex->opt_state);
    free(ex->master);
    free(ex->scaler);
    free(ex->wide);
    if (ex->half_sum != MPI_OP_NULL)
        MPI_Op_free(&ex->half_sum);
    if (ex->half_max != MPI_OP_NULL)
        MPI_Op_free(&ex->half_max);
    dtx_cuda_destroy(ex->gpu);
    dtk_net_destroy(ex->net);
    free(ex);
}

struct dtk_net *dtx_exec_net(struct dtx_exec *ex) { return ex->net; }
long dtx_exec_steps(const struct dtx_exec *ex) { return ex->steps; }
void dtx_exec_set_steps(struct dtx_exec *ex, long steps) { ex->steps = steps; }
double dtx_exec_scratch_bytes(const struct dtx_exec *ex) { return ex->scratch_bytes; }
double dtx_exec_alloc_bytes(const struct dtx_exec *ex) { return ex->alloc_bytes; }
void dtx_exec_set_watchdog(struct dtx_exec *ex, struct dtx_watchdog *wd) { ex->wd = wd; }

/* ---- rounds of the project's own algorithms ---- */

static void post_round(struct dtx_exec *ex, struct comm_state *c)
{
    const struct dt_schedule *s = &c->sched;
    char *base = at(ex, &c->where);
    int a, b;
    dt_schedule_round(s, c->round, &a, &b);
    long roff = 0;
    c->n_req = 0;
    /* receives first, so that a message finds its buffer posted */
    for (int i = a; i < b; i++) {
        const struct dt_xfer *t = &s->xfers[i];
        if (t->send)
            continue;
        for (long off = 0; off < t->count; off += PIECE_FLOATS) {
            long len = t->count - off < PIECE_FLOATS ? t->count - off : PIECE_FLOATS;
            MPI_Irecv(c->scratch + (size_t)(roff + off) * c->esz, (int)len, c->type, t->peer,
                      c->tag, c->comm, &c->req[c->n_req++]);
        }
        roff += t->count;
        c->bytes_recv += (double)t->count * (double)c->esz;
    }
    for (int i = a; i < b; i++) {
        const struct dt_xfer *t = &s->xfers[i];
        if (!t->send)
            continue;
        for (long off = 0; off < t->count; off += PIECE_FLOATS) {
            long len = t->count - off < PIECE_FLOATS ? t->count - off : PIECE_FLOATS;
            MPI_Isend(base + (size_t)(t->offset + off) * c->esz, (int)len, c->type, t->peer,
                      c->tag, c->comm, &c->req[c->n_req++]);
        }
        c->bytes_sent += (double)t->count * (double)c->esz;
    }
}

/* Copies, adds or (max) keeps the larger of n elements of a dtype (2-byte floats add in
 * float32, rounding once). */
static void combine(enum dt_dtype t, char *dst, const char *src, long n, bool sum, bool max)
{
    if (!sum) {
        memcpy(dst, src, (size_t)n * dt_dtype_size(t));
    } else if (max) {
        dtk_max_into(t, dst, src, n);
    } else if (t != DT_TYPE_F32) {
        dtk_half_add(t, (uint16_t *)(void *)dst, (const uint16_t *)(const void *)src, n);
    } else {
        float *d = (float *)(void *)dst;
        const float *f = (const float *)(const void *)src;
        for (long k = 0; k < n; k++)
            d[k] += f[k];
    }
}

/* After the round's requests completed: sum or copy what arrived into the region. */
static void finish_round(struct dtx_exec *ex, struct comm_state *c)
{
    const struct dt_schedule *s = &c->sched;
    char *base = at(ex, &c->where);
    long roff = 0;
    int lo, hi;
    dt_schedule_round(s, c->round, &lo, &hi);
    for (int i = lo; i < hi; i++) {
        const struct dt_xfer *t = &s->xfers[i];
        if (t->send)
            continue;
        combine(c->dtype, base + (size_t)t->offset * c->esz, c->scratch + (size_t)roff * c->esz,
                t->count, t->sum, c->o->reduction == DT_RED_MAX);
        roff += t->count;
    }
    c->round++;
}

/* ---- library collectives and point-to-point ops: one request ---- */

static void start_library(struct dtx_exec *ex, struct comm_state *c, bool blocking)
{
    const struct dt_op *o = c->o;
    char *base = at(ex, &c->where);
    int n = (int)o->region.count;
    bool root = c->me == o->root;
    double bytes = (double)o->region.count * (double)c->esz;
    c->n_req = 0;
    MPI_Request *r = &c->req[0];
    switch (o->coll) {
    case DT_COLL_ALLREDUCE:
        if (blocking)
            MPI_Allreduce(MPI_IN_PLACE, base, n, c->type, c->op, c->comm);
        else
            MPI_Iallreduce(MPI_IN_PLACE, base, n, c->type, c->op, c->comm, r);
        c->bytes_sent += bytes;
        c->bytes_recv += bytes;
        break;
    case DT_COLL_REDUCE: {
        const void *sb = root ? MPI_IN_PLACE : base;
        void *rb = root ? base : NULL;
        if (blocking)
            MPI_Reduce(sb, rb, n, c->type, c->op, o->root, c->comm);
        else
            MPI_Ireduce(sb, rb, n, c->type, c->op, o->root, c->comm, r);
        *(root ? &c->bytes_recv : &c->bytes_sent) += bytes;
        break;
    }
    case DT_COLL_BCAST:
        if (blocking)
            MPI_Bcast(base, n, c->type, o->root, c->comm);
        else
            MPI_Ibcast(base, n, c->type, o->root, c->comm, r);
        *(root ? &c->bytes_sent : &c->bytes_recv) += bytes;
        break;
    case DT_COLL_REDUCE_SCATTER:
        if (blocking)
            MPI_Reduce_scatter(base, c->scratch, c->counts, c->type, c->op, c->comm);
        else
            MPI_Ireduce_scatter(base, c->scratch, c->counts, c->type, c->op, c->comm, r);
        c->bytes_sent += bytes;
        c->bytes_recv += (double)c->my_len * (double)c->esz;
        break;
    case DT_COLL_ALLGATHER:
        if (blocking)
            MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, base, c->counts, c->displs,
                           c->type, c->comm);
        else
            MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, base, c->counts, c->displs,
                            c->type, c->comm, r);
        c->bytes_sent += (double)c->my_len * (double)c->esz;
        c->bytes_recv += bytes - (double)c->my_len * (double)c->esz;
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
        memcpy(at(ex, &c->where) + (size_t)c->my_off * c->esz, c->scratch,
               (size_t)c->my_len * c->esz);
}

static void start_p2p(struct dtx_exec *ex, struct comm_state *c)
{
    const struct dt_op *o = c->o;
    char *base = at(ex, &c->where);
    c->n_req = 0;
    for (long off = 0; off < o->region.count; off += PIECE_FLOATS) {
        long len = o->region.count - off < PIECE_FLOATS ? o->region.count - off : PIECE_FLOATS;
        if (o->kind == DT_OP_SEND)
            MPI_Isend(base + (size_t)off * c->esz, (int)len, c->type, o->peer, c->tag, c->comm,
                      &c->req[c->n_req++]);
        else
            MPI_Irecv((o->sum ? c->scratch : base) + (size_t)off * c->esz, (int)len, c->type, o->peer, c->tag,
                      c->comm,
                      &c->req[c->n_req++]);
    }
    *(o->kind == DT_OP_SEND ? &c->bytes_sent : &c->bytes_recv) +=
        (double)o->region.count * (double)c->esz;
}

/* A summing receive adds what arrived at its WAIT (or at its place when blocking), never
 * while polling: its sum then lands in program order among the other additions into those
 * rows, whatever the messages' timing, and runs are repeatable bit for bit. */
static void land(struct dtx_exec *ex, struct comm_state *c)
{
    bool sums = c->o->kind == DT_OP_RECV && c->o->sum && !c->landed;
    size_t bytes = (size_t)c->where.count * c->esz;
    if (ex->gpu && sums) /* what the GPU added into those rows meanwhile */
        dtx_cuda_download(ex->gpu, at(ex, &c->where), bytes);
    if (sums)
        combine(c->dtype, at(ex, &c->where), c->scratch, c->o->region.count, true, false);
    if (ex->gpu && c->o->kind != DT_OP_SEND && !c->landed) /* the host staged the result */
        dtx_cuda_upload(ex->gpu, at(ex, &c->where), bytes);
    c->landed = true;
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

/* Where the program is, for the watchdog: "op 37 of step 14". */
static void describe_place(const struct dtx_exec *ex, int op, char *buf, size_t len)
{
    snprintf(buf, len, "op %d of %s %ld", op, ex->running == &ex->eval ? "the eval after step"
                                                                     : "step", ex->steps);
}

/* What c waits for: "allreduce/ring, collective 2 of group 0 (op 37 of step 14)". */
static void describe_wait(const struct dtx_exec *ex, const struct comm_state *c, char *buf,
                          size_t len)
{
    const struct dt_op *o = c->o;
    char name[128], place[96];
    const struct program *pg = ex->running;
    describe_place(ex, pg && o >= pg->ops && o < pg->ops + pg->n_ops ? (int)(o - pg->ops) : -1,
                   place, sizeof place);
    const char *op_name = dt_op_name(ex->plan, o, name, sizeof name);
    if (o->kind == DT_OP_COLL)
        snprintf(buf, len, "%s, collective %d of group %d (%s)", op_name, c->tag, o->group,
                 place);
    else
        snprintf(buf, len, "%s %s rank %d tag %d (%s)", op_name,
                 o->kind == DT_OP_SEND ? "to" : "from", o->peer, o->tag, place);
}

/* Waits for c's posted requests while polling the others; the watchdog ends the job when
 * they make no progress for its limit. */
static void wait_polling(struct dtx_exec *ex, struct comm_state *c)
{
    struct dtx_wait w;
    unsigned polls = 0;
    dtx_watchdog_begin(ex->wd, &w);
    for (;;) {
        int done = 0;
        MPI_Testall(c->n_req, c->req, &done, c->status);
        if (done)
            return;
        progress_all(ex, c);
        dtx_idle_poll(&polls);
        if (dtx_watchdog_expired(ex->wd, &w)) {
            char what[256];
            describe_wait(ex, c, what, sizeof what);
            dtx_watchdog_fire(ex->wd, &w, what);
        }
    }
}

static void start_comm(struct dtx_exec *ex, struct comm_state *c)
{
    /* --device cuda: communication works on the host copy of the region (land uploads) */
    if (ex->gpu && c->o->kind != DT_OP_RECV)
        dtx_cuda_download(ex->gpu, at(ex, &c->o->region), (size_t)c->o->region.count * c->esz);
    if (c->o->kind == DT_OP_COLL && c->o->dst.count > 0) /* out of place: work on a copy */
        memcpy(at(ex, &c->o->dst), at(ex, &c->o->region),
               (size_t)c->o->region.count * c->esz);
    c->bytes_sent = c->bytes_recv = 0;
    c->landed = false;
    c->round = 0;
    c->n_req = 0;
    c->active = true;
    if (c->library && !c->o->nonblocking && !ex->wd) { /* the watchdog needs a request */
        start_library(ex, c, true);
        finish_library(ex, c);
        c->active = false;
        land(ex, c);
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
    land(ex, c);
}

static void complete(struct dtx_exec *ex, struct comm_state *c)
{
    while (c->active) {
        wait_polling(ex, c);
        advance(ex, c);
    }
    land(ex, c);
}

/* ---- the programs ---- */

static void step_floats(struct dtx_exec *ex, float *p, const float *g, float *m, float *v,
                        long n)
{
    long t = ex->steps - ex->skipped; /* a skipped step is no optimizer step (GradScaler) */
    switch (ex->opt.kind) {
    case DTX_OPT_ADAM:
    case DTX_OPT_ADAM_TORCH:
        if (ex->gpu)
            dtx_cuda_adam(ex->gpu, p, g, m, v, n, t, &ex->opt.adam);
        else
            dtk_adam_step(p, g, m, v, n, t, &ex->opt.adam);
        break;
    case DTX_OPT_SGD:
        if (ex->gpu)
            dtx_cuda_sgd(ex->gpu, p, g, ex->opt.sgd.momentum != 0 ? m : NULL, n, t,
                         &ex->opt.sgd);
        else
            dtk_sgd_step(p, g, ex->opt.sgd.momentum != 0 ? m : NULL, n, t, &ex->opt.sgd);
        break;
    }
}

/* Mixed precision: the fp32 master weights step from the gradients (2-byte, or float32 under
 * --grad-precision fp32), unscaled in float32 a block at a time (no float32 copy of all
 * gradients); skipped on overflow. */
static void mixed_step(struct dtx_exec *ex, const struct dt_op *o)
{
    if (ex->scaler[DT_SCALER_FLAG] != 0)
        return;
    enum { BLOCK = 1024 };
    float g[BLOCK];
    struct dt_region gr = o->region;
    gr.buf = DT_BUF_GRADS; /* at the parameters' offsets */
    const struct dt_region *at_grads = o->grads.count ? &o->grads : &gr;
    const char *h = at(ex, at_grads);
    enum dt_dtype t = dtype_of(ex, at_grads);
    float *p = ex->master + o->dst.offset, *m = ex->opt_state + o->dst.offset;
    float inv = 1.0f / ex->scaler[DT_SCALER_SCALE];
    for (long k = 0; k < o->region.count; k += BLOCK) {
        long n = o->region.count - k < BLOCK ? o->region.count - k : BLOCK;
        if (t == DT_TYPE_F32)
            memcpy(g, (const float *)(const void *)h + k, (size_t)n * sizeof *g);
        else
            dtk_half_to_f32(t, (const uint16_t *)(const void *)h + k, g, n);
        for (long j = 0; j < n; j++)
            g[j] *= inv;
        step_floats(ex, p + k, g, m + k, m + ex->opt_block + k, n);
    }
}

static void optimizer_step(struct dtx_exec *ex, const struct dt_op *o)
{
    if (is_mixed(ex)) {
        mixed_step(ex, o);
        return;
    }
    const struct dt_region *r = &o->region;
    float *p = dtk_net_params(ex->net) + r->offset;
    float *g = o->grads.count ? (float *)(void *)at(ex, &o->grads)
                              : dtk_net_grads(ex->net) + r->offset;
    float *m = ex->opt_state + o->dst.offset, *v = m + ex->opt_block;
    step_floats(ex, p, g, m, v, r->count);
}

/* UNSCALE: the overflow check of the gradients the rank updates. The division by the scale
 * happens in float32 where the update reads them (mixed_step): dividing the 2-byte values in
 * place would flush fp16's small gradients to zero, which loss scaling exists to prevent.
 * --overflow-at K (testing) writes inf into rank 0's first gradient at step K. */
static void unscale(struct dtx_exec *ex, const struct dt_op *o)
{
    char *g = at(ex, &o->region);
    enum dt_dtype t = dtype_of(ex, &o->region);
    if (ex->overflow_at == ex->steps && ex->rank == 0 && o->region.count > 0)
        dtk_store_inf(t, g);
    ex->scaler[DT_SCALER_FLAG] = dtk_nonfinite(t, g, o->region.count) ? 1.0f : 0.0f;
}

/* RESCALE: PyTorch's GradScaler: halve on overflow (the step was skipped), double after
 * DT_SCALER_GROWTH_INTERVAL clean steps. */
static void rescale(struct dtx_exec *ex)
{
    float *s = ex->scaler;
    if (s[DT_SCALER_FLAG] != 0) {
        s[DT_SCALER_SCALE] *= 0.5f;
        s[DT_SCALER_CLEAN] = 0;
        ex->skipped++;
    } else if (++s[DT_SCALER_CLEAN] >= DT_SCALER_GROWTH_INTERVAL) {
        s[DT_SCALER_SCALE] *= 2.0f;
        s[DT_SCALER_CLEAN] = 0;
    }
}

/* COPY: a region into another of the same dtype (or added), or the master weights cast to
 * the 2-byte parameters. */
static void copy_region(struct dtx_exec *ex, const struct dt_op *o)
{
    enum dt_dtype from = dtype_of(ex, &o->region), to = dtype_of(ex, &o->dst);
    if (ex->gpu) /* fp32 only there */
        dtx_cuda_copy(ex->gpu, at(ex, &o->dst), at(ex, &o->region), o->region.count, o->sum);
    else if (from == to)
        combine(from, at(ex, &o->dst), at(ex, &o->region), o->region.count, o->sum, false);
    else if (from == DT_TYPE_F32 && !o->sum)
        dtk_f32_to_half(to, (const float *)(void *)at(ex, &o->region),
                        (uint16_t *)(void *)at(ex, &o->dst), o->region.count);
}

/* Rows of a slot in the net's buffers. */
static int row_of(const struct dtx_exec *ex, const struct dt_op *o)
{
    return o->slot * ex->rp->slot_rows;
}

static bool reads_input(const struct dt_model *m, int l)
{
    for (int k = 0; k < m->layers[l].n_in; k++)
        if (m->layers[l].in[k] < 0)
            return true;
    return false;
}

/* LOAD: the loader fills the slot's rows; eval chunks shorter than the slot are zero-padded. */
static void load_rows(struct dtx_exec *ex, const struct dt_op *o, dtx_load_fn load, void *ctx,
                      int real)
{
    long b0 = row_of(ex, o);
    float *x = ex->x ? ex->x + b0 * ex->in_floats : NULL;
    int *y = ex->y ? ex->y + b0 * ex->label_rows : NULL;
    load(ctx, o->row0, real, x, y);
    if (real < o->samples && x)
        memset(x + (long)real * ex->in_floats, 0,
               (size_t)(o->samples - real) * (size_t)ex->in_floats * sizeof *x);
    if (real < o->samples && y)
        memset(y + (long)real * ex->label_rows, 0,
               (size_t)(o->samples - real) * (size_t)ex->label_rows * sizeof *y);
    if (ex->gpu && x)
        dtx_cuda_upload(ex->gpu, x, (size_t)o->samples * (size_t)ex->in_floats * sizeof *x);
    if (ex->gpu && y)
        dtx_cuda_upload(ex->gpu, y, (size_t)o->samples * (size_t)ex->label_rows * sizeof *y);
}

/* --device cuda: a COMPUTE op on the GPU (recomputation is refused: dtx_cuda_supports). */
static void compute_gpu(struct dtx_exec *ex, const struct dt_op *o, int b0)
{
    if (o->phase == DT_PH_BACKWARD)
        dtx_cuda_backward_layer(ex->gpu, o->layer, b0, o->samples);
    else
        dtx_cuda_forward_layer(ex->gpu, o->layer, b0, o->samples);
}

static int run_local(struct dtx_exec *ex, const struct dt_op *o, dtx_load_fn load, void *ctx,
                     int real, struct dtx_loss *out, struct dt_error *err)
{
    const struct dt_model *m = ex->plan->model;
    int b0 = row_of(ex, o), rc = DT_OK;
    switch (o->kind) {
    case DT_OP_LOAD:
        load_rows(ex, o, load, ctx, real > 0 && real < o->samples ? real : o->samples);
        break;
    case DT_OP_COMPUTE:
        if (ex->gpu) {
            compute_gpu(ex, o, b0);
            break;
        }
        if (o->phase == DT_PH_BACKWARD) {
            dtk_net_backward_layer(ex->net, o->layer, b0, o->samples);
            break;
        }
        if (reads_input(m, o->layer))
            rc = dtk_net_begin_forward(ex->net, ex->x, b0, o->samples, real == 0, err);
        if (rc)
            break;
        dtk_net_set_batch_rows(ex->net, b0, o->row0);
        if (o->recompute)
            dtk_net_recompute_layer(ex->net, o->layer, b0, o->samples);
        else
            dtk_net_forward_layer(ex->net, o->layer, b0, o->samples);
        break;
    case DT_OP_LOSS: {
        if (o->loss_part == DT_LOSS_MAX || o->loss_part == DT_LOSS_SUMS) { /* every row */
            dtk_net_vocab_stats(ex->net, o->loss_part == DT_LOSS_SUMS,
                                ex->y + (long)b0 * ex->label_rows, b0, o->samples);
            break;
        }
        /* eval chunks: the loss and accuracy of the real rows only */
        int n = real > 0 && real < o->samples ? real : o->samples;
        double mean;
        /* both read the labels of their rows from their pointer on; training under mixed
         * precision seeds the loss scale times the gradient; eval seeds none */
        double denom = is_mixed(ex) ? o->scale / ex->scaler[DT_SCALER_SCALE] : o->scale;
        const int *labels = ex->y + (long)b0 * ex->label_rows;
        if (ex->gpu)
            rc = real ? dtx_cuda_eval_loss(ex->gpu, labels, b0, n, &mean, err)
                      : dtx_cuda_begin_backward(ex->gpu, labels, b0, n, denom, &mean, err);
        else
            rc = real ? dtk_net_eval_loss(ex->net, labels, b0, n, &mean, err)
                      : dtk_net_begin_backward(ex->net, labels, b0, n, denom, &mean, err);
        if (!rc) {
            out->loss_sum += mean * n;
            out->correct += dtk_net_correct_rows(ex->net, ex->y, b0, n);
            out->rows += n;
        }
        break;
    }
    case DT_OP_ZERO: {
        size_t bytes = (size_t)o->region.count * dt_dtype_size(dtype_of(ex, &o->region));
        if (ex->gpu)
            dtx_cuda_zero(ex->gpu, at(ex, &o->region), bytes);
        else
            memset(at(ex, &o->region), 0, bytes);
        break;
    }
    case DT_OP_COPY:
        copy_region(ex, o);
        break;
    case DT_OP_UPDATE:
        optimizer_step(ex, o);
        break;
    case DT_OP_UNSCALE:
        unscale(ex, o);
        break;
    case DT_OP_RESCALE:
        rescale(ex);
        break;
    default:
        break;
    }
    return rc;
}

/* Walks a program. real: 0 for a training step; for eval, the chunk's real rows. */
static int walk(struct dtx_exec *ex, struct program *pg, dtx_load_fn load, void *ctx, int real,
                struct dtx_loss *out, struct dtx_op_time *times, struct dt_error *err)
{
    dtk_net_set_train(ex->net, real == 0);
    ex->running = pg;
    for (int i = 0; i < pg->n_ops; i++) {
        const struct dt_op *o = &pg->ops[i];
        double start = MPI_Wtime();
        struct comm_state *c = pg->state[i];
        int rc = DT_OK;
        if (c) {
            start_comm(ex, c);
        } else if (o->kind == DT_OP_WAIT) {
            struct comm_state *h = ex->handle[o->handle];
            if (!h)
                return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "wait for handle %d never started",
                               o->handle);
            complete(ex, h);
        } else {
            rc = run_local(ex, o, load, ctx, real, out, err);
            progress_all(ex, NULL);
            if (dtx_watchdog_expired(ex->wd, NULL)) { /* another rank's heartbeat */
                char what[96];
                describe_place(ex, i, what, sizeof what);
                dtx_watchdog_fire(ex->wd, NULL, what);
            }
        }
        if (!rc && ex->gpu) /* a GPU failure; with timings, the op's kernels finish first */
            rc = dtx_cuda_status(ex->gpu, times != NULL, err);
        if (rc)
            return rc;
        if (times) {
            double end = MPI_Wtime();
            struct dtx_op_time *t = &times[i];
            t->start_s = start - ex->t0;
            t->dur_s = end - start;
            t->end_s = end - ex->t0;
            t->bytes_sent = c ? c->bytes_sent : 0;
            t->bytes_recv = c ? c->bytes_recv : 0;
        }
    }
    /* Anything still in flight (a plan without its WAIT) completes before the next step. */
    for (int i = 0; i < pg->n_ops; i++)
        if (pg->state[i] && pg->state[i]->active)
            complete(ex, pg->state[i]);
    if (times)
        for (int i = 0; i < pg->n_ops; i++) {
            struct comm_state *c = pg->state[i];
            if (c && c->o->nonblocking) {
                times[i].end_s = c->end_s;
                times[i].bytes_sent = c->bytes_sent;
                times[i].bytes_recv = c->bytes_recv;
            }
        }
    return DT_OK;
}

int dtx_exec_iteration(struct dtx_exec *ex, dtx_load_fn load, void *load_ctx,
                       struct dtx_loss *out, struct dtx_op_time *times, double t0,
                       struct dt_error *err)
{
    ex->t0 = t0;
    dtk_net_set_step(ex->net, ex->steps); /* the step's dropout masks */
    ex->steps++;
    *out = (struct dtx_loss){0, 0, 0};
    double start = MPI_Wtime();
    int rc = walk(ex, &ex->step, load, load_ctx, 0, out, times, err);
    if (!rc && ex->gpu) /* the step's kernels are done (a fault inside one surfaces here) */
        rc = dtx_cuda_status(ex->gpu, true, err);
    dtx_watchdog_step_done(ex->wd, MPI_Wtime() - start);
    return rc;
}

int dtx_exec_eval(struct dtx_exec *ex, dtx_load_fn load, void *load_ctx, int rows,
                  struct dtx_loss *out, struct dt_error *err)
{
    if (rows < 1 || rows > ex->rp->eval_rows)
        return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "eval chunk of %d rows (at most %d)", rows,
                       ex->rp->eval_rows);
    ex->t0 = MPI_Wtime();
    return walk(ex, &ex->eval, load, load_ctx, rows, out, NULL, err);
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


/* --device cuda: the host copy of n floats at p, brought up to date. */
static float *downloaded(struct dtx_exec *ex, float *p, long n)
{
    if (ex->gpu && p)
        dtx_cuda_download(ex->gpu, p, (size_t)n * sizeof *p);
    return p;
}

/* The float32 weights: the parameters, or under mixed precision the 2-byte parameters
 * widened (exactly: every bf16 and fp16 value is a float), which every replica holds alike
 * whether or not the master weights are sharded (ZeRO). */
static float *float_params(struct dtx_exec *ex)
{
    if (!is_mixed(ex))
        return downloaded(ex, dtk_net_params(ex->net), dtk_net_n_params(ex->net));
    dtk_half_to_f32(ex->dtype, dtk_net_params16(ex->net), ex->wide, dtk_net_n_params(ex->net));
    return ex->wide;
}

void dtx_exec_set_overflow_at(struct dtx_exec *ex, long step) { ex->overflow_at = step; }
void dtx_exec_set_skipped(struct dtx_exec *ex, long skipped) { ex->skipped = skipped; }

void dtx_exec_scaler(const struct dtx_exec *ex, double *scale, long *skipped)
{
    *scale = ex->scaler ? ex->scaler[DT_SCALER_SCALE] : 1.0;
    *skipped = ex->skipped;
}

/* The communicator of this rank's replicas, or MPI_COMM_NULL. */
static MPI_Comm replica_comm(const struct dtx_exec *ex)
{
    int g = ex->rp->replicas;
    return g >= 0 && g < ex->plan->n_groups ? ex->gcomm[g] : MPI_COMM_NULL;
}

/* Whether replicas hold the same master weights: every rank updates all it holds (not ZeRO,
 * not a parameter server's one updating rank). The same answer on every rank. */
static bool replicated_master(const struct dtx_exec *ex)
{
    bool all = true;
    for (int r = 0; r < ex->plan->n_ranks && all; r++)
        all = !ex->plan->ranks[r].owned && ex->plan->ranks[r].n_updated == ex->plan->ranks[r].n_params;
    return all;
}

bool dtx_exec_params_agree(struct dtx_exec *ex)
{
    /* ranks that own shards (ZeRO-3) hold different parameters by design: nothing to compare */
    long n = ex->rp->owned ? 0 : dtk_net_n_params(ex->net);
    uint64_t h = dtx_params_hash(float_params(ex), n), lo, hi;
    if (is_mixed(ex) && replicated_master(ex)) /* and the master weights behind them */
        h ^= dtx_params_hash(ex->master, ex->opt_block) * 3;
    lo = hi = h;
    MPI_Comm rc = replica_comm(ex);
    if (rc != MPI_COMM_NULL) {
        dtx_watchdog_allreduce(ex->wd, &h, &lo, 1, MPI_UINT64_T, MPI_MIN, rc,
                               "the replicas' parameter check");
        dtx_watchdog_allreduce(ex->wd, &h, &hi, 1, MPI_UINT64_T, MPI_MAX, rc,
                               "the replicas' parameter check");
    }
    int mine = lo == hi, all;
    dtx_watchdog_allreduce(ex->wd, &mine, &all, 1, MPI_INT, MPI_LAND, ex->comm,
                           "the parameter check");
    return all;
}

/* Floats of non-trained state of the layers this rank runs. */
static long state_floats(const struct dtx_exec *ex)
{
    const struct dt_model *m = ex->plan->model;
    long n = 0;
    for (int l = 0; l < m->n_layers; l++)
        n += ex->plan->views[ex->rp->view][l].runs ? m->layers[l].state_floats : 0;
    return n;
}

void *dtx_exec_buffer(struct dtx_exec *ex, enum dt_buf kind, long *elems)
{
    switch (kind) {
    case DT_BUF_PARAMS:
        *elems = dtk_net_n_params(ex->net);
        return is_mixed(ex) ? (void *)dtk_net_params16(ex->net)
                            : downloaded(ex, dtk_net_params(ex->net), *elems);
    case DT_BUF_OPT:
        *elems = dt_optimizer_moments(ex->plan->opt.optimizer) * ex->opt_block;
        return downloaded(ex, ex->opt_state, *elems);
    case DT_BUF_STATE:
        *elems = state_floats(ex);
        return downloaded(ex, dtk_net_state(ex->net), *elems);
    case DT_BUF_MASTER:
        *elems = is_mixed(ex) ? ex->opt_block : 0;
        return ex->master;
    case DT_BUF_SCALER:
        *elems = is_mixed(ex) ? DT_SCALER_ELEMS : 0;
        return ex->scaler;
    default:
        *elems = 0;
        return NULL;
    }
}

void dtx_exec_sync_state(struct dtx_exec *ex)
{
    long n = state_floats(ex);
    MPI_Comm rc = replica_comm(ex);
    int size = 1;
    if (rc != MPI_COMM_NULL)
        MPI_Comm_size(rc, &size);
    if (n <= 0 || size == 1)
        return;
    float *s = downloaded(ex, dtk_net_state(ex->net), n);
    for (long off = 0; off < n; off += PIECE_FLOATS) {
        int k = (int)(n - off < PIECE_FLOATS ? n - off : PIECE_FLOATS);
        dtx_watchdog_allreduce(ex->wd, MPI_IN_PLACE, s + off, k, MPI_FLOAT, MPI_SUM, rc,
                               "the batchnorm statistics' average");
    }
    for (long i = 0; i < n; i++)
        s[i] /= (float)size;
    if (ex->gpu)
        dtx_cuda_upload(ex->gpu, s, (size_t)n * sizeof *s);
}

/* Copies a rank's packed parameters to their places in the full vector: its view's layers or
 * their tensor-parallel shards; ZeRO-3's owned ranges into their view's packed layout in
 * owned[view] (whole once every rank's are there: copied by unpack_owned). */
static void unpack(float *full, float **owned, float *packed, const struct dt_plan *plan,
                   const struct dt_rank_plan *rp)
{
    const struct dt_model *m = plan->model;
    const struct dt_layer_view *v = plan->views[rp->view];
    for (int i = 0; i < rp->n_owned; i++)
        memcpy(owned[rp->view] + rp->owned[i].packed_offset, packed + rp->owned[i].offset,
               (size_t)rp->owned[i].count * sizeof *packed);
    for (int l = 0; l < m->n_layers && !rp->owned; l++)
        if (v[l].runs)
            dt_shard_copy(m, v, l, packed, full, true);
}

/* ZeRO-3 on rank 0: one packed buffer per view (NULL elsewhere, or when nothing is owned). */
static float **owned_views(const struct dtx_exec *ex, bool *ok)
{
    const struct dt_plan *plan = ex->plan;
    *ok = true;
    if (ex->rank != 0 || !ex->rp->owned)
        return NULL;
    float **views = calloc((size_t)plan->n_views, sizeof *views);
    *ok = views != NULL;
    for (int v = 0; *ok && v < plan->n_views; v++) {
        long n = dt_shard_packed_floats(plan->model, plan->views[v]);
        *ok = (views[v] = malloc((size_t)(n ? n : 1) * sizeof **views)) != NULL;
    }
    return views;
}

/* The assembled views to the model's layout, and freed. */
static void unpack_owned(float *full, float **views, const struct dt_plan *plan, bool copy)
{
    for (int v = 0; views && v < plan->n_views; v++) {
        if (copy)
            dt_shard_copy_packed(plan->model, plan->views[v], views[v], full, true);
        free(views[v]);
    }
    free(views);
}

/* The norm and sum of the gathered vector on rank 0, sent to every rank (tensor parallelism:
 * the ranks' buffers overlap where layers are replicated, so their sums do not add up). */
static void full_sums(struct dtx_exec *ex, const float *full, double *l2, double *sum)
{
    double s[2] = {0, 0};
    for (long i = 0; ex->rank == 0 && i < ex->plan->model->total_params; i++) {
        s[0] += (double)full[i] * full[i];
        s[1] += full[i];
    }
    MPI_Request req;
    MPI_Ibcast(s, 2, MPI_DOUBLE, 0, ex->comm, &req);
    dtx_watchdog_wait(ex->wd, &req, "the parameters' norm");
    *l2 = sqrt(s[0]);
    *sum = s[1];
}

/* Whether a rank's parameters go into the gathered vector: replica 0 of every stage, or
 * every rank when each owns a shard (ZeRO-3). */
static bool contributes(const struct dt_rank_plan *rp)
{
    return rp->dp_index == 0 || rp->owned;
}

/* The sums of squares and of the parameters a rank contributes. */
static void local_sums(const struct dtx_exec *ex, const float *p, double s[2])
{
    const struct dt_rank_plan *rp = ex->rp;
    s[0] = s[1] = 0;
    for (int i = 0; i < (rp->owned ? rp->n_owned : contributes(rp)); i++) {
        long first = rp->owned ? rp->owned[i].offset : 0;
        long n = rp->owned ? rp->owned[i].count : dtk_net_n_params(ex->net);
        for (long k = first; k < first + n; k++) {
            s[0] += (double)p[k] * p[k];
            s[1] += p[k];
        }
    }
}

int dtx_exec_gather_params(struct dtx_exec *ex, float *full, double *l2, double *sum,
                           struct dt_error *err)
{
    const struct dt_plan *plan = ex->plan;
    float *p = float_params(ex);
    /* sums first, then the vector */
    double local[2], tot[2];
    local_sums(ex, p, local);
    dtx_watchdog_allreduce(ex->wd, local, tot, 2, MPI_DOUBLE, MPI_SUM, ex->comm,
                           "the parameters' norm");
    *l2 = sqrt(tot[0]);
    *sum = tot[1];
    /* rank 0 receives into one buffer of the largest contribution; every rank learns whether
     * it could before anything is sent */
    long largest = 0;
    for (int r = 1; r < ex->size; r++)
        if (contributes(&plan->ranks[r]) && plan->ranks[r].n_params > largest)
            largest = plan->ranks[r].n_params;
    float *buf = ex->rank == 0 && full ? malloc((size_t)(largest + 1) * sizeof *buf) : NULL;
    bool views_ok;
    float **views = owned_views(ex, &views_ok);
    int ok = largest <= INT_MAX && views_ok && (ex->rank != 0 || (full && buf));
    MPI_Request req;
    MPI_Ibcast(&ok, 1, MPI_INT, 0, ex->comm, &req);
    dtx_watchdog_wait(ex->wd, &req, "the parameter gather");
    if (!ok) {
        free(buf);
        unpack_owned(full, views, plan, false);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "cannot gather the parameters");
    }
    if (ex->rank == 0)
        unpack(full, views, p, plan, ex->rp);
    for (int r = 1; r < ex->size; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        if (!contributes(rp))
            continue;
        if (ex->rank == r) {
            MPI_Isend(p, (int)rp->n_params, MPI_FLOAT, 0, 0, ex->comm, &req);
            dtx_watchdog_wait(ex->wd, &req, "the parameter gather (send to rank 0)");
        }
        if (ex->rank != 0)
            continue;
        MPI_Irecv(buf, (int)rp->n_params, MPI_FLOAT, r, 0, ex->comm, &req);
        dtx_watchdog_wait(ex->wd, &req, "the parameter gather");
        unpack(full, views, buf, plan, rp);
    }
    free(buf);
    unpack_owned(full, views, plan, true);
    if (plan->opt.tp > 1 || plan->stages > 1) /* shards overlap, or a stage copies a table */
        full_sums(ex, full, l2, sum);
    return ex->gpu ? dtx_cuda_status(ex->gpu, false, err) : DT_OK; /* the download's */
}
