/* Receive buffers by what is in flight (dt/commpool.h). */
#include "dt/commpool.h"

#include <stdlib.h>
#include <string.h>

#include "compile.h"

/* A non-blocking op in flight: its range of the pool and the handle that ends it. */
struct flight {
    long at, w;
    int handle;
};

/* The ops in flight, sorted by offset. */
struct live_set {
    struct flight *f;
    int n;
    long elems; /* their widths summed */
};

static long op_scratch(const struct dt_plan *plan, int rank, const struct dt_op *op,
                       enum dt_dtype dtype)
{
    if (op->kind != DT_OP_COLL && op->kind != DT_OP_RECV)
        return 0;
    if (dt_plan_region_dtype(plan, rank, &op->region) != dtype)
        return 0;
    if (op->kind == DT_OP_RECV)
        return dt_coll_scratch_floats(op, 1, 0);
    const struct dt_group *g = &plan->groups[op->group];
    return dt_coll_scratch_floats(op, g->n, dtc_group_index(g, rank));
}

/* First fit: the lowest offset where w elements overlap no op in flight; *pos: the index it
 * goes in at to keep the set sorted. */
static long first_fit(const struct live_set *s, long w, int *pos)
{
    long at = 0;
    int i = 0;
    while (i < s->n && s->f[i].at < at + w) {
        long end = s->f[i].at + s->f[i].w;
        at = end > at ? end : at;
        i++;
    }
    *pos = i;
    return at;
}

/* The WAIT of handle: its op's range is free again. */
static void end_flight(struct live_set *s, int handle)
{
    for (int i = 0; i < s->n; i++)
        if (s->f[i].handle == handle) {
            s->elems -= s->f[i].w;
            memmove(&s->f[i], &s->f[i + 1], (size_t)(s->n - i - 1) * sizeof *s->f);
            s->n--;
            return;
        }
}

/* A non-blocking op started: its range stays taken until its WAIT. */
static void start_flight(struct live_set *s, int pos, long at, long w, int handle)
{
    memmove(&s->f[pos + 1], &s->f[pos], (size_t)(s->n - pos) * sizeof *s->f);
    s->f[pos] = (struct flight){at, w, handle};
    s->n++;
    s->elems += w;
}

/* One dtype's pool as a program is walked. */
struct pool_walk {
    enum dt_dtype dtype;
    struct live_set s;
    long pool, most;
};

/* Op i into the pool of x (at: each op's offset, or NULL). */
static void place(const struct dt_plan *plan, int rank, const struct dt_op *op,
                  struct pool_walk *x, long *at)
{
    if (at)
        *at = -1;
    if (op->kind == DT_OP_WAIT)
        end_flight(&x->s, op->handle);
    long w = op_scratch(plan, rank, op, x->dtype);
    if (w <= 0)
        return;
    int pos;
    long a = first_fit(&x->s, w, &pos);
    if (at)
        *at = a;
    x->pool = a + w > x->pool ? a + w : x->pool;
    x->most = x->s.elems + w > x->most ? x->s.elems + w : x->most;
    if (op->nonblocking)
        start_flight(&x->s, pos, a, w, op->handle);
}

/* The pools of k dtypes (x[j].dtype) in one pass over the ops (a pass per dtype read a large
 * program twice). -1: out of memory. */
static int walk_pools(const struct dt_plan *plan, int rank, const struct dt_op *ops, int n,
                      struct pool_walk *x, int k, long *at)
{
    int rc = 0;
    for (int j = 0; j < k; j++) {
        x[j].s = (struct live_set){malloc((size_t)(n ? n : 1) * sizeof *x[j].s.f), 0, 0};
        x[j].pool = x[j].most = 0;
        rc |= x[j].s.f ? 0 : -1;
    }
    for (int i = 0; i < n && !rc; i++)
        for (int j = 0; j < k; j++)
            place(plan, rank, &ops[i], &x[j], at ? &at[i] : NULL);
    for (int j = 0; j < k; j++)
        free(x[j].s.f);
    return rc;
}

long dt_comm_pool(const struct dt_plan *plan, int rank, const struct dt_op *ops, int n,
                  enum dt_dtype dtype, long *at, long *peak)
{
    struct pool_walk x = {.dtype = dtype};
    if (walk_pools(plan, rank, ops, n, &x, 1, at))
        return -1;
    if (peak)
        *peak = x.most;
    return x.pool;
}

int dt_comm_pools_rank(const struct dt_plan *plan, int rank, int k, const enum dt_dtype *dtype,
                       long *pool)
{
    const struct dt_rank_plan *rp = &plan->ranks[rank];
    struct pool_walk step[2], eval[2];
    if (k < 1 || k > 2)
        return -1;
    for (int j = 0; j < k; j++)
        step[j].dtype = eval[j].dtype = dtype[j];
    if (walk_pools(plan, rank, rp->ops, rp->n_ops, step, k, NULL) ||
        walk_pools(plan, rank, rp->eval.ops, rp->eval.n_ops, eval, k, NULL))
        return -1;
    for (int j = 0; j < k; j++)
        pool[j] = step[j].pool > eval[j].pool ? step[j].pool : eval[j].pool;
    return 0;
}

long dt_comm_pool_rank(const struct dt_plan *plan, int rank, enum dt_dtype dtype)
{
    long pool;
    return dt_comm_pools_rank(plan, rank, 1, &dtype, &pool) ? -1 : pool;
}
