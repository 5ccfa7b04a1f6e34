/* dtsim --recommend (see recommend.h for the search and its exact pruning). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt/table.h"
#include "epoch.h"
#include "player.h"
#include "recommend.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

/* What a process learns about one candidate; summed over processes (each candidate's values
 * come from exactly one), so every field is a double. */
enum { V_STATUS, V_MEM, V_BOUND, V_ITER, V_COMPUTE, V_COMM, V_IDLE, V_COUNT };
enum { ST_REFUSED, ST_OVER_MEMORY, ST_FITS }; /* V_STATUS - 1 once evaluated */

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
                                  sizeof c->why))
        c->v[V_STATUS] = -1; /* refused: known to every process without evaluating */
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

/* Every candidate, in an order that depends only on the inputs. */
static int enumerate(struct search *s)
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
                    int err = info->pipeline ? add_pipeline(s, o, n / tp)
                                             : add_data_parallel(s, o, n / tp);
                    if (err)
                        return -1;
                }
        }
    }
    return 0;
}

/* The busiest rank's local ops alone: a lower bound of the iteration the player computes
 * (it charges these same costs, at shared rates no faster, one op at a time per rank).
 * dt_cost_op is 0 for communication ops: the network's, not the device's. */
static double compute_bound(const struct dt_plan *plan, const struct dt_cost_params *group_cp)
{
    double worst = 0;
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_node_group *g = dt_topology_group_of_rank(plan->topo, r);
        const struct dt_device_spec *dev = &g->device;
        const struct dt_cost_params *cp = &group_cp[g - plan->topo->groups];
        double t = 0;
        for (int i = 0; i < plan->ranks[r].n_ops; i++)
            t += dt_cost_op(cp, dev, plan->model, &plan->ranks[r].ops[i]);
        worst = t > worst ? t : worst;
    }
    return worst;
}

/* Compiles a candidate's probe: its largest rank's memory and compute bound. */
static int measure(const struct search *s, struct candidate *c, struct dt_error *err)
{
    struct dt_plan *plan; /* the first and last replicas: the middle ones repeat them */
    int rc = dt_plan_probe(s->rq->model, s->rq->topo, &c->opt, &plan, err);
    if (rc == DT_EINPUT) { /* a combination the strategy's fits() let through */
        c->v[V_STATUS] = 1 + ST_REFUSED;
        return DT_OK;
    }
    if (rc)
        return rc;
    double mem = 0;
    for (int r = 0; r < plan->n_ranks; r++) {
        struct dt_memory m;
        dt_plan_rank_memory(plan, r, &m);
        mem = m.total > mem ? m.total : mem;
    }
    c->v[V_MEM] = mem;
    bool over = s->rq->memory_limit > 0 && mem > s->rq->memory_limit;
    c->v[V_STATUS] = 1 + (over ? ST_OVER_MEMORY : ST_FITS);
    c->v[V_BOUND] = over ? 0 : compute_bound(plan, s->rq->group_cp);
    dt_plan_destroy(plan);
    return DT_OK;
}

static int simulate(const struct search *s, struct candidate *c, struct dt_error *err)
{
    struct dt_plan *plan;
    int rc = dt_plan_build(s->rq->model, s->rq->topo, &c->opt, &plan, err);
    if (rc)
        return rc;
    struct dt_sim_result res;
    struct dt_sim_options so = {.group_cp = s->rq->group_cp};
    rc = dt_sim_run(plan, &s->rq->group_cp[0], &so, &res, err);
    if (!rc) {
        /* as dtsim's rows: the loader reads ahead, the slower of the two sets the pace */
        c->v[V_ITER] = fmax(res.iter_s, dt_step_read_s(plan, &s->rq->group_cp[0]));
        for (int r = 0; r < res.n_ranks; r++) {
            c->v[V_COMPUTE] += res.rank[r].compute_s / res.n_ranks;
            c->v[V_COMM] += res.rank[r].comm_s / res.n_ranks;
            c->v[V_IDLE] += res.rank[r].idle_s / res.n_ranks;
        }
        dt_sim_result_free(&res);
    }
    dt_plan_destroy(plan);
    return rc;
}

static bool fits(const struct candidate *c) { return c->v[V_STATUS] == 1 + ST_FITS; }
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

/* The least-compute fitting member of each family (ties: the first). */
static void family_leads(const struct search *s, int *lead)
{
    for (int f = 0; f < s->n_families; f++)
        lead[f] = -1;
    for (int i = 0; i < s->n; i++) {
        const struct candidate *c = &s->c[i];
        int *l = &lead[c->family];
        if (fits(c) && (*l < 0 || c->v[V_BOUND] < s->c[*l].v[V_BOUND]))
            *l = i;
    }
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

/* Evaluates: compile all, simulate the family leads, then everything the bound cannot rule
 * out. *n_simulated counts the simulations (all processes). */
static int evaluate(struct search *s, int *n_simulated, struct dt_error *err)
{
    int rc = 0;
    for (int i = 0; i < s->n && !rc; i++)
        if (s->c[i].v[V_STATUS] == 0 && mine(s, i))
            rc = measure(s, &s->c[i], err);
    if (rc || (rc = combine(s)))
        return rc;
    int *lead = malloc((size_t)(s->n_families + 1) * sizeof *lead);
    if (!lead)
        return -1;
    family_leads(s, lead);
    for (int f = 0; f < s->n_families && !rc; f++)
        if (lead[f] >= 0 && mine(s, lead[f]))
            rc = simulate(s, &s->c[lead[f]], err);
    free(lead);
    if (rc || (rc = combine(s)))
        return rc;
    double bound = nth_best(s, s->rq->top);
    for (int i = 0; i < s->n && !rc; i++) {
        struct candidate *c = &s->c[i];
        if (fits(c) && !simulated(c) && c->v[V_BOUND] < bound && mine(s, i))
            rc = simulate(s, c, err);
    }
    if (rc || (rc = combine(s)))
        return rc;
    *n_simulated = 0;
    for (int i = 0; i < s->n; i++)
        *n_simulated += simulated(&s->c[i]);
    return 0;
}

struct by_iter {
    double iter_s;
    int index;
};

static int cmp_by_iter(const void *a, const void *b)
{
    const struct by_iter *x = a, *y = b;
    if (x->iter_s != y->iter_s)
        return x->iter_s < y->iter_s ? -1 : 1;
    return x->index - y->index;
}

/* Indices of the simulated candidates, fastest first (ties: enumeration order). */
static int ranked(const struct search *s, int **out)
{
    struct by_iter *b = malloc((size_t)(s->n + 1) * sizeof *b);
    int *idx = malloc((size_t)(s->n + 1) * sizeof *idx), k = 0;
    if (!b || !idx) {
        free(b);
        free(idx);
        return -1;
    }
    for (int i = 0; i < s->n; i++)
        if (simulated(&s->c[i]))
            b[k++] = (struct by_iter){s->c[i].v[V_ITER], i};
    qsort(b, (size_t)k, sizeof *b, cmp_by_iter);
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
                           "zero", "recompute", "iter (ms)", "epoch (s)", "mem (MiB)",
                           "$/epoch"};
    int ncols = price > 0 ? 14 : 13;
    struct dt_table *t = dt_table_new(ncols);
    if (!t)
        return -1;
    for (int c = 0; c < ncols; c++)
        dt_table_column(t, c, heads[c], c == 1 || c == 7 || c == 9);
    for (int j = 0; j < k && j < rq->top; j++) {
        const struct candidate *c = &s->c[idx[j]];
        dt_table_cell(t, "%d", j + 1);
        config_cells(t, &c->opt, rq->topo->n_ranks);
        dt_table_cell(t, "%.3f", c->v[V_ITER] * 1e3);
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

/* Why a family made no row: the smallest member over the memory limit, or the first refusal. */
static void family_misses(const struct search *s, int f, const struct candidate **smallest,
                          const struct candidate **refused)
{
    *smallest = *refused = NULL;
    for (int i = 0; i < s->n; i++) {
        const struct candidate *c = &s->c[i];
        if (c->family != f)
            continue;
        if ((c->v[V_STATUS] < 0 || c->v[V_STATUS] == 1 + ST_REFUSED) && !*refused)
            *refused = c;
        if (c->v[V_STATUS] == 1 + ST_OVER_MEMORY &&
            (!*smallest || c->v[V_MEM] < (*smallest)->v[V_MEM]))
            *smallest = c;
    }
}

static const char *refusal(const struct candidate *c)
{
    return c->why[0] ? c->why : "its plans could not be compiled (run dtsim with their flags "
                                "to see why)";
}

/* The families that apply nowhere, a line per reason: "--tp is not implemented yet (16
 * families: ring + tp, ...)". */
static void print_refused(const struct search *s, const bool *applies, FILE *out)
{
    bool *done = calloc((size_t)s->n_families + 1, 1);
    if (!done)
        return;
    for (int f = 0; f < s->n_families; f++) {
        const struct candidate *small, *ref;
        family_misses(s, f, &small, &ref);
        if (applies[f] || done[f] || !ref)
            continue;
        int count = 0;
        for (int g = f; g < s->n_families; g++) {
            const struct candidate *sg, *rg;
            family_misses(s, g, &sg, &rg);
            if (!applies[g] && !done[g] && rg && strcmp(refusal(rg), refusal(ref)) == 0) {
                done[g] = true;
                count++;
            }
        }
        fprintf(out, "  not applicable (%d famil%s: %s%s): %s\n", count, count > 1 ? "ies" : "y",
                s->families[f], count > 1 ? ", ..." : "", refusal(ref));
    }
    free(done);
}

/* A line per family: its best config, or why none of it made the table. */
static void print_families(const struct search *s, const int *idx, int k, FILE *out)
{
    const struct candidate *best = &s->c[idx[0]];
    bool *applies = calloc((size_t)s->n_families + 1, 1);
    if (!applies)
        return;
    fprintf(out, "\nFamilies (best member against rank 1):\n");
    for (int f = 0; f < s->n_families; f++) {
        const struct candidate *fb = NULL, *smallest, *refused;
        for (int j = 0; j < k && !fb; j++)
            if (s->c[idx[j]].family == f)
                fb = &s->c[idx[j]];
        family_misses(s, f, &smallest, &refused);
        applies[f] = fb || smallest;
        if (!applies[f])
            continue;
        fprintf(out, "  %-28s ", s->families[f]);
        if (fb == best) {
            fprintf(out, "rank 1\n");
        } else if (fb) {
            double by;
            const char *term = losing_term(fb, best, &by);
            fprintf(out, "slower by %.1f %% (%.3f ms more %s)\n",
                    100 * (fb->v[V_ITER] / best->v[V_ITER] - 1), by * 1e3, term);
        } else {
            fprintf(out, "does not fit: its smallest needs %.2f GiB per device, %.2f GiB over "
                         "the limit\n", smallest->v[V_MEM] / GIB,
                    (smallest->v[V_MEM] - s->rq->memory_limit) / GIB);
        }
    }
    print_refused(s, applies, out);
    free(applies);
}

static void print_csv(const struct search *s, const int *idx, int k, FILE *out)
{
    const struct dt_rec_request *rq = s->rq;
    fprintf(out, "rank,strategy,dp,tp,pp,micro_batches,chunks,accumulate,bucket_B,zero,"
                 "recompute,iter_s,epoch_s,memory_B,compute_s,comm_s,idle_s,usd_per_epoch\n");
    double price = dt_topology_price_per_h(rq->topo);
    for (int j = 0; j < k && j < rq->top; j++) {
        const struct candidate *c = &s->c[idx[j]];
        const struct dt_plan_options *o = &c->opt;
        int tp = o->tp > 1 ? o->tp : 1, pp = o->pp > 1 ? o->pp : 1;
        fprintf(out, "%d,%s,%d,%d,%d,%d,%d,%d,%.0f,%d,%s,%.9g,%.9g,%.0f,%.9g,%.9g,%.9g,%.6g\n",
                j + 1, dt_strategy_name(o->strategy), rq->topo->n_ranks / (tp * pp), tp, pp,
                o->micro_batches, o->chunks ? o->chunks : 1, o->accumulate, o->bucket_bytes,
                o->zero, dt_recompute_name(o->recompute), c->v[V_ITER],
                epoch_s(rq, c->v[V_ITER]), c->v[V_MEM], c->v[V_COMPUTE], c->v[V_COMM],
                c->v[V_IDLE], price * epoch_s(rq, c->v[V_ITER]) / 3600);
    }
}

static void print_json(const struct search *s, const int *idx, int k, int n_fit, int n_sim,
                       FILE *out)
{
    const struct dt_rec_request *rq = s->rq;
    fprintf(out, "{\n  \"model\": \"%s\", \"topology\": \"%s\", \"ranks\": %d, "
                 "\"global_batch\": %ld, \"memory_limit_B\": %.0f,\n  \"candidates\": %d, "
                 "\"fit\": %d, \"simulated\": %d,\n  \"recommendations\": [\n",
            rq->model->name, rq->topo->name, rq->topo->n_ranks, rq->global_batch,
            rq->memory_limit, s->n, n_fit, n_sim);
    int shown = k < rq->top ? k : rq->top;
    for (int j = 0; j < shown; j++) {
        const struct candidate *c = &s->c[idx[j]];
        char par[512];
        dt_parallel_format(&c->opt, par, sizeof par);
        fprintf(out, "    {\"rank\": %d, \"strategy\": \"%s\", \"parallel\": \"%s\", "
                     "\"bucket_B\": %.0f, \"iter_s\": %.9g, \"epoch_s\": %.9g, "
                     "\"memory_B\": %.0f, \"compute_s\": %.9g, \"comm_s\": %.9g, "
                     "\"idle_s\": %.9g}%s\n",
                j + 1, dt_strategy_name(c->opt.strategy), par, c->opt.bucket_bytes,
                c->v[V_ITER], epoch_s(rq, c->v[V_ITER]), c->v[V_MEM], c->v[V_COMPUTE],
                c->v[V_COMM], c->v[V_IDLE], j + 1 < shown ? "," : "");
    }
    fprintf(out, "  ]\n}\n");
}

static int report(const struct search *s, int n_sim, FILE *out, struct dt_error *err)
{
    const struct dt_rec_request *rq = s->rq;
    int n_fit = 0, n_over = 0, n_refused = 0;
    for (int i = 0; i < s->n; i++) {
        n_fit += fits(&s->c[i]);
        n_over += s->c[i].v[V_STATUS] == 1 + ST_OVER_MEMORY;
        n_refused += s->c[i].v[V_STATUS] < 0 || s->c[i].v[V_STATUS] == 1 + ST_REFUSED;
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
        print_json(s, idx, k, n_fit, n_sim, out);
    } else {
        fprintf(out, "Recommendations for %s on %s (%d devices), global batch %ld",
                rq->model->name, rq->topo->name, rq->topo->n_ranks, rq->global_batch);
        if (rq->memory_limit > 0)
            fprintf(out, ", memory limit %.2f GiB per device", rq->memory_limit / GIB);
        fprintf(out, ":\n\n");
        rc = print_top(s, idx, k, out);
        fprintf(out, "\n%d configurations: %d not applicable, %d over the memory limit, %d fit; "
                     "%d simulated (the others' compute alone is no faster than the %d%s best)\n",
                s->n, n_refused, n_over, n_fit, n_sim, rq->top,
                rq->top == 1 ? "st" : rq->top == 2 ? "nd" : rq->top == 3 ? "rd" : "th");
        print_families(s, idx, k, out);
    }
    free(idx);
    return rc ? dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory") : DT_OK;
}

int dt_recommend(const struct dt_rec_request *rq, FILE *out, struct dt_error *err)
{
    struct search s = {.rq = rq};
    int rc = enumerate(&s) ? dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory") : DT_OK;
    int n_sim = 0;
    if (!rc)
        rc = evaluate(&s, &n_sim, err);
    if (!rc && rq->part == 0)
        rc = report(&s, n_sim, out, err);
    free(s.c);
    return rc;
}
