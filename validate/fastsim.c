/* A run's step at many cost parameters: local prefixes summed over distinct ops, the tail
 * played (fastsim.h says why that is the player's result). */
#include "fastsim.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "player.h"

/* Tails kept per row: a fit's Jacobian moves one parameter at a time around a point, so
 * the point's tail and those of the one or two parameters that move it (eff_mem, a link)
 * are the ones asked again. */
enum { TAIL_KEYS = 4 };

/* The cost parameters the tail depends on besides its ops' costs (fastsim.h: (b), (c)). */
enum { TAIL_PARAMS = 11 };

static void tail_param_key(const struct dt_cost_params *cp, double *key)
{
    const double v[TAIL_PARAMS] = {cp->reduce_Bps,   cp->mem_Bps,     cp->cache_Bps,
                                   cp->node_mem_Bps, cp->eff_mem,     cp->intra_bw_Bps,
                                   cp->intra_lat_s,  cp->nic_bw_Bps,  cp->nic_lat_s,
                                   cp->net_lat_s,    cp->eager_bytes};
    memcpy(key, v, sizeof v);
}

struct tail_entry {
    bool used;
    double *key;
    struct dt_step at0; /* the tail played from 0, without the read */
};

struct dtv_tail_cache {
    long n_key;
    double *scratch;
    struct tail_entry e[TAIL_KEYS];
    int next;
    long played, reused;
};

static void tail_cache_free(struct dtv_tail_cache *c)
{
    if (!c)
        return;
    free(c->scratch);
    for (int i = 0; i < TAIL_KEYS; i++)
        free(c->e[i].key);
    free(c);
}

static struct dtv_tail_cache *tail_cache_new(long n_tail_ops)
{
    struct dtv_tail_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->n_key = TAIL_PARAMS + n_tail_ops;
    bool ok = (c->scratch = malloc((size_t)c->n_key * sizeof(double))) != NULL;
    for (int i = 0; i < TAIL_KEYS && ok; i++)
        ok = (c->e[i].key = malloc((size_t)c->n_key * sizeof(double))) != NULL;
    if (!ok) {
        tail_cache_free(c);
        return NULL;
    }
    return c;
}

static bool is_comm(const struct dt_op *op)
{
    return op->kind == DT_OP_SEND || op->kind == DT_OP_RECV || op->kind == DT_OP_COLL ||
           op->kind == DT_OP_WAIT;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull;
}

static uint64_t op_hash(const struct dt_op *op)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, (uint64_t)op->kind);
    h = mix(h, (uint64_t)op->phase);
    h = mix(h, (uint64_t)(uint32_t)op->layer);
    h = mix(h, (uint64_t)(uint32_t)op->samples);
    h = mix(h, (uint64_t)op->region.buf);
    h = mix(h, (uint64_t)op->region.count);
    return mix(h, (uint64_t)op->recompute);
}

/* Counts the distinct ops of ops[0..n) into fr (in order of first occurrence). */
static int count_distinct(const struct dt_op *ops, int n, struct dtv_fast_rank *fr)
{
    size_t cap = 64;
    while (cap < 2 * (size_t)n)
        cap *= 2;
    int *slot = malloc(cap * sizeof *slot);
    if (!slot)
        return -1;
    memset(slot, 0xff, cap * sizeof *slot);
    for (int i = 0; i < n; i++) {
        size_t s = (size_t)op_hash(&ops[i]) & (cap - 1);
        while (slot[s] >= 0 && !dt_op_same_cost(fr->ops[slot[s]].op, &ops[i]))
            s = (s + 1) & (cap - 1);
        if (slot[s] >= 0) {
            fr->ops[slot[s]].count++;
            continue;
        }
        if (fr->n == fr->cap) {
            int c = fr->cap ? 2 * fr->cap : 64;
            void *p = realloc(fr->ops, (size_t)c * sizeof *fr->ops);
            if (!p) {
                free(slot);
                return -1;
            }
            fr->ops = p;
            fr->cap = c;
        }
        slot[s] = fr->n;
        fr->ops[fr->n++] = (struct dtv_fast_op){&ops[i], 1};
    }
    free(slot);
    return 0;
}

static bool same_ops(const struct dtv_fast_rank *a, const struct dtv_fast_rank *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (a->ops[i].count != b->ops[i].count || !dt_op_same_cost(a->ops[i].op, b->ops[i].op))
            return false;
    return true;
}

/* Rank r's local prefix counted, its tail set; same_as: the first earlier rank with the same
 * counts (compared with that rank's own same_as root only). */
static int init_rank(struct dtv_fast *f, int r)
{
    const struct dt_rank_plan *rp = &f->run->plan->ranks[r];
    int k = 0;
    while (k < rp->n_ops && !is_comm(&rp->ops[k]))
        k++;
    struct dtv_fast_rank *fr = &f->rank[r];
    fr->same_as = -1;
    if (count_distinct(rp->ops, k, fr))
        return -1;
    for (int q = 0; q < r && fr->same_as < 0; q++)
        if (f->rank[q].same_as < 0 && same_ops(&f->rank[q], fr))
            fr->same_as = q;
    struct dt_rank_plan *tp = &f->tail.ranks[r];
    *tp = *rp;
    tp->ops = rp->ops + k;
    tp->n_ops = tp->cap_ops = rp->n_ops - k;
    f->n_tail_ops += tp->n_ops;
    return 0;
}

int dtv_fast_init(struct dtv_fast *f, const struct dtv_run *run, struct dt_error *err)
{
    const struct dt_plan *plan = run->plan;
    memset(f, 0, sizeof *f);
    f->run = run;
    f->tail = *plan;
    f->tail.ranks = calloc((size_t)plan->n_ranks, sizeof *f->tail.ranks);
    f->rank = calloc((size_t)plan->n_ranks, sizeof *f->rank);
    f->node_samples = dt_step_node_samples(plan);
    bool ok = f->tail.ranks && f->rank && f->node_samples;
    for (int r = 0; r < plan->n_ranks && ok; r++)
        ok = init_rank(f, r) == 0;
    ok = ok && (f->cache = tail_cache_new(f->n_tail_ops)) != NULL;
    if (!ok) {
        dtv_fast_free(f);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    return DT_OK;
}

void dtv_fast_free(struct dtv_fast *f)
{
    for (int r = 0; f->rank && r < f->run->plan->n_ranks; r++)
        free(f->rank[r].ops);
    free(f->rank);
    free(f->tail.ranks);
    free(f->node_samples);
    tail_cache_free(f->cache);
    memset(f, 0, sizeof *f);
}

/* When rank r reaches its first communication op: its overhead, then its local ops back to
 * back (a LOSS or RESCALE that costs nothing is no event in the player: skipped alike). */
static const struct dt_device_spec *device_of(const struct dtv_fast *f, int r)
{
    const struct dt_topology *t = f->run->plan->topo;
    return &dt_topology_group_of_node(t, dt_topology_node_of(t, r))->device;
}

static double prefix_end(const struct dtv_fast *f, const struct dt_cost_params *cpr, int r)
{
    const struct dt_device_spec *dev = device_of(f, r);
    const struct dtv_fast_rank *fr = &f->rank[r];
    double s = cpr->iter_overhead_s;
    for (int i = 0; i < fr->n; i++) {
        const struct dt_op *op = fr->ops[i].op;
        double d = dt_cost_op(cpr, dev, f->run->plan->model, op);
        if ((op->kind == DT_OP_LOSS || op->kind == DT_OP_RESCALE) && d <= 0)
            continue;
        s += (double)fr->ops[i].count * d;
    }
    return s;
}

/* The time every rank reaches its first communication op at its parameters cpr, or NAN
 * when they differ. */
static double common_prefix_end(const struct dtv_fast *f, const struct dt_cost_params *cpr,
                                struct dt_error *err, int *rc)
{
    const struct dt_plan *plan = f->run->plan;
    double *end = malloc((size_t)plan->n_ranks * sizeof *end);
    if (!end) {
        *rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        return NAN;
    }
    double common = NAN;
    for (int r = 0; r < plan->n_ranks; r++) {
        int q = f->rank[r].same_as;
        /* a rank like an earlier one at the same parameters ends with it (bytes equal: the
         * values are; unequal bytes only cost a recount) */
        end[r] = q >= 0 && memcmp(&cpr[q], &cpr[r], sizeof *cpr) == 0 ? end[q]
                                                                      : prefix_end(f, &cpr[r], r);
        if (r == 0)
            common = end[0];
        else if (end[r] != common)
            common = NAN;
    }
    free(end);
    *rc = DT_OK;
    return common;
}

int dtv_step_simulate(const struct dt_plan *plan, const struct dt_cost_params *cp,
                      struct dt_step *out, struct dt_error *err)
{
    int n = plan->topo->n_groups;
    struct dt_cost_params *group_cp = malloc((size_t)n * sizeof *group_cp);
    if (!group_cp)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int g = 0; g < n; g++)
        group_cp[g] = *cp;
    int rc = dt_step_simulate(plan, group_cp, out, err);
    free(group_cp);
    return rc;
}

/* What the tail's result depends on at cp (fastsim.h): its parameters, then every tail op's
 * cost at its rank's parameters, into f's scratch key. */
static void tail_key(const struct dtv_fast *f, const struct dt_cost_params *cp,
                     const struct dt_cost_params *cpr)
{
    double *key = f->cache->scratch;
    tail_param_key(cp, key);
    long k = TAIL_PARAMS;
    for (int r = 0; r < f->tail.n_ranks; r++) {
        const struct dt_device_spec *dev = device_of(f, r);
        const struct dt_rank_plan *tp = &f->tail.ranks[r];
        for (int i = 0; i < tp->n_ops; i++)
            key[k++] = dt_cost_op(&cpr[r], dev, f->run->plan->model, &tp->ops[i]);
    }
}

/* The tail played from 0 at cp, from the cache when played before for the same key. */
static int tail_at_zero(const struct dtv_fast *f, const struct dt_cost_params *cp,
                        const struct dt_cost_params *cpr, const struct dt_step **out,
                        struct dt_error *err)
{
    struct dtv_tail_cache *c = f->cache;
    tail_key(f, cp, cpr);
    size_t bytes = (size_t)c->n_key * sizeof(double);
    for (int i = 0; i < TAIL_KEYS; i++)
        if (c->e[i].used && memcmp(c->e[i].key, c->scratch, bytes) == 0) {
            c->reused++;
            *out = &c->e[i].at0;
            return DT_OK;
        }
    struct dt_cost_params at = *cp;
    at.iter_overhead_s = 0;
    struct dt_sim_result res;
    int rc = dt_sim_run(&f->tail, &at, NULL, &res, err);
    if (rc)
        return rc;
    struct tail_entry *e = &c->e[c->next];
    c->next = (c->next + 1) % TAIL_KEYS;
    dt_step_fill(&res, 0, &e->at0);
    dt_sim_result_free(&res);
    memcpy(e->key, c->scratch, bytes);
    e->used = true;
    c->played++;
    *out = &e->at0;
    return DT_OK;
}

void dtv_fast_tail_counts(const struct dtv_fast *f, long *played, long *reused)
{
    *played = f->cache->played;
    *reused = f->cache->reused;
}

int dtv_fast_step(const struct dtv_fast *f, const struct dt_cost_params *cp,
                  struct dt_step *out, bool *tail_only, struct dt_error *err)
{
    const struct dt_plan *plan = f->run->plan;
    struct dt_cost_params *cpr = dt_cost_rank_params(cp, NULL, plan->topo, plan->n_ranks);
    if (!cpr)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    int rc;
    double start = common_prefix_end(f, cpr, err, &rc);
    const struct dt_step *t0 = NULL;
    if (!rc && !isnan(start))
        rc = tail_at_zero(f, cp, cpr, &t0, err);
    free(cpr);
    if (rc)
        return rc;
    if (tail_only)
        *tail_only = t0 != NULL;
    if (!t0)
        return dtv_step_simulate(plan, cp, out, err);
    /* every event of the tail start later: the start is the ranks' compute (fastsim.h) */
    *out = *t0;
    out->sim_s = start + t0->sim_s;
    out->compute_s = start + t0->compute_s;
    out->read_s = dt_step_read_from(plan, f->node_samples, cp);
    out->iter_s = fmax(out->sim_s, out->read_s);
    return DT_OK;
}
