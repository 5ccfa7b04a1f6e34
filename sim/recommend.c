/* dtsim --recommend (see recommend.h for the search and its exact pruning). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bound.h"
#include "dt/table.h"
#include "epoch.h"
#include "recommend.h"
#include "symmetry.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

/* What a process learns about one candidate; summed over processes (each candidate's values
 * come from exactly one), so every field is a double. */
enum { V_STATUS, V_MEM, V_BOUND, V_ITER, V_COMPUTE, V_COMM, V_IDLE, V_ESTIMATE, V_COUNT };
/* V_STATUS - 1 once evaluated; 0: not (pruned). ST_OVER_BY_PLAN: over the memory limit by
 * its floor plan (dt_plan_floor), not compiled; V_MEM is the floor plan's. */
enum { ST_REFUSED, ST_OVER_MEMORY, ST_FITS, ST_OVER_BY_PLAN };
/* Decided before any compile, by every process alike (V_STATUS < 0, never combined): refused
 * by its strategy, or over the memory limit by its memory floor (bound.h). */
#define ST_NOT_APPLICABLE (-1)
#define ST_OVER_BY_BOUND (-2)

/* Candidates compiled per round of the search, whatever the number of processes (so that
 * which are pruned, and the counts printed, do not depend on it). */
#define ROUND 8

struct candidate {
    struct dt_plan_options opt;
    int family;
    char why[256];           /* the strategy's refusal (fits), when refused */
    double v[V_COUNT];
};

struct search {
    const struct dt_rec_request *rq;
    struct candidate *c;
    int n, cap;
    int n_families;
    char families[512][48];
    struct dt_rec_bound_cache bounds;
    struct dt_sym_cache replicas; /* the symmetric estimates' replica simulations */
    bool prec_searched[DT_PREC_COUNT];
};

static int family_of(struct search *s, const struct dt_plan_options *o)
{
    char name[48];
    snprintf(name, sizeof name, "%s%s", dt_strategy_name(o->strategy), o->tp > 1 ? " + tp" : "");
    if (o->zero)
        snprintf(name + strlen(name), sizeof name - strlen(name), " + zero-%d", o->zero);
    for (int f = 0; f < s->n_families; f++)
        if (strcmp(s->families[f], name) == 0)
            return f;
    if (s->n_families == 512)
        return 511;
    snprintf(s->families[s->n_families], sizeof s->families[0], "%s", name);
    return s->n_families++;
}

static int add(struct search *s, const struct dt_plan_options *o)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        struct candidate *c = realloc(s->c, (size_t)cap * sizeof *c);
        if (!c)
            return -1;
        s->c = c;
        s->cap = cap;
    }
    struct candidate *c = &s->c[s->n++];
    memset(c, 0, sizeof *c);
    c->opt = *o;
    c->family = family_of(s, o);
    const struct dt_rec_request *rq = s->rq;
    if (!dt_strategy_fits_options(o, rq->model, rq->topo, dt_plan_ranks(o, rq->topo), c->why,
                                  sizeof c->why)) {
        c->v[V_STATUS] = ST_NOT_APPLICABLE;
        return 0;
    }
    c->v[V_MEM] = rq->memory_limit > 0 ? dt_rec_memory_floor(rq->model, rq->topo, o, &s->bounds)
                                        : 0;
    if (c->v[V_MEM] < 0)
        return -1;
    if (rq->memory_limit > 0 && c->v[V_MEM] > rq->memory_limit) {
        c->v[V_STATUS] = ST_OVER_BY_BOUND;
        return 0;
    }
    c->v[V_MEM] = 0;
    double compute = dt_rec_bound(rq->model, rq->topo, rq->group_cp, o, rq->global_batch,
                                  &s->bounds);
    if (compute < 0)
        return -1;
    c->v[V_BOUND] = dt_rec_total_bound(
        compute, dt_rec_comm_bound(rq->model, rq->topo, rq->group_cp, o), o, rq->topo);
    return 0;
}

/* The knobs of the data-parallel family at one tensor width: accumulation, buckets. */
static int add_data_parallel(struct search *s, struct dt_plan_options o, int dp)
{
    for (int k = 1; k <= 8; k *= 2) {
        if (s->rq->global_batch < (long)dp * k)
            break;
        o.accumulate = k;
        for (int b = 0; b < 2; b++) {
            o.bucket_bytes = b ? 25.0 * 1024 * 1024 : 0;
            if (add(s, &o))
                return -1;
        }
    }
    return 0;
}

/* The knobs of a pipeline at one tensor width: stages, micro-batches, chunks. */
static int add_pipeline(struct search *s, struct dt_plan_options o, int ranks)
{
    int max_stages = s->rq->model->n_layers < 64 ? s->rq->model->n_layers : 64;
    for (int pp = 2; pp <= ranks && pp <= max_stages; pp++) {
        if (ranks % pp)
            continue;
        o.pp = pp;
        o.dp = ranks / pp;
        long per_replica = s->rq->global_batch / o.dp;
        int m_lo = o.strategy == DT_STRAT_NAIVE_MP ? 1 : pp;
        int m_hi = o.strategy == DT_STRAT_NAIVE_MP ? 1 : 8 * pp;
        for (int m = m_lo; m <= m_hi && m <= per_replica; m *= 2) {
            o.micro_batches = m;
            int chunk_lo = o.strategy == DT_STRAT_INTERLEAVED ? 2 : 0;
            int chunk_hi = o.strategy == DT_STRAT_INTERLEAVED ? 4 : 0;
            for (int v = chunk_lo; v <= chunk_hi; v = v ? 2 * v : 1) {
                o.chunks = v;
                if (add(s, &o))
                    return -1;
                if (!v)
                    break;
            }
        }
    }
    return 0;
}

/* Every strategy x tensor width x ZeRO x recompute at one precision. */
static int enumerate_at(struct search *s, enum dt_precision prec)
{
    const struct dt_rec_request *rq = s->rq;
    int n = rq->topo->n_ranks, ppn = rq->topo->groups[0].devices;
    for (int st = 0; st < DT_STRAT_COUNT; st++) {
        const struct dt_strategy_info *info = dt_strategy_info((enum dt_strategy)st);
        if ((st == DT_STRAT_SEQUENTIAL) != (n == 1))
            continue;
        for (int tp = 1; tp <= ppn && tp <= n; tp *= 2) {
            if (n % tp)
                continue;
            for (int zero = 0; zero <= 3; zero++)
                for (int rc = 0; rc < DT_RECOMPUTE_COUNT; rc++) {
                    struct dt_plan_options o = rq->base;
                    o.strategy = (enum dt_strategy)st;
                    o.scaling = DT_SCALING_STRONG;
                    o.batch = (int)rq->global_batch;
                    o.tp = tp > 1 ? tp : 0;
                    o.zero = zero;
                    o.recompute = (enum dt_recompute)rc;
                    o.precision = prec;
                    int err = info->pipeline ? add_pipeline(s, o, n / tp)
                                             : add_data_parallel(s, o, n / tp);
                    if (err)
                        return -1;
                }
        }
    }
    return 0;
}

/* Whether precision p can keep the gradients --grad-precision asks for (fp32, or p's own
 * 16-bit storage). */
static bool keeps_grads(const struct dt_rec_request *rq, enum dt_precision p)
{
    struct dt_plan_options o = rq->base;
    o.precision = p;
    char why[256];
    return dt_plan_grad_dtype_fits(&o, why, sizeof why);
}

/* The precisions searched: the one the user gave, else each the devices have a peak for
 * (fp64 aside: no one trains in it) that keeps the gradients' dtype. Returns how many. */
static int precisions(struct search *s)
{
    const struct dt_rec_request *rq = s->rq;
    const enum dt_precision all[] = {DT_FP32, DT_TF32, DT_BF16, DT_FP16, DT_FP8};
    int n = 0;
    for (int i = 0; i < 5; i++) {
        bool has = rq->precision_given ? all[i] == rq->base.precision : keeps_grads(rq, all[i]);
        for (int g = 0; g < rq->topo->n_groups && has; g++)
            has = rq->topo->groups[g].device.peak_flops[all[i]] > 0 || all[i] == DT_FP32;
        s->prec_searched[all[i]] = has;
        n += has;
    }
    return n;
}

/* Every candidate, in an order that depends only on the inputs. Returns 1 when no precision
 * the devices have keeps the gradients --grad-precision asks for. */
static int enumerate(struct search *s)
{
    if (!precisions(s))
        return 1;
    for (int p = 0; p < DT_PREC_COUNT; p++)
        if (s->prec_searched[p] && enumerate_at(s, (enum dt_precision)p))
            return -1;
    return 0;
}

/* Each layer's compute ops costed once per device group while they repeat (the same op
 * every micro-batch but for where in the step it runs: dt_op_same_cost). A cost reads the
 * group's parameters and device, not the rank. Each layer, phase and re-run has OC_WAYS
 * entries: a step alternates a layer's forward and its re-run, and micro-batches of two
 * sizes where the batch does not split evenly. */
#define OC_WAYS 2
struct op_costs {
    const struct dt_op **last; /* per layer, phase, re-run and way: the op costed */
    int *group;                /* ... in this group (+1; 0: none yet) */
    double *cost;
    int n;
};

static double op_cost(struct op_costs *oc, int g, const struct dt_cost_params *cp,
                      const struct dt_device_spec *dev, const struct dt_model *m,
                      const struct dt_op *op)
{
    int at = OC_WAYS * (4 * op->layer + 2 * (op->phase == DT_PH_BACKWARD) + op->recompute);
    if (op->kind != DT_OP_COMPUTE || op->layer < 0 || at >= oc->n)
        return dt_cost_op(cp, dev, m, op);
    for (int w = at; w < at + OC_WAYS; w++)
        if (oc->group[w] == g + 1 && dt_op_same_cost(oc->last[w], op))
            return oc->cost[w];
    /* the first way is the newest: the older ones move down */
    memmove(&oc->last[at + 1], &oc->last[at], (OC_WAYS - 1) * sizeof *oc->last);
    memmove(&oc->group[at + 1], &oc->group[at], (OC_WAYS - 1) * sizeof *oc->group);
    memmove(&oc->cost[at + 1], &oc->cost[at], (OC_WAYS - 1) * sizeof *oc->cost);
    oc->group[at] = g + 1;
    oc->last[at] = op;
    oc->cost[at] = dt_cost_op(cp, dev, m, op);
    return oc->cost[at];
}

/* The busiest rank's local ops alone: a lower bound of the iteration the player computes
 * (it charges these same costs, at shared rates no faster, one op at a time per rank).
 * dt_cost_op is 0 for communication ops: the network's, not the device's. */
static double compute_bound(const struct dt_plan *plan, const struct dt_cost_params *group_cp)
{
    double worst = 0;
    int n = 4 * OC_WAYS * plan->model->n_layers;
    struct op_costs oc = {malloc((size_t)n * sizeof *oc.last), calloc((size_t)n, sizeof *oc.group),
                          malloc((size_t)n * sizeof *oc.cost), 0};
    oc.n = oc.last && oc.group && oc.cost ? n : 0; /* without memory: every op costed */
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_node_group *g = dt_topology_group_of_rank(plan->topo, r);
        const struct dt_device_spec *dev = &g->device;
        int gi = (int)(g - plan->topo->groups);
        const struct dt_cost_params *cp = &group_cp[gi];
        double t = 0;
        for (int i = 0; i < plan->ranks[r].n_ops; i++)
            t += op_cost(&oc, gi, cp, dev, plan->model, &plan->ranks[r].ops[i]);
        worst = t > worst ? t : worst;
    }
    free(oc.last);
    free(oc.group);
    free(oc.cost);
    return worst;
}

/* A lower bound of a fitting candidate's iteration from its compiled probe: the busiest
 * rank's compute with the communication bound (bound.h). The symmetric estimate simulates
 * one replica of the floor share of the batch: where the probe's first replica has more
 * rows, the analytic bound (which counts the floor share) instead. */
static double compiled_bound(const struct search *s, const struct candidate *c,
                             const struct dt_plan *plan)
{
    const struct dt_rec_request *rq = s->rq;
    int T, S, D;
    dt_plan_shape(&c->opt, rq->topo, &T, &S, &D);
    if (dt_sym_used(&c->opt, rq->topo) && rq->global_batch % D)
        return c->v[V_BOUND];
    double comm = dt_rec_comm_bound(rq->model, rq->topo, rq->group_cp, &c->opt);
    return dt_rec_total_bound(compute_bound(plan, rq->group_cp), comm, &c->opt, rq->topo);
}

/* A pipeline's floor plan (dt_plan_floor) against the memory limit, before its probe is
 * compiled: over it, the candidate is over the limit (ST_OVER_BY_PLAN) and *over is set. A
 * floor plan that does not compile decides nothing (the probe then says why). */
static int floor_plan(const struct search *s, struct candidate *c, bool *over)
{
    const struct dt_rec_request *rq = s->rq;
    struct dt_plan *plan;
    struct dt_error err;
    *over = false;
    if (rq->memory_limit <= 0 || !dt_strategy_info(c->opt.strategy)->pipeline)
        return DT_OK;
    int rc = dt_plan_floor(rq->model, rq->topo, &c->opt, &plan, &err);
    if (rc)
        return rc == DT_ENOMEM ? rc : DT_OK;
    struct dt_memory floor;
    dt_plan_peak_memory(plan, &floor);
    dt_plan_destroy(plan);
    *over = floor.total > rq->memory_limit;
    if (*over) {
        c->v[V_MEM] = floor.total;
        c->v[V_STATUS] = 1 + ST_OVER_BY_PLAN;
    }
    return DT_OK;
}

/* Compiles a candidate's probe: its largest rank's memory and (*bound) compiled bound, where
 * it can prune (nth finite; else 0); the probe in *keep when keep is given and the candidate
 * fits (else destroyed). */
static int compile_probe(const struct search *s, struct candidate *c, double nth, double *bound,
                         struct dt_plan **keep, struct dt_error *err)
{
    struct dt_plan *plan; /* the first and last replicas: the middle ones repeat them */
    int rc = dt_plan_probe(s->rq->model, s->rq->topo, &c->opt, &plan, err);
    if (rc == DT_EINPUT) { /* a combination the strategy's fits() let through */
        c->v[V_STATUS] = 1 + ST_REFUSED;
        return DT_OK;
    }
    if (rc)
        return rc;
    struct dt_memory peak;
    dt_plan_peak_memory(plan, &peak);
    c->v[V_MEM] = peak.total;
    bool over = s->rq->memory_limit > 0 && peak.total > s->rq->memory_limit;
    c->v[V_STATUS] = 1 + (over ? ST_OVER_MEMORY : ST_FITS);
    bool prunes = isfinite(nth) && !s->rq->no_prune;
    *bound = over || !prunes ? 0 : compiled_bound(s, c, plan);
    if (keep && !over)
        *keep = plan;
    else
        dt_plan_destroy(plan);
    return DT_OK;
}

/* A candidate's memory: over the limit by its floor plan, else by its compiled probe (with
 * *bound, its compiled bound; *probe: the probe of one that fits, for its estimate). */
static int measure(const struct search *s, struct candidate *c, double nth, double *bound,
                   struct dt_plan **probe, struct dt_error *err)
{
    bool over;
    int rc = floor_plan(s, c, &over);
    if (rc)
        return dt_fail(err, rc, NULL, 0, 0, "out of memory");
    return over ? DT_OK : compile_probe(s, c, nth, bound, probe, err);
}

/* The symmetric estimate (symmetry.h) of a large pipeline (V_ESTIMATE 1) or data-parallel
 * strategy (2; from the candidate's probe, which it plays). */
static int estimate(struct search *s, struct candidate *c, bool dp, const struct dt_plan *probe,
                    struct dt_error *err)
{
    struct dt_sym_result r;
    const struct dt_rec_request *rq = s->rq;
    int rc = dp ? dt_sym_dp_estimate(rq->model, rq->topo, rq->group_cp, &c->opt, probe,
                                     &s->replicas, &r, err)
                : dt_sym_estimate(rq->model, rq->topo, rq->group_cp, &c->opt, &s->replicas, &r,
                                  err);
    if (!rc) {
        c->v[V_ITER] = r.iter_s;
        c->v[V_COMPUTE] = r.compute_s;
        c->v[V_COMM] = r.comm_s;
        c->v[V_IDLE] = r.idle_s;
        c->v[V_ESTIMATE] = dp ? 2 : 1;
    }
    return rc;
}

static int simulate(struct search *s, struct candidate *c, const struct dt_plan *probe,
                    struct dt_error *err)
{
    if (dt_sym_used(&c->opt, s->rq->topo) || dt_sym_dp_used(&c->opt, s->rq->topo))
        return estimate(s, c, !dt_sym_used(&c->opt, s->rq->topo), probe, err);
    struct dt_plan *plan;
    int rc = dt_plan_build(s->rq->model, s->rq->topo, &c->opt, &plan, err);
    if (rc)
        return rc;
    struct dt_step st;
    rc = dt_step_simulate(plan, s->rq->group_cp, &st, err);
    if (!rc) {
        c->v[V_ITER] = st.iter_s; /* as dtsim's rows: the slower of the devices and the loader */
        c->v[V_COMPUTE] = st.compute_s;
        c->v[V_COMM] = st.comm_s;
        c->v[V_IDLE] = st.idle_s;
    }
    dt_plan_destroy(plan);
    return rc;
}

static bool fits(const struct candidate *c) { return c->v[V_STATUS] == 1 + ST_FITS; }
static bool pruned(const struct candidate *c) { return c->v[V_STATUS] == 0; }
static bool over_memory(const struct candidate *c)
{
    return c->v[V_STATUS] == 1 + ST_OVER_MEMORY || c->v[V_STATUS] == ST_OVER_BY_BOUND ||
           c->v[V_STATUS] == 1 + ST_OVER_BY_PLAN;
}
static bool not_applicable(const struct candidate *c)
{
    return c->v[V_STATUS] == ST_NOT_APPLICABLE || c->v[V_STATUS] == 1 + ST_REFUSED;
}
static bool simulated(const struct candidate *c) { return c->v[V_ITER] > 0; }

static bool mine(const struct search *s, int i) { return i % s->rq->parts == s->rq->part; }

/* Gives every process the values of every candidate: each contributes those it evaluated
 * (zeros elsewhere) and the sums are taken. Refusals (status -1) are known to all already. */
static int combine(struct search *s)
{
    if (s->rq->parts <= 1)
        return 0;
    double *v = calloc((size_t)s->n * V_COUNT, sizeof *v);
    if (!v)
        return -1;
    for (int i = 0; i < s->n; i++)
        if (mine(s, i) && s->c[i].v[V_STATUS] >= 0)
            memcpy(&v[(size_t)i * V_COUNT], s->c[i].v, sizeof s->c[i].v);
    int rc = s->rq->combine(v, (long)s->n * V_COUNT);
    for (int i = 0; i < s->n && !rc; i++)
        if (s->c[i].v[V_STATUS] >= 0)
            memcpy(s->c[i].v, &v[(size_t)i * V_COUNT], sizeof s->c[i].v);
    free(v);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The N-th best iteration among the simulated candidates (infinity with fewer). */
static double nth_best(const struct search *s, int top)
{
    double *t = malloc((size_t)s->n * sizeof *t);
    int k = 0;
    if (!t)
        return INFINITY;
    for (int i = 0; i < s->n; i++)
        if (simulated(&s->c[i]))
            t[k++] = s->c[i].v[V_ITER];
    qsort(t, (size_t)k, sizeof *t, cmp_double);
    double u = k >= top ? t[top - 1] : INFINITY;
    free(t);
    return u;
}

/* Compiles one candidate and simulates it when it fits and its compiled compute bound does
 * not rule it out against the N-th best so far. */
static int evaluate_one(struct search *s, struct candidate *c, double nth,
                        struct dt_error *err)
{
    double bound = 0;
    struct dt_plan *probe = NULL; /* kept for a data-parallel estimate, which plays it */
    bool dp_estimate = !dt_sym_used(&c->opt, s->rq->topo) && dt_sym_dp_used(&c->opt, s->rq->topo);
    int rc = measure(s, c, nth, &bound, dp_estimate ? &probe : NULL, err);
    if (!rc && fits(c) && !(bound > nth && !s->rq->no_prune))
        rc = simulate(s, c, probe, err);
    dt_plan_destroy(probe);
    return rc;
}

/* A candidate's index under a key: the search's orders (ties: enumeration order). */
struct keyed {
    double key;
    int index;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->index - y->index;
}

/* Branch and bound: the candidates in the order of their lower bound (bound.h), ROUND at a
 * time (split over the processes, then combined), until the next bound exceeds the N-th
 * best iteration found: none of the rest can enter the table, and they are not compiled.
 * Rounds are the same for any number of processes, so the table and the counts are too.
 * *n_simulated counts the simulations (all processes). */
static int evaluate(struct search *s, int *n_simulated, struct dt_error *err)
{
    struct keyed *order = malloc((size_t)(s->n + 1) * sizeof *order);
    int k = 0, rc = 0;
    if (!order)
        return -1;
    for (int i = 0; i < s->n; i++)
        if (s->c[i].v[V_STATUS] == 0)
            order[k++] = (struct keyed){s->c[i].v[V_BOUND], i};
    qsort(order, (size_t)k, sizeof *order, cmp_keyed);
    double nth = INFINITY;
    bool all = s->rq->no_prune;
    for (int at = 0; at < k && !rc && (all || order[at].key <= nth);) {
        int end = at;
        while (end < k && end - at < ROUND && (all || order[end].key <= nth))
            end++;
        for (int j = at; j < end && !rc; j++)
            if (mine(s, order[j].index))
                rc = evaluate_one(s, &s->c[order[j].index], nth, err);
        if (!rc)
            rc = combine(s);
        nth = nth_best(s, s->rq->top);
        at = end;
    }
    free(order);
    *n_simulated = 0;
    for (int i = 0; i < s->n; i++)
        *n_simulated += simulated(&s->c[i]);
    return rc;
}

/* Indices of the simulated candidates, fastest first (ties: enumeration order). */
static int ranked(const struct search *s, int **out)
{
    struct keyed *b = malloc((size_t)(s->n + 1) * sizeof *b);
    int *idx = malloc((size_t)(s->n + 1) * sizeof *idx), k = 0;
    if (!b || !idx) {
        free(b);
        free(idx);
        return -1;
    }
    for (int i = 0; i < s->n; i++)
        if (simulated(&s->c[i]))
            b[k++] = (struct keyed){s->c[i].v[V_ITER], i};
    qsort(b, (size_t)k, sizeof *b, cmp_keyed);
    for (int j = 0; j < k; j++)
        idx[j] = b[j].index;
    free(b);
    *out = idx;
    return k;
}

/* One candidate's knobs as "dp=4 tp=2 pp=2 mb=8 ..." columns' values. */
static void config_cells(struct dt_table *t, const struct dt_plan_options *o, int n_ranks)
{
    int tp = o->tp > 1 ? o->tp : 1, pp = o->pp > 1 ? o->pp : 1;
    dt_table_cell(t, "%s", dt_strategy_name(o->strategy));
    dt_table_cell(t, "%d", n_ranks / (tp * pp));
    dt_table_cell(t, "%d", tp);
    dt_table_cell(t, "%d", pp);
    dt_table_cell(t, "%d", o->micro_batches ? o->micro_batches : o->accumulate);
    dt_table_cell(t, "%d", o->chunks ? o->chunks : 1);
    dt_table_cell(t, "%s", o->bucket_bytes > 0 ? "25 MiB" : "-");
    dt_table_cell(t, "%d", o->zero);
    dt_table_cell(t, "%s", dt_recompute_name(o->recompute));
    dt_table_cell(t, "%s", dt_precision_name(o->precision));
}

static double epoch_s(const struct dt_rec_request *rq, double iter_s)
{
    return (double)dt_epoch_iterations(rq->dataset_size, rq->global_batch) * iter_s;
}

static int print_top(const struct search *s, const int *idx, int k, FILE *out)
{
    const struct dt_rec_request *rq = s->rq;
    double price = dt_topology_price_per_h(rq->topo);
    const char *heads[] = {"rank", "strategy", "dp", "tp", "pp", "micro-batches", "chunks", "bucket",
                           "zero", "recompute", "precision", "iter (ms)", "epoch (s)",
                           "mem (MiB)", "$/epoch"};
    int ncols = price > 0 ? 15 : 14;
    struct dt_table *t = dt_table_new(ncols);
    if (!t)
        return -1;
    for (int c = 0; c < ncols; c++)
        dt_table_column(t, c, heads[c], c == 1 || c == 7 || c == 9 || c == 10);
    for (int j = 0; j < k && j < rq->top; j++) {
        const struct candidate *c = &s->c[idx[j]];
        dt_table_cell(t, "%d", j + 1);
        config_cells(t, &c->opt, rq->topo->n_ranks);
        dt_table_cell(t, "%.3f%s", c->v[V_ITER] * 1e3, c->v[V_ESTIMATE] > 0 ? "*" : "");
        dt_table_cell(t, "%.2f", epoch_s(rq, c->v[V_ITER]));
        dt_table_cell(t, "%.1f", c->v[V_MEM] / MIB);
        if (price > 0)
            dt_table_cell(t, "%.2f", price * epoch_s(rq, c->v[V_ITER]) / 3600);
    }
    int rc = dt_table_print(t, out);
    dt_table_destroy(t);
    return rc;
}

/* The term a family lost by against the winner: the largest growth of compute, exposed
 * communication or idle time (a pipeline's idle is its bubble; compute grows by recompute). */
static const char *losing_term(const struct candidate *c, const struct candidate *best,
                               double *by_s)
{
    double d[3] = {c->v[V_COMPUTE] - best->v[V_COMPUTE], c->v[V_COMM] - best->v[V_COMM],
                   c->v[V_IDLE] - best->v[V_IDLE]};
    int k = d[1] > d[0] ? 1 : 0;
    k = d[2] > d[k] ? 2 : k;
    *by_s = d[k];
    if (k == 0)
        return c->opt.recompute ? "compute incl. recompute" : "compute";
    if (k == 1)
        return "exposed communication";
    return dt_strategy_info(c->opt.strategy)->pipeline ? "bubble" : "waiting";
}

/* A family's first member its strategy refused (NULL: none). */
static struct candidate *first_refused(const struct search *s, int f)
{
    for (int i = 0; i < s->n; i++)
        if (s->c[i].family == f && not_applicable(&s->c[i]))
            return &s->c[i];
    return NULL;
}

/* Why a candidate does not apply: its strategy's refusal, else its compile's own message
 * (compiled again here: the process that compiled it may be another, and only numbers are
 * combined). */
static const char *refusal(const struct search *s, struct candidate *c)
{
    if (!c->why[0]) {
        struct dt_plan *plan = NULL;
        struct dt_error err = {0};
        if (dt_plan_probe(s->rq->model, s->rq->topo, &c->opt, &plan, &err) == DT_OK)
            dt_plan_destroy(plan);
        const char *head = "its plans could not be compiled: ";
        size_t n = strlen(head);
        memcpy(c->why, head, n);
        /* the message as far as it fits */
        snprintf(c->why + n, sizeof c->why - n, "%.*s", (int)(sizeof c->why - n - 1),
                 err.msg[0] ? err.msg : "no message");
    }
    return c->why;
}

/* The families that apply nowhere, a line per reason: "--tp is not implemented yet (16
 * families: ring + tp, ...)". */
static void print_refused(const struct search *s, const bool *applies, FILE *out)
{
    bool *done = calloc((size_t)s->n_families + 1, 1);
    if (!done)
        return;
    for (int f = 0; f < s->n_families; f++) {
        struct candidate *ref = first_refused(s, f);
        if (applies[f] || done[f] || !ref)
            continue;
        int count = 0;
        for (int g = f; g < s->n_families; g++) {
            struct candidate *rg = first_refused(s, g);
            if (!applies[g] && !done[g] && rg && strcmp(refusal(s, rg), refusal(s, ref)) == 0) {
                done[g] = true;
                count++;
            }
        }
        fprintf(out, "  not applicable (%d famil%s: %s%s): %s\n", count, count > 1 ? "ies" : "y",
                s->families[f], count > 1 ? ", ..." : "", refusal(s, ref));
    }
    free(done);
}

/* The pruned candidate of least lower bound among those `member` accepts (NULL: none). */
static const struct candidate *least_pruned(const struct search *s, int key,
                                            bool (*member)(const struct candidate *, int))
{
    const struct candidate *least = NULL;
    for (int i = 0; i < s->n; i++)
        if (pruned(&s->c[i]) && member(&s->c[i], key) &&
            (!least || s->c[i].v[V_BOUND] < least->v[V_BOUND]))
            least = &s->c[i];
    return least;
}

/* Why a group of candidates lost to rank 1: fb its best simulated (NULL: none), else its
 * least-bound pruned member, else its smallest over the memory limit. */
static void print_loss(const struct search *s, const struct candidate *best,
                       const struct candidate *fb, const struct candidate *least,
                       const struct candidate *smallest, FILE *out)
{
    if (fb == best) {
        fprintf(out, "rank 1\n");
    } else if (fb) {
        double by;
        const char *term = losing_term(fb, best, &by);
        fprintf(out, "slower by %.1f %% (%.3f ms more %s)\n",
                100 * (fb->v[V_ITER] / best->v[V_ITER] - 1), by * 1e3, term);
    } else if (least) {
        fprintf(out, "slower by at least %.1f %% (its least lower bound, %.3f ms, is "
                     "above the %d-th best: not compiled)\n",
                100 * (least->v[V_BOUND] / best->v[V_ITER] - 1), least->v[V_BOUND] * 1e3,
                s->rq->top);
    } else {
        bool least_mem = smallest->v[V_STATUS] == ST_OVER_BY_BOUND;
        fprintf(out, "does not fit: its smallest needs %s%.2f GiB per device, %s%.2f GiB over "
                     "the limit%s\n", least_mem ? "at least " : "", smallest->v[V_MEM] / GIB,
                least_mem ? "at least " : "", (smallest->v[V_MEM] - s->rq->memory_limit) / GIB,
                least_mem ? " (its lower bound: parameter states and kept activations)" : "");
    }
}

static bool in_family(const struct candidate *c, int f) { return c->family == f; }
static bool at_precision(const struct candidate *c, int p) { return (int)c->opt.precision == p; }

/* A line "label: why" for the candidates `member` accepts (print_loss: their best ranked,
 * else their least-bound pruned, else their smallest over the memory limit); false, and
 * nothing printed, when there is none of those. */
static bool print_group(const struct search *s, const int *idx, int k, int key,
                        bool (*member)(const struct candidate *, int), const char *label,
                        FILE *out)
{
    const struct candidate *fb = NULL, *smallest = NULL;
    for (int j = 0; j < k && !fb; j++)
        if (member(&s->c[idx[j]], key))
            fb = &s->c[idx[j]];
    for (int i = 0; i < s->n; i++)
        if (member(&s->c[i], key) && over_memory(&s->c[i]) &&
            (!smallest || s->c[i].v[V_MEM] < smallest->v[V_MEM]))
            smallest = &s->c[i];
    const struct candidate *least = least_pruned(s, key, member);
    if (!fb && !least && !smallest)
        return false;
    fprintf(out, "  %-28s ", label);
    print_loss(s, &s->c[idx[0]], fb, least, smallest, out);
    return true;
}

/* A line per precision searched (when more than one is): its best config, or why it lost. */
static void print_precisions(const struct search *s, const int *idx, int k, FILE *out)
{
    int searched = 0;
    for (int p = 0; p < DT_PREC_COUNT; p++)
        searched += s->prec_searched[p];
    if (searched < 2)
        return;
    fprintf(out, "\nPrecisions (best member against rank 1):\n");
    for (int p = 0; p < DT_PREC_COUNT; p++) {
        const char *name = dt_precision_name((enum dt_precision)p);
        if (s->prec_searched[p] && !print_group(s, idx, k, p, at_precision, name, out))
            fprintf(out, "  %-28s not applicable (no configuration compiles)\n", name);
    }
}

/* A line per family: its best config, or why none of it made the table. */
static void print_families(const struct search *s, const int *idx, int k, FILE *out)
{
    bool *applies = calloc((size_t)s->n_families + 1, 1);
    if (!applies)
        return;
    fprintf(out, "\nFamilies (best member against rank 1):\n");
    for (int f = 0; f < s->n_families; f++)
        applies[f] = print_group(s, idx, k, f, in_family, s->families[f], out);
    print_refused(s, applies, out);
    free(applies);
    print_precisions(s, idx, k, out);
}

/* The smallest over the memory limit of the candidates `member` accepts, where print_group
 * names it (none of them simulated or pruned); NULL otherwise. */
static struct candidate *smallest_over(struct search *s, int key,
                                       bool (*member)(const struct candidate *, int))
{
    struct candidate *smallest = NULL;
    for (int i = 0; i < s->n; i++) {
        struct candidate *c = &s->c[i];
        if (!member(c, key))
            continue;
        if (simulated(c) || pruned(c))
            return NULL;
        if (over_memory(c) && (!smallest || c->v[V_MEM] < smallest->v[V_MEM]))
            smallest = c;
    }
    return smallest;
}

/* Compiles a group's smallest over the limit while a floor plan sized it (no larger than its
 * probe): the line then names what it would name had every one been compiled. */
static int settle_group(struct search *s, int key, bool (*member)(const struct candidate *, int),
                        struct dt_error *err)
{
    struct candidate *c;
    double bound;
    int rc = DT_OK;
    while (!rc && (c = smallest_over(s, key, member)) && c->v[V_STATUS] == 1 + ST_OVER_BY_PLAN)
        rc = compile_probe(s, c, INFINITY, &bound, NULL, err); /* its memory alone */
    return rc;
}

/* settle_group for the families' lines and the precisions'. */
static int settle(struct search *s, struct dt_error *err)
{
    int rc = DT_OK;
    for (int f = 0; f < s->n_families && !rc; f++)
        rc = settle_group(s, f, in_family, err);
    for (int p = 0; p < DT_PREC_COUNT && !rc; p++)
        if (s->prec_searched[p])
            rc = settle_group(s, p, at_precision, err);
    return rc;
}

static void print_csv(const struct search *s, const int *idx, int k, FILE *out)
{
    const struct dt_rec_request *rq = s->rq;
    fprintf(out, "rank,strategy,dp,tp,pp,micro_batches,chunks,accumulate,bucket_B,zero,"
                 "recompute,iter_s,epoch_s,memory_B,compute_s,comm_s,idle_s,usd_per_epoch,"
                 "precision,estimate\n");
    double price = dt_topology_price_per_h(rq->topo);
    for (int j = 0; j < k && j < rq->top; j++) {
        const struct candidate *c = &s->c[idx[j]];
        const struct dt_plan_options *o = &c->opt;
        int tp = o->tp > 1 ? o->tp : 1, pp = o->pp > 1 ? o->pp : 1;
        fprintf(out, "%d,%s,%d,%d,%d,%d,%d,%d,%.0f,%d,%s,%.9g,%.9g,%.0f,%.9g,%.9g,%.9g,%.6g,%s,%d"
                     "\n",
                j + 1, dt_strategy_name(o->strategy), rq->topo->n_ranks / (tp * pp), tp, pp,
                o->micro_batches, o->chunks ? o->chunks : 1, o->accumulate, o->bucket_bytes,
                o->zero, dt_recompute_name(o->recompute), c->v[V_ITER],
                epoch_s(rq, c->v[V_ITER]), c->v[V_MEM], c->v[V_COMPUTE], c->v[V_COMM],
                c->v[V_IDLE], price * epoch_s(rq, c->v[V_ITER]) / 3600,
                dt_precision_name(o->precision), c->v[V_ESTIMATE] > 0);
    }
}

static void print_json(const struct search *s, const int *idx, int k, int n_fit, int n_sim,
                       int n_pruned, FILE *out)
{
    const struct dt_rec_request *rq = s->rq;
    fprintf(out, "{\n  \"model\": \"%s\", \"topology\": \"%s\", \"ranks\": %d, "
                 "\"global_batch\": %ld, \"memory_limit_B\": %.0f,\n  \"candidates\": %d, "
                 "\"fit\": %d, \"simulated\": %d, \"pruned\": %d,\n  \"recommendations\": [\n",
            rq->model->name, rq->topo->name, rq->topo->n_ranks, rq->global_batch,
            rq->memory_limit, s->n, n_fit, n_sim, n_pruned);
    int shown = k < rq->top ? k : rq->top;
    for (int j = 0; j < shown; j++) {
        const struct candidate *c = &s->c[idx[j]];
        char par[512];
        dt_parallel_format(&c->opt, par, sizeof par);
        fprintf(out, "    {\"rank\": %d, \"strategy\": \"%s\", \"parallel\": \"%s\", "
                     "\"bucket_B\": %.0f, \"iter_s\": %.9g, \"epoch_s\": %.9g, "
                     "\"memory_B\": %.0f, \"compute_s\": %.9g, \"comm_s\": %.9g, "
                     "\"idle_s\": %.9g, \"estimate\": %s}%s\n",
                j + 1, dt_strategy_name(c->opt.strategy), par, c->opt.bucket_bytes,
                c->v[V_ITER], epoch_s(rq, c->v[V_ITER]), c->v[V_MEM], c->v[V_COMPUTE],
                c->v[V_COMM], c->v[V_IDLE], c->v[V_ESTIMATE] > 0 ? "true" : "false",
                j + 1 < shown ? "," : "");
    }
    fprintf(out, "  ]\n}\n");
}

static int report(const struct search *s, int n_sim, FILE *out, struct dt_error *err)
{
    const struct dt_rec_request *rq = s->rq;
    int n_fit = 0, n_over = 0, n_refused = 0, n_pruned = 0, n_est = 0;
    for (int i = 0; i < s->n; i++) {
        n_fit += fits(&s->c[i]);
        n_pruned += pruned(&s->c[i]);
        n_est += s->c[i].v[V_ESTIMATE] > 0;
        n_over += over_memory(&s->c[i]);
        n_refused += not_applicable(&s->c[i]);
    }
    int *idx, k = ranked(s, &idx);
    if (k < 0)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    if (k == 0) {
        free(idx);
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "no configuration of %s fits %s: %d over "
                       "the memory limit of %.2f GiB, %d not applicable", rq->model->name,
                       rq->topo->name, n_over, rq->memory_limit / GIB, n_refused);
    }
    int rc = 0;
    if (rq->format == DT_REC_CSV) {
        print_csv(s, idx, k, out);
    } else if (rq->format == DT_REC_JSON) {
        print_json(s, idx, k, n_fit, n_sim, n_pruned, out);
    } else {
        fprintf(out, "Recommendations for %s on %s (%d devices), global batch %ld",
                rq->model->name, rq->topo->name, rq->topo->n_ranks, rq->global_batch);
        if (rq->memory_limit > 0)
            fprintf(out, ", memory limit %.2f GiB per device", rq->memory_limit / GIB);
        fprintf(out, ":\n\n");
        rc = print_top(s, idx, k, out);
        const char *nth = rq->top == 1 ? "st" : rq->top == 2 ? "nd" : rq->top == 3 ? "rd" : "th";
        fprintf(out, "\n%d configurations: %d not applicable, %d pruned uncompiled (a lower bound "
                     "of their iteration is above the %d%s best), %d over the memory limit, %d "
                     "fit; %d simulated (the others' compiled lower bound is above the %d%s "
                     "best)\n",
                s->n, n_refused, n_pruned, rq->top, nth, n_over, n_fit, n_sim, rq->top, nth);
        if (n_est)
            fprintf(out, "*: %d estimate%s, not simulations, on over %d devices: pipelines "
                         "simulate one data-parallel replica and add the replicas' gradient "
                         "allreduce in closed form; data-parallel strategies play one rank, "
                         "each collective timed by one round on the fabric (symmetry mode, "
                         "dtsim(1))\n",
                    n_est, n_est > 1 ? "s" : "", dt_sym_min_ranks());
        print_families(s, idx, k, out);
    }
    free(idx);
    return rc ? dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory") : DT_OK;
}

int dt_recommend(const struct dt_rec_request *rq, FILE *out, struct dt_error *err)
{
    struct search s = {.rq = rq};
    int rc = dt_sym_check_env(err), e = rc ? 0 : enumerate(&s);
    if (e == 1)
        rc = dt_fail(err, DT_EINPUT, NULL, 0, 0, "--grad-precision %s: no precision the devices "
                     "of %s have a peak for keeps 16-bit gradients of that type (bf16 needs "
                     "--precision bf16 or fp8, fp16 needs fp16)",
                     dt_precision_name(rq->base.grad_precision), rq->topo->name);
    else if (e)
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    int n_sim = 0;
    if (!rc)
        rc = evaluate(&s, &n_sim, err);
    if (!rc && rq->part == 0 && rq->format == DT_REC_TABLE)
        rc = settle(&s, err);
    if (!rc && rq->part == 0)
        rc = report(&s, n_sim, out, err);
    free(s.c);
    dt_rec_bound_free(&s.bounds);
    dt_sym_cache_free(&s.replicas);
    return rc;
}
