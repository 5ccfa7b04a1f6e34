/* Ranks with identical programs share one copy (plan memory at 16k devices: every rank of a
 * data-parallel plan holds the same few hundred ops, 192 bytes each).
 *
 * A finished rank's step program, eval program and buffer table are interned in the plan's
 * pool: equal arrays are stored once and the ranks point at them (dt_rank_plan's shared_*
 * flags). Readers walk rp->ops / rp->eval.ops / rp->bufs unchanged; the builders (dt_plan_push,
 * dt_plan_push_eval, dt_plan_add_buffer) copy a shared array before changing it. */
#include "dt/plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One interned array: ops (step or eval programs) or buffers, n entries. */
struct entry {
    uint64_t hash;
    bool is_ops;
    int n;
    void *items;
};

struct dt_plan_pool {
    int n, cap;              /* entries */
    struct entry *entries;
    int slots;               /* open-addressing index: entry + 1, 0 empty (power of two) */
    int *index;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0x100000001b3ULL;
}

static uint64_t mix_double(uint64_t h, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    return mix(h, v);
}

static bool region_equal(const struct dt_region *a, const struct dt_region *b)
{
    return a->buf == b->buf && a->offset == b->offset && a->count == b->count &&
           a->layer == b->layer;
}

bool dt_op_same_cost(const struct dt_op *a, const struct dt_op *b)
{
    return a->kind == b->kind && a->phase == b->phase && a->layer == b->layer &&
           a->samples == b->samples && a->peer == b->peer && a->tag == b->tag &&
           a->sum == b->sum && region_equal(&a->region, &b->region) &&
           region_equal(&a->dst, &b->dst) && a->coll == b->coll && a->alg == b->alg &&
           a->reduction == b->reduction && a->group == b->group && a->root == b->root &&
           a->nonblocking == b->nonblocking && a->handle == b->handle &&
           a->bytes == b->bytes && a->scale == b->scale && a->loss_part == b->loss_part &&
           region_equal(&a->grads, &b->grads) && a->precision == b->precision &&
           a->shards == b->shards && a->recompute == b->recompute &&
           a->grads_f32 == b->grads_f32;
}

static bool op_equal(const struct dt_op *a, const struct dt_op *b)
{
    return a->micro == b->micro && a->slot == b->slot && a->row0 == b->row0 &&
           dt_op_same_cost(a, b);
}

static uint64_t op_hash(uint64_t h, const struct dt_op *o)
{
    h = mix(h, (uint64_t)o->kind << 32 | (uint32_t)o->layer);
    h = mix(h, (uint64_t)(uint32_t)o->group << 32 | (uint32_t)o->peer);
    h = mix(h, (uint64_t)o->region.offset ^ (uint64_t)o->region.count << 20);
    h = mix(h, (uint64_t)(uint32_t)o->handle << 32 | (uint32_t)o->samples);
    return mix(h, (uint64_t)(uint32_t)o->row0 << 32 | (uint32_t)o->tag);
}

static bool buf_equal(const struct dt_buffer *a, const struct dt_buffer *b)
{
    return a->kind == b->kind && a->dtype == b->dtype && a->layer == b->layer &&
           a->elems == b->elems;
}

static uint64_t hash_items(bool is_ops, const void *items, int n)
{
    uint64_t h = mix(is_ops ? 1 : 2, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        if (is_ops) {
            h = op_hash(h, &((const struct dt_op *)items)[i]);
        } else {
            const struct dt_buffer *b = &((const struct dt_buffer *)items)[i];
            h = mix(h, (uint64_t)b->kind << 40 | (uint64_t)b->dtype << 32 | (uint32_t)b->layer);
            h = mix_double(h, b->elems);
        }
    }
    return h;
}

static bool items_equal(const struct entry *e, bool is_ops, const void *items, int n)
{
    if (e->is_ops != is_ops || e->n != n)
        return false;
    for (int i = 0; i < n; i++)
        if (is_ops ? !op_equal(&((const struct dt_op *)e->items)[i],
                               &((const struct dt_op *)items)[i])
                   : !buf_equal(&((const struct dt_buffer *)e->items)[i],
                                &((const struct dt_buffer *)items)[i]))
            return false;
    return true;
}

static int grow_index(struct dt_plan_pool *p)
{
    int slots = p->slots ? 2 * p->slots : 64;
    int *index = calloc((size_t)slots, sizeof *index);
    if (!index)
        return DT_ENOMEM;
    for (int e = 0; e < p->n; e++) {
        size_t s = (size_t)p->entries[e].hash & (size_t)(slots - 1);
        while (index[s])
            s = (s + 1) & (size_t)(slots - 1);
        index[s] = e + 1;
    }
    free(p->index);
    p->index = index;
    p->slots = slots;
    return DT_OK;
}

/* The pooled array equal to items (which is then freed), or items itself, now pooled. NULL
 * when out of memory (items left to its owner). */
static void *intern(struct dt_plan_pool *p, bool is_ops, void *items, int n)
{
    uint64_t h = hash_items(is_ops, items, n);
    if (p->slots) {
        for (size_t s = (size_t)h & (size_t)(p->slots - 1); p->index[s];
             s = (s + 1) & (size_t)(p->slots - 1)) {
            struct entry *e = &p->entries[p->index[s] - 1];
            if (e->hash == h && items_equal(e, is_ops, items, n)) {
                free(items);
                return e->items;
            }
        }
    }
    if (2 * (p->n + 1) > p->slots && grow_index(p))
        return NULL;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        struct entry *e = realloc(p->entries, (size_t)cap * sizeof *e);
        if (!e)
            return NULL;
        p->entries = e;
        p->cap = cap;
    }
    p->entries[p->n] = (struct entry){h, is_ops, n, items};
    size_t s = (size_t)h & (size_t)(p->slots - 1);
    while (p->index[s])
        s = (s + 1) & (size_t)(p->slots - 1);
    p->index[s] = ++p->n;
    return items;
}

/* Interns one array of a rank (step ops, eval ops or buffers) unless it is already shared
 * or empty. */
static int share(struct dt_plan_pool *p, bool is_ops, void **items, int n, int *cap,
                 bool *shared)
{
    if (*shared || n == 0)
        return DT_OK;
    void *pooled = intern(p, is_ops, *items, n);
    if (!pooled)
        return DT_ENOMEM;
    *items = pooled;
    *cap = n;
    *shared = true;
    return DT_OK;
}

int dt_plan_share_rank(struct dt_plan *plan, int rank)
{
    if (!plan->pool && !(plan->pool = calloc(1, sizeof *plan->pool)))
        return DT_ENOMEM;
    struct dt_rank_plan *r = &plan->ranks[rank];
    void *ops = r->ops, *eval = r->eval.ops, *bufs = r->bufs;
    int rc = share(plan->pool, true, &ops, r->n_ops, &r->cap_ops, &r->shared_ops);
    r->ops = ops;
    if (!rc)
        rc = share(plan->pool, true, &eval, r->eval.n_ops, &r->eval.cap_ops, &r->shared_eval);
    r->eval.ops = eval;
    if (!rc)
        rc = share(plan->pool, false, &bufs, r->n_bufs, &r->cap_bufs, &r->shared_bufs);
    r->bufs = bufs;
    return rc;
}

int dt_plan_share(struct dt_plan *plan)
{
    int rc = DT_OK;
    for (int r = 0; r < plan->n_ranks && !rc; r++)
        rc = dt_plan_share_rank(plan, r);
    return rc;
}

int dt_plan_distinct_programs(const struct dt_plan *plan)
{
    int n = 0;
    for (int e = 0; plan->pool && e < plan->pool->n; e++)
        n += plan->pool->entries[e].is_ops;
    return n;
}

/* A private copy of a shared array of n items; clears *shared. */
static void *unshare(const void *items, int n, size_t size, int *cap, bool *shared)
{
    int c = n > 0 ? n : 1;
    void *copy = malloc((size_t)c * size);
    if (!copy)
        return NULL;
    memcpy(copy, items, (size_t)n * size);
    *cap = c;
    *shared = false;
    return copy;
}

int dt_plan_unshare_rank(struct dt_plan *plan, int rank)
{
    struct dt_rank_plan *r = &plan->ranks[rank];
    if (r->shared_ops) {
        struct dt_op *own = unshare(r->ops, r->n_ops, sizeof *own, &r->cap_ops,
                                            &r->shared_ops);
        if (!own)
            return DT_ENOMEM;
        r->ops = own;
    }
    if (r->shared_eval) {
        struct dt_op *own = unshare(r->eval.ops, r->eval.n_ops, sizeof *own,
                                            &r->eval.cap_ops, &r->shared_eval);
        if (!own)
            return DT_ENOMEM;
        r->eval.ops = own;
    }
    if (r->shared_bufs) {
        struct dt_buffer *own = unshare(r->bufs, r->n_bufs, sizeof *own, &r->cap_bufs,
                                                &r->shared_bufs);
        if (!own)
            return DT_ENOMEM;
        r->bufs = own;
    }
    return DT_OK;
}

void dt_plan_pool_free(struct dt_plan *plan)
{
    for (int e = 0; plan->pool && e < plan->pool->n; e++)
        free(plan->pool->entries[e].items);
    if (plan->pool) {
        free(plan->pool->entries);
        free(plan->pool->index);
    }
    free(plan->pool);
    plan->pool = NULL;
}
