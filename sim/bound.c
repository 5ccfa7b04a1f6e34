/* Lower bound of a config's iteration from layer costs (see bound.h). */
#include <math.h>
#include <stdlib.h>

#include "bound.h"
#include "symmetry.h"

/* One rank's cheapest cost of layer l's forward and backward on `rows` samples over the
 * node groups, at the cheaper of whole and 1/T share (a replicated layer runs whole). */
static double layer_min_cost(const struct dt_model *m, const struct dt_topology *topo,
                             const struct dt_cost_params *group_cp, enum dt_precision prec,
                             int l, int rows, int T, bool backward)
{
    double best = INFINITY;
    for (int g = 0; g < topo->n_groups; g++) {
        const struct dt_device_spec *dev = &topo->groups[g].device;
        for (int shards = 1; shards <= T; shards = shards < T ? T : T + 1) {
            struct dt_op f = {.kind = DT_OP_COMPUTE, .phase = DT_PH_FORWARD, .layer = l,
                              .samples = rows, .precision = prec, .shards = shards};
            struct dt_op b = f;
            b.phase = DT_PH_BACKWARD;
            double c = dt_cost_compute(&group_cp[g], dev, m, &f) +
                       (backward ? dt_cost_compute(&group_cp[g], dev, m, &b) : 0);
            best = c < best ? c : best;
        }
    }
    return best;
}

/* Per layer, whether --recompute runs its forward again before its backward (recompute.c's
 * segments with every layer whole: a layer inside its segment). The input of a view is left
 * out: a stage cut after the view keeps it whole. NULL when out of memory. */
static bool *recomputed(const struct dt_model *m, enum dt_recompute mode)
{
    struct dt_recompute_layout rc;
    bool *again = calloc((size_t)m->n_layers + 1, sizeof *again);
    if (!again || dt_recompute_init(&rc, m, NULL, mode)) {
        free(again);
        return NULL;
    }
    for (int l = 0; l < m->n_layers; l++)
        again[l] = rc.keep_ws[l] || rc.act_ws[l];
    for (int l = 0; l < m->n_layers; l++)
        if (dt_layer_is_view(&m->layers[l]))
            again[m->layers[l].in[0]] = false;
    dt_recompute_free(&rc);
    return again;
}

/* w: one micro-batch of `rows` through the whole model on one rank of a tensor group, with
 * the forwards that recompute runs again; -1 when out of memory. */
static double model_work(const struct dt_model *m, const struct dt_topology *topo,
                         const struct dt_cost_params *group_cp, enum dt_precision prec,
                         enum dt_recompute mode, int rows, int T)
{
    int first_train = 0; /* layers before the first with parameters have no backward */
    while (first_train < m->n_layers && m->layers[first_train].params == 0)
        first_train++;
    bool *again = recomputed(m, mode);
    if (!again)
        return -1;
    double w = 0;
    for (int l = 0; l < m->n_layers; l++)
        if (!dt_layer_is_view(&m->layers[l]))
            w += layer_min_cost(m, topo, group_cp, prec, l, rows, T, l >= first_train) +
                 (again[l] ? layer_min_cost(m, topo, group_cp, prec, l, rows, T, false) : 0);
    free(again);
    return w;
}

/* model_work through the cache; -1 when out of memory. */
static double cached_work(const struct dt_model *m, const struct dt_topology *topo,
                          const struct dt_cost_params *group_cp, const struct dt_plan_options *o,
                          int rows, int T, struct dt_rec_bound_cache *c)
{
    enum dt_precision prec = o->precision;
    for (int i = 0; i < c->n; i++)
        if (c->e[i].prec == (int)prec && c->e[i].recompute == (int)o->recompute &&
            c->e[i].rows == rows && c->e[i].tp == T)
            return c->e[i].w;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        struct dt_rec_work *e = realloc(c->e, (size_t)cap * sizeof *e);
        if (!e)
            return -1;
        c->e = e;
        c->cap = cap;
    }
    double w = model_work(m, topo, group_cp, prec, o->recompute, rows, T);
    if (w < 0)
        return -1;
    c->e[c->n++] = (struct dt_rec_work){(int)prec, (int)o->recompute, rows, T, w};
    return w;
}

void dt_rec_bound_free(struct dt_rec_bound_cache *c)
{
    free(c->e);
    free(c->chains);
    *c = (struct dt_rec_bound_cache){0};
}

double dt_rec_bound(const struct dt_model *m, const struct dt_topology *topo,
                    const struct dt_cost_params *group_cp, const struct dt_plan_options *o,
                    long global_batch, struct dt_rec_bound_cache *cache)
{
    const struct dt_strategy_info *info = dt_strategy_info(o->strategy);
    int T, S, D;
    dt_plan_shape(o, topo, &T, &S, &D);
    int micro = info->pipeline ? (o->micro_batches ? o->micro_batches : S)
                               : (o->accumulate > 1 ? o->accumulate : 1);
    if (D < 1 || global_batch < (long)D * micro)
        return 0;
    /* replica 0's rows, split as the compile splits them (dt_chunk): the largest share; the
     * symmetric estimate simulates one replica of the floor share (symmetry.c) */
    long len = global_batch / D + (global_batch % D > 0 && !dt_sym_used(o, topo));
    int small = (int)(len / micro), n_big = (int)(len % micro);
    double w = cached_work(m, topo, group_cp, o, small, T, cache);
    double w_big = n_big ? cached_work(m, topo, group_cp, o, small + 1, T, cache) : 0;
    if (w < 0 || w_big < 0)
        return -1;
    double sum = (micro - n_big) * w + n_big * w_big;
    if (!info->pipeline)
        return sum;
    if (o->strategy == DT_STRAT_INTERLEAVED)
        return sum / S;
    return w / (1 - pow(1 - 1.0 / micro, S)); /* every micro-batch at least the smaller */
}

/* The chain floor of o (dt_plan_chain_floor) through the cache; NULL when out of memory. */
static const struct dt_chain_floor *cached_chain(const struct dt_model *m,
                                                 const struct dt_plan_options *o,
                                                 struct dt_rec_bound_cache *c)
{
    struct dt_rec_chain key = {.pipeline = dt_strategy_info(o->strategy)->pipeline,
                               .tp = o->tp > 1 ? o->tp : 1, .seq = o->sequence_parallel,
                               .recompute = (int)o->recompute, .prec = (int)o->precision};
    for (int i = 0; i < c->n_chains; i++) {
        const struct dt_rec_chain *e = &c->chains[i];
        if (e->pipeline == key.pipeline && e->tp == key.tp && e->seq == key.seq &&
            e->recompute == key.recompute && e->prec == key.prec)
            return &e->floor;
    }
    if (c->n_chains == c->cap_chains) {
        int cap = c->cap_chains ? 2 * c->cap_chains : 16;
        struct dt_rec_chain *e = realloc(c->chains, (size_t)cap * sizeof *e);
        if (!e)
            return NULL;
        c->chains = e;
        c->cap_chains = cap;
    }
    if (dt_plan_chain_floor(m, o, &key.floor))
        return NULL;
    c->chains[c->n_chains] = key;
    return &c->chains[c->n_chains++].floor;
}

double dt_rec_memory_floor(const struct dt_model *m, const struct dt_topology *topo,
                           const struct dt_plan_options *o, struct dt_rec_bound_cache *cache)
{
    const struct dt_chain_floor *c = cached_chain(m, o, cache);
    return c ? dt_plan_memory_floor(m, topo, o, c) : -1;
}

/* Bytes per parameter no gradient exchange can send less of: the smaller of its weight's and
 * its gradient's type (a contribution leaves as a gradient, a reduced result as either). */
static double exchanged_bytes(const struct dt_plan_options *o)
{
    double w = dt_dtype_size(dt_plan_buf_dtype(o, DT_BUF_PARAMS));
    double g = dt_dtype_size(dt_plan_buf_dtype(o, DT_BUF_GRADS));
    return w < g ? w : g;
}

/* The data-parallel families' node egress (bound.h): every node holds whole replicas, and
 * the replicas span more than one node; 0 when that does not hold. */
static double egress_bound(const struct dt_model *m, const struct dt_topology *topo,
                           const struct dt_cost_params *cp, const struct dt_plan_options *o)
{
    int T, S, D;
    dt_plan_shape(o, topo, &T, &S, &D);
    const struct dt_node_group *g = &topo->groups[0];
    if (topo->n_groups != 1 || S != 1 || D < 2 || g->devices % T || (long)D * T <= g->devices)
        return 0;
    double nic = cp[0].nic_bw_Bps > 0 ? cp[0].nic_bw_Bps : g->nic.bw_Bps;
    double egress = nic * (g->nics > 0 ? g->nics : 1);
    return egress > 0 ? exchanged_bytes(o) * (double)m->total_params / egress : 0;
}

double dt_rec_sym_bound(const struct dt_model *m, const struct dt_topology *topo,
                        const struct dt_plan_options *o)
{
    int T, S, D;
    dt_plan_shape(o, topo, &T, &S, &D);
    double g = dt_dtype_size(dt_plan_grad_dtype(o));
    return dt_sym_allreduce_s(topo, D, T, g * (double)m->total_params / ((double)S * T));
}

double dt_rec_comm_bound(const struct dt_model *m, const struct dt_topology *topo,
                         const struct dt_cost_params *group_cp, const struct dt_plan_options *o)
{
    return dt_sym_used(o, topo) ? dt_rec_sym_bound(m, topo, o)
                                : egress_bound(m, topo, group_cp, o);
}

double dt_rec_total_bound(double compute, double comm, const struct dt_plan_options *o,
                          const struct dt_topology *topo)
{
    return dt_sym_used(o, topo) ? compute + comm : fmax(compute, comm);
}
