/* One replica simulated, the replicas' allreduce in closed form (see symmetry.h). */
#include "symmetry.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt/collective.h"
#include "epoch.h"
#include "player.h"
#include "symround.h"

bool dt_sym_applies(const struct dt_plan_options *o, const struct dt_topology *topo)
{
    const struct dt_strategy_info *info = dt_strategy_info(o->strategy);
    bool ring = !o->grad_alg_given || o->grad_alg == DT_ALG_RING || o->grad_alg == DT_ALG_LINEAR;
    int T, S, D;
    dt_plan_shape(o, topo, &T, &S, &D);
    return info->pipeline && o->strategy != DT_STRAT_NAIVE_MP && ring && o->zero <= 1 && D > 1;
}

int dt_sym_min_ranks(void)
{
    const char *v = getenv("DTSIM_SYM_MIN_RANKS");
    return v && *v ? atoi(v) : DT_SYM_MIN_RANKS;
}

int dt_sym_check_env(struct dt_error *err)
{
    const char *v = getenv("DTSIM_SYM_MIN_RANKS");
    char *end;
    long n = v && *v ? strtol(v, &end, 10) : DT_SYM_MIN_RANKS;
    if (v && *v && (*end || n < 0 || n > INT_MAX))
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "DTSIM_SYM_MIN_RANKS: '%s' is not a number of devices >= 0", v);
    return DT_OK;
}

bool dt_sym_used(const struct dt_plan_options *o, const struct dt_topology *topo)
{
    return dt_plan_ranks(o, topo) > dt_sym_min_ranks() && dt_sym_applies(o, topo);
}

bool dt_sym_dp_applies(const struct dt_plan_options *o, const struct dt_topology *topo)
{
    switch (o->strategy) {
    case DT_STRAT_ALLREDUCE_RING:
    case DT_STRAT_ALLREDUCE_RECURSIVE_DOUBLING:
    case DT_STRAT_ALLREDUCE_RABENSEIFNER:
    case DT_STRAT_ALLREDUCE_HIERARCHICAL:
    case DT_STRAT_ALLREDUCE_LIBRARY:
    case DT_STRAT_ALLREDUCE_TREE:
    case DT_STRAT_ALLREDUCE_RAIL_RING:
    case DT_STRAT_PS_SHARDED: { /* each rank a worker and the server of its shard */
        int T, S, D;
        dt_plan_shape(o, topo, &T, &S, &D);
        return D > 1;
    }
    default:
        return false;
    }
}

bool dt_sym_dp_used(const struct dt_plan_options *o, const struct dt_topology *topo)
{
    return dt_plan_ranks(o, topo) > dt_sym_min_ranks() && dt_sym_dp_applies(o, topo);
}

/* 2 (D - 1) steps of bytes / D, each at the slowest hop's bandwidth and latency. */
double dt_sym_allreduce_s(const struct dt_topology *topo, int D, int stride, double bytes)
{
    const struct dt_node_group *g = &topo->groups[0];
    bool across = (long)D * stride > g->devices;
    double bw = g->intra.bw_Bps, lat = g->intra.lat_s;
    if (across) { /* the node's NICs shared by its devices, each sending at once */
        double share = g->nics < g->devices ? (double)g->nics / g->devices : 1.0;
        bw = g->nic.bw_Bps * share;
        lat = 2 * g->nic.lat_s + (2 * topo->net.levels - 1) * topo->net.switch_lat_s;
    }
    return 2.0 * (D - 1) * (bytes / D / bw + lat);
}

/* What the closed tensor collectives read (dt_sim_options.closed_coll_s). */
struct closed {
    const struct dt_plan *plan;
    struct dt_cost_params *cpr; /* per rank, as the player derives them (colocated ranks) */
    bool *tensor;               /* per group: closed (tensor_group) */
    struct memo {               /* the last collectives' times (a block repeats a few) */
        const struct dt_node_group *ng;
        enum dt_coll_kind coll;
        enum dt_coll_alg alg;
        int n;
        long count;
        double elem_bytes, s;
    } memo[8];
    int n_memo;                 /* memos written (round robin) */
    struct dt_symround *world;  /* the data-parallel mode: the other groups' collectives
                                 * from their rounds on the fabric (NULL: simulated) */
    int **shifts, *n_shifts;    /* per group, lazily: the groups that are it shifted */
    int rc;                     /* the first error of the world's collectives */
    struct dt_error *err;
};

/* Whether group g of a one-replica plan is a tensor group the closed form covers: more than
 * one member, all in the T ranks of one stage (rank s T + k), on one node whose devices
 * have links of their own (a shared bus would be shared with the node's other groups). */
static bool tensor_group(const struct dt_plan *plan, int g, int T)
{
    const struct dt_group *grp = &plan->groups[g];
    const struct dt_topology *topo = plan->topo;
    int node = dt_topology_node_of(topo, grp->ranks[0]);
    if (grp->n < 2 || dt_topology_group_of_node(topo, node)->intra.sharing == DT_LINK_SHARED)
        return false;
    for (int i = 0; i < grp->n; i++)
        if (grp->ranks[i] / T != grp->ranks[0] / T ||
            dt_topology_node_of(topo, grp->ranks[i]) != node)
            return false;
    return true;
}

/* Whether a group has members of different tensor ranks k (rank s T + k). */
static bool across_tensor_ranks(const struct dt_group *grp, int T)
{
    for (int i = 1; i < grp->n; i++)
        if (grp->ranks[i] % T != grp->ranks[0] % T)
            return true;
    return false;
}

/* Member 0's rounds of the collective (libdt/collective.c, as the player plays them), each
 * its latency plus its largest transfer at the device link's bandwidth, then the device's
 * sum of what it received: the player's time when nothing else uses those links and every
 * member starts together. -1 when the schedule cannot be built. */
static double coll_closed_form(const struct dt_cost_params *cp, const struct dt_node_group *ng,
                               const struct dt_op *op, int n, double elem_bytes)
{
    double bw = cp->intra_bw_Bps > 0 ? cp->intra_bw_Bps : ng->intra.bw_Bps;
    double lat = cp->intra_lat_s > 0 ? cp->intra_lat_s : ng->intra.lat_s;
    struct dt_schedule sch;
    struct dt_error err;
    dt_schedule_init(&sch);
    double t = -1;
    if (dt_coll_schedule(op->coll, op->alg, n, 0, op->root, op->region.count, &sch, &err) == 0) {
        t = 0;
        for (int r = 0; r < sch.n_rounds; r++) {
            long widest = 0, summed = 0;
            int lo, hi;
            dt_schedule_round(&sch, r, &lo, &hi);
            for (int i = lo; i < hi; i++) {
                const struct dt_xfer *x = &sch.xfers[i];
                widest = x->count > widest ? x->count : widest;
                summed += x->sum ? x->count : 0;
            }
            t += lat + elem_bytes * (double)widest / bw;
            if (summed > 0)
                t += dt_cost_reduce(cp, &ng->device, summed, elem_bytes);
        }
    }
    dt_schedule_free(&sch);
    return t;
}

/* The groups of plan that are group g shifted by k ranks (k > 0: each ranks[i] + k): those
 * run g's collectives at the same time (the data-parallel groups of other tensor ranks). */
static int find_shifts(const struct dt_plan *plan, int g, int **out, int *n)
{
    const struct dt_group *a = &plan->groups[g];
    *n = 0;
    *out = malloc((size_t)plan->n_groups * sizeof **out);
    if (!*out)
        return DT_ENOMEM;
    for (int h = 0; h < plan->n_groups; h++) {
        const struct dt_group *b = &plan->groups[h];
        int k = b->n == a->n ? b->ranks[0] - a->ranks[0] : 0;
        bool same = k > 0;
        for (int i = 1; i < a->n && same; i++)
            same = b->ranks[i] - a->ranks[i] == k;
        if (same)
            (*out)[(*n)++] = k;
    }
    return DT_OK;
}

/* A collective outside the tensor groups in the data-parallel mode (symround.h). */
static double world_coll_s(struct closed *c, int rank, const struct dt_op *op, double elem,
                           double *busy)
{
    int g = op->group;
    if (!c->shifts[g] && find_shifts(c->plan, g, &c->shifts[g], &c->n_shifts[g]))
        c->rc = dt_fail(c->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    double s = 0;
    if (!c->rc)
        c->rc = dt_symround_time(c->world, c->plan, op, c->shifts[g], c->n_shifts[g], elem,
                                 &c->cpr[rank], &dt_topology_group_of_rank(c->plan->topo, rank)
                                                      ->device, &s, busy, c->err);
    return s;
}

/* The tensor groups' collectives keep their links busy throughout (as blocking ones). */
static double closed_coll_s(void *ctx, int rank, const struct dt_op *op, double *busy)
{
    struct closed *c = ctx;
    if (!c->tensor[op->group] && c->world)
        return world_coll_s(c, rank, op,
                            (double)dt_dtype_size(dt_plan_region_dtype(c->plan, rank, &op->region)),
                            busy);
    if (!c->tensor[op->group])
        return -1;
    int n = c->plan->groups[op->group].n;
    double elem = (double)dt_dtype_size(dt_plan_region_dtype(c->plan, rank, &op->region));
    const struct dt_node_group *ng = dt_topology_group_of_rank(c->plan->topo, rank);
    for (int i = 0; i < c->n_memo && i < 8; i++) {
        const struct memo *m = &c->memo[i];
        if (m->ng == ng && m->coll == op->coll && m->alg == op->alg && m->n == n &&
            m->count == op->region.count && m->elem_bytes == elem)
            return *busy = m->s;
    }
    double s = coll_closed_form(&c->cpr[rank], ng, op, n, elem);
    c->memo[c->n_memo++ % 8] = (struct memo){ng, op->coll, op->alg, n, op->region.count, elem, s};
    return *busy = s;
}

/* res's entries of the played ranks only, in order (the others ran nothing). */
static void keep_played(struct dt_sim_result *res, const bool *played)
{
    int k = 0;
    for (int r = 0; r < res->n_ranks; r++)
        if (played[r])
            res->rank[k++] = res->rank[r];
    res->n_ranks = k;
}

static void free_closed(struct closed *c)
{
    for (int g = 0; c->shifts && g < c->plan->n_groups; g++)
        free(c->shifts[g]);
    free(c->shifts);
    free(c->n_shifts);
    free(c->tensor);
    free(c->cpr);
}

/* Plays plan with tensor symmetry and, when world is given, every other collective from its
 * rounds on the fabric and rank 0 alone. */
static int play(const struct dt_plan *plan, const struct dt_cost_params *group_cp,
                const struct dt_cost_params *closed_cp, struct dt_symround *world,
                struct dt_step *out, struct dt_error *err)
{
    int T = plan->opt.tp > 1 ? plan->opt.tp : 1;
    struct closed c = {.plan = plan, .world = world, .err = err};
    bool *played = malloc((size_t)plan->n_ranks * sizeof *played);
    c.tensor = calloc((size_t)plan->n_groups + 1, sizeof *c.tensor);
    c.cpr = dt_cost_rank_params(&closed_cp[0], closed_cp, plan->topo, plan->n_ranks);
    if (world) {
        c.shifts = calloc((size_t)plan->n_groups + 1, sizeof *c.shifts);
        c.n_shifts = calloc((size_t)plan->n_groups + 1, sizeof *c.n_shifts);
    }
    int rc = played && c.tensor && c.cpr && (!world || (c.shifts && c.n_shifts))
                 ? DT_OK : dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    bool all = false; /* a collective between tensor ranks is simulated: every rank plays */
    for (int g = 0; g < plan->n_groups && !rc; g++) {
        c.tensor[g] = T > 1 && tensor_group(plan, g, T);
        all |= !world && !c.tensor[g] && across_tensor_ranks(&plan->groups[g], T);
    }
    for (int r = 0; r < plan->n_ranks && !rc; r++)
        played[r] = world ? r == 0 : all || r % T == 0;
    struct dt_sim_options so = {.group_cp = group_cp, .closed_coll_s = closed_coll_s,
                                .closed_ctx = &c, .played = played};
    struct dt_sim_result res;
    if (!rc)
        rc = dt_sim_run(plan, &group_cp[0], &so, &res, err);
    if (!rc && c.rc) {
        dt_sim_result_free(&res);
        rc = c.rc;
    }
    if (!rc) {
        keep_played(&res, played);
        dt_step_fill(&res, dt_step_read_s(plan, &group_cp[0]), out);
        dt_sim_result_free(&res);
    }
    free(played);
    free_closed(&c);
    return rc;
}

int dt_sym_replica_step(const struct dt_plan *plan, const struct dt_cost_params *group_cp,
                        const struct dt_cost_params *closed_cp, struct dt_step *out,
                        struct dt_error *err)
{
    return play(plan, group_cp, closed_cp, NULL, out, err);
}

int dt_sym_dp_step(const struct dt_plan *plan, const struct dt_cost_params *group_cp,
                   struct dt_symround *world, struct dt_step *out, struct dt_error *err)
{
    return play(plan, group_cp, group_cp, world, out, err);
}

/* A replica's simulation: its step and largest stage's gradient bytes. */
struct dt_sym_replica {
    struct dt_plan_options key;
    struct dt_step st;
    double grads;
};

void dt_sym_cache_free(struct dt_sym_cache *c)
{
    free(c->e);
    dt_symround_destroy(c->world);
    *c = (struct dt_sym_cache){0};
}

/* Field by field (padding is unspecified): the options two replica plans are built from. */
static bool same_options(const struct dt_plan_options *a, const struct dt_plan_options *b)
{
    bool same = a->strategy == b->strategy && a->scaling == b->scaling &&
                a->batch == b->batch && a->bucket_bytes == b->bucket_bytes &&
                a->n_ranks == b->n_ranks && a->accumulate == b->accumulate && a->dp == b->dp &&
                a->pp == b->pp && a->chunks == b->chunks && a->micro_batches == b->micro_batches &&
                a->grad_alg == b->grad_alg && a->grad_alg_given == b->grad_alg_given &&
                a->n_stage_cuts == b->n_stage_cuts && a->optimizer == b->optimizer &&
                a->tp == b->tp && a->zero == b->zero &&
                a->sequence_parallel == b->sequence_parallel && a->recompute == b->recompute &&
                a->precision == b->precision;
    for (int i = 0; same && i < a->n_stage_cuts; i++)
        same = a->stage_cuts[i] == b->stage_cuts[i];
    return same;
}

/* Whether play() plays tensor rank 0 of each stage alone: every group across tensor ranks is
 * a tensor group the closed form covers. */
static bool plays_tensor_rank_0(const struct dt_plan *plan, int T)
{
    for (int g = 0; g < plan->n_groups; g++)
        if (!tensor_group(plan, g, T) && across_tensor_ranks(&plan->groups[g], T))
            return false;
    return true;
}

/* The replica's plan: where only tensor rank 0 of each stage is played, a probe that builds
 * those alone (the others run the same emission: probe_tensor.c), else the whole plan. */
static int replica_plan(const struct dt_model *m, const struct dt_topology *topo,
                        const struct dt_plan_options *one, struct dt_plan **plan,
                        struct dt_error *err)
{
    if (one->tp <= 1)
        return dt_plan_build(m, topo, one, plan, err);
    int rc = dt_plan_probe(m, topo, one, plan, err);
    if (rc || ((*plan)->probe_tensor > 1 && plays_tensor_rank_0(*plan, one->tp)))
        return rc;
    dt_plan_destroy(*plan);
    return dt_plan_build(m, topo, one, plan, err);
}

/* The replica of options one simulated (through the cache when there is one). */
static int replica(const struct dt_model *m, const struct dt_topology *topo,
                   const struct dt_cost_params *group_cp, const struct dt_plan_options *one,
                   struct dt_sym_cache *cache, struct dt_sym_replica *out, struct dt_error *err)
{
    for (int i = 0; cache && i < cache->n; i++)
        if (same_options(&cache->e[i].key, one)) {
            *out = cache->e[i];
            return DT_OK;
        }
    struct dt_plan *plan;
    int rc = replica_plan(m, topo, one, &plan, err);
    if (rc)
        return rc;
    struct dt_memory peak;
    dt_plan_peak_memory(plan, &peak);
    *out = (struct dt_sym_replica){.key = *one, .grads = peak.grads};
    rc = dt_sym_replica_step(plan, group_cp, group_cp, &out->st, err);
    dt_plan_destroy(plan);
    if (rc || !cache)
        return rc;
    if (cache->n == cache->cap) {
        int cap = cache->cap ? 2 * cache->cap : 64;
        struct dt_sym_replica *e = realloc(cache->e, (size_t)cap * sizeof *e);
        if (!e)
            return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        cache->e = e;
        cache->cap = cap;
    }
    cache->e[cache->n++] = *out;
    return DT_OK;
}

int dt_sym_estimate(const struct dt_model *m, const struct dt_topology *topo,
                    const struct dt_cost_params *group_cp, const struct dt_plan_options *o,
                    struct dt_sym_cache *cache, struct dt_sym_result *out,
                    struct dt_error *err)
{
    int T, S, D;
    dt_plan_shape(o, topo, &T, &S, &D);
    struct dt_plan_options one = *o;
    one.dp = 1;
    one.n_ranks = 0;
    one.zero = 0; /* one replica shards nothing; ZeRO-1's exchange is the allreduce below */
    one.batch = (int)(o->batch / D); /* strong scaling: this replica's share of the step */
    struct dt_sym_replica r;
    int rc = replica(m, topo, group_cp, &one, cache, &r, err);
    if (!rc) {
        double allreduce = dt_sym_allreduce_s(topo, D, T, r.grads);
        *out = (struct dt_sym_result){.iter_s = fmax(r.st.sim_s + allreduce, r.st.read_s),
                                      .compute_s = r.st.compute_s,
                                      .comm_s = r.st.comm_s + allreduce, .idle_s = r.st.idle_s,
                                      .allreduce_s = allreduce};
    }
    return rc;
}

int dt_sym_dp_estimate(const struct dt_model *m, const struct dt_topology *topo,
                       const struct dt_cost_params *group_cp, const struct dt_plan_options *o,
                       const struct dt_plan *probe, struct dt_sym_cache *cache,
                       struct dt_sym_result *out, struct dt_error *err)
{
    struct dt_symround *own = NULL, *world = cache ? cache->world : NULL;
    int rc = world ? DT_OK : dt_symround_create(topo, &group_cp[0], &world, err);
    if (rc)
        return rc;
    if (cache)
        cache->world = world;
    else
        own = world;
    struct dt_plan *plan = NULL; /* rank 0 is all the estimate plays: a probe has its ops */
    rc = probe ? DT_OK : dt_plan_probe(m, topo, o, &plan, err);
    struct dt_step st;
    if (!rc) {
        rc = dt_sym_dp_step(probe ? probe : plan, group_cp, world, &st, err);
        dt_plan_destroy(plan);
    }
    if (!rc)
        *out = (struct dt_sym_result){.iter_s = st.iter_s, .compute_s = st.compute_s,
                                      .comm_s = st.comm_s, .idle_s = st.idle_s};
    dt_symround_destroy(own);
    return rc;
}
