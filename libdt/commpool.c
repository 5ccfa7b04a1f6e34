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
    return dt_coll_scratch_floats(op, g->n, dt_group_index(g, rank));
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

long dt_comm_pool(const struct dt_plan *plan, int rank, const struct dt_op *ops, int n,
                  enum dt_dtype dtype, long *at, long *peak)
{
    struct live_set s = {malloc((size_t)(n ? n : 1) * sizeof *s.f), 0, 0};
    long pool = 0, most = 0;
    if (!s.f)
        return -1;
    for (int i = 0; i < n; i++) {
        const struct dt_op *op = &ops[i];
        if (at)
            at[i] = -1;
        if (op->kind == DT_OP_WAIT)
            end_flight(&s, op->handle);
        long w = op_scratch(plan, rank, op, dtype);
        if (w <= 0)
            continue;
        int pos;
        long a = first_fit(&s, w, &pos);
        if (at)
            at[i] = a;
        pool = a + w > pool ? a + w : pool;
        most = s.elems + w > most ? s.elems + w : most;
        if (op->nonblocking)
            start_flight(&s, pos, a, w, op->handle);
    }
    free(s.f);
    if (peak)
        *peak = most;
    return pool;
}

long dt_comm_pool_rank(const struct dt_plan *plan, int rank, enum dt_dtype dtype)
{
    const struct dt_rank_plan *rp = &plan->ranks[rank];
    long step = dt_comm_pool(plan, rank, rp->ops, rp->n_ops, dtype, NULL, NULL);
    long eval = dt_comm_pool(plan, rank, rp->eval.ops, rp->eval.n_ops, dtype, NULL, NULL);
    if (step < 0 || eval < 0)
        return -1;
    return step > eval ? step : eval;
}
