/* A lower bound of a plan's largest rank, no plan compiled (dt_plan_memory_floor, plan.h). */
#include <math.h>
#include <stdlib.h>

#include "compile.h"
#include "dt/tensor.h"

/* Bytes per parameter of a rank's states: weight, gradient, optimizer moments and (mixed
 * precision) the fp32 master, each divided by D where ZeRO shards it (Rajbhandari et al.);
 * the sharded parameter server shards the optimizer's over every rank (at most n). */
static double state_bytes(const struct dt_plan_options *o, int D, int n)
{
    if (o->strategy == DT_STRAT_PS_SHARDED && !o->zero) {
        struct dt_plan_options z = *o;
        z.zero = 1;
        return state_bytes(&z, n, n);
    }
    double w = dt_dtype_size(dt_plan_buf_dtype(o, DT_BUF_PARAMS));
    double g = dt_dtype_size(dt_plan_grad_dtype(o));
    double state = 4.0 * dt_optimizer_moments(o->optimizer) +
                   (dt_plan_mixed(o->precision) ? 4.0 : 0);
    return (o->zero >= 3 ? w / D : w) + (o->zero >= 2 ? g / D : g) +
           (o->zero >= 1 ? state / D : state);
}

/* Tensor rank k's chain (its shards of every layer, as the views of pipeline.c and tensor.c
 * cut them): its parameters, and the bytes one sample row keeps for the backward outside
 * the recomputation workspace (ACT and KEEP buffers as dtc_finish_rank adds them). */
static int chain(const struct dt_model *m, const struct dt_plan_options *o,
                 const enum dt_shard_kind *kind, int T, int k, struct dt_chain_floor *out)
{
    struct dt_layer_view *v = calloc((size_t)m->n_layers, sizeof *v);
    struct dt_recompute_layout rc;
    if (!v)
        return DT_ENOMEM;
    for (int l = 0; l < m->n_layers; l++) {
        bool split = kind && kind[l] != DT_SHARD_NONE;
        v[l] = (struct dt_layer_view){.runs = true, .holds = true,
                                      .shard_kind = split ? kind[l] : DT_SHARD_NONE,
                                      .shard_index = split ? k : 0, .shard_count = split ? T : 1};
    }
    if (dt_recompute_init(&rc, m, v, o->recompute)) {
        free(v);
        return DT_ENOMEM;
    }
    enum dt_dtype S = dt_precision_storage(o->precision);
    *out = (struct dt_chain_floor){0};
    for (int l = 0; l < m->n_layers; l++) {
        long kf, ki;
        out->params += (double)dt_shard_params(m, v, l);
        if (!rc.act_ws[l])
            out->row_bytes += (double)dt_shard_act_floats(m, v, l) * dt_dtype_size(S);
        if (rc.keep_ws[l])
            continue;
        dt_shard_keep(m, v, l, &kf, &ki);
        out->row_bytes += (double)kf * dt_dtype_size(dt_shard_keep_dtype(m, v, l, S)) +
                          (double)ki * dt_dtype_size(DT_TYPE_I32);
    }
    dt_recompute_free(&rc);
    free(v);
    return DT_OK;
}

int dt_plan_chain_floor(const struct dt_model *m, const struct dt_plan_options *o,
                        struct dt_chain_floor *out)
{
    int T = o->tp > 1 ? o->tp : 1;
    enum dt_shard_kind *kind = NULL;
    if (T > 1) {
        kind = malloc((size_t)m->n_layers * sizeof *kind);
        int pairs = kind ? dtc_tensor_cut(m, T, o->sequence_parallel, kind) : -1;
        if (pairs < 0) {
            free(kind);
            return DT_ENOMEM;
        }
    }
    int rc = DT_OK;
    *out = (struct dt_chain_floor){INFINITY, INFINITY};
    for (int k = 0; k < T && !rc; k++) { /* the least of the tensor ranks' */
        struct dt_chain_floor c = {0};
        rc = chain(m, o, kind, T, k, &c);
        out->params = fmin(out->params, c.params);
        out->row_bytes = fmin(out->row_bytes, c.row_bytes);
    }
    free(kind);
    return rc;
}

/* Whether S stages, stage s holding a share of P parameters at a bytes each and of K kept
 * bytes per row times rows[s], can all stay at or under X: the kept bytes go to the stages
 * of fewest rows first, the parameters into what is left. */
static bool fits_under(double X, double a, double P, double K, const double *rows, int S)
{
    double left = 0;
    for (int s = 0; s < S; s++) {
        double take = rows[s] > 0 ? fmin(K, X / rows[s]) : K;
        K -= take;
        left += X - rows[s] * take;
    }
    return K <= 0 && left >= a * P;
}

static int cmp_rows(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The least X that fits_under accepts (to a part in 1e9 below). */
static double least_peak(double a, double P, double K, double *rows, int S)
{
    qsort(rows, (size_t)S, sizeof *rows, cmp_rows);
    double lo = 0, hi = a * P + rows[S - 1] * K;
    while (hi - lo > 1e-9 * hi)
        if (fits_under((lo + hi) / 2, a, P, K, rows, S))
            hi = (lo + hi) / 2;
        else
            lo = (lo + hi) / 2;
    return lo;
}

double dt_plan_memory_floor(const struct dt_model *m, const struct dt_topology *topo,
                            const struct dt_plan_options *o, const struct dt_chain_floor *c)
{
    bool pipeline = dt_strategy_info(o->strategy)->pipeline;
    int T, S, D;
    dt_plan_shape(o, topo, &T, &S, &D);
    int M = pipeline ? (o->strategy == DT_STRAT_NAIVE_MP ? 1
                        : o->micro_batches ? o->micro_batches : S)
                     : (o->accumulate > 1 ? o->accumulate : 1);
    long global = o->scaling == DT_SCALING_WEAK ? (long)o->batch * D * (pipeline ? 1 : M)
                                                : o->batch;
    /* replica 0's rows (dt_chunk: the first replicas take the remainder), per micro-batch */
    long len = D > 0 ? (global + D - 1) / D : 0;
    double slot_rows = (double)((len + M - 1) / M);
    double *rows = malloc((size_t)S * sizeof *rows);
    if (!rows || D < 1)
        return (free(rows), 0);
    for (int s = 0; s < S; s++) {
        int slots = pipeline ? dt_pipeline_slots(o, s) : 1;
        rows[s] = slot_rows * (slots > 0 ? slots : 0);
    }
    /* a ZeRO shard of n parameters over D holds at least n / D - 1 of them */
    double a = state_bytes(o, D, dt_plan_ranks(o, topo));
    double slack = o->zero || o->strategy == DT_STRAT_PS_SHARDED ? 16.0 * 3 : 0;
    double x = least_peak(a, c->params, c->row_bytes, rows, S) - slack;
    free(rows);
    return x > 0 ? x : 0;
}
