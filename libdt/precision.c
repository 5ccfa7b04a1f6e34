/* Mixed precision in the plan: which buffers take the 2-byte dtype, and the ops of a
 * mixed-precision optimizer step (unscale and overflow check, the flag's MAX over all ranks,
 * the update of the fp32 master weights, their cast into the parameters, the loss scale's
 * update), as PyTorch's autocast + GradScaler and Megatron-LM's mixed-precision optimizer do. */
#include <stdlib.h>

#include "compile.h"
#include "dt/tensor.h"

bool dt_plan_mixed(enum dt_precision p)
{
    return dt_precision_storage(p) != DT_TYPE_F32;
}

enum dt_dtype dt_buf_dtype(enum dt_precision p, enum dt_buf b)
{
    switch (b) {
    case DT_BUF_PARAMS:
    case DT_BUF_GRADS:
    case DT_BUF_ACT:
    case DT_BUF_DACT:
    case DT_BUF_KEEP:
    case DT_BUF_COMM:
        return dt_precision_storage(p);
    default:
        return DT_TYPE_F32;
    }
}

enum dt_dtype dt_plan_grad_dtype(const struct dt_plan_options *o)
{
    return dt_precision_storage(o->grad_precision_given ? o->grad_precision : o->precision);
}

enum dt_dtype dt_plan_buf_dtype(const struct dt_plan_options *o, enum dt_buf b)
{
    return b == DT_BUF_GRADS ? dt_plan_grad_dtype(o) : dt_buf_dtype(o->precision, b);
}

enum dt_dtype dt_op_buf_dtype(const struct dt_op *op, enum dt_buf b)
{
    return b == DT_BUF_GRADS && op->grads_f32 ? DT_TYPE_F32 : dt_buf_dtype(op->precision, b);
}

bool dt_plan_grad_dtype_fits(const struct dt_plan_options *o, char *why, size_t whylen)
{
    enum dt_dtype g = dt_plan_grad_dtype(o), s = dt_precision_storage(o->precision);
    if (g == DT_TYPE_F32 || g == s)
        return true;
    if (s == DT_TYPE_F32)
        snprintf(why, whylen, "--grad-precision %s: 16-bit gradients need mixed precision "
                 "(--precision %s); under --precision %s they are fp32",
                 dt_precision_name(o->grad_precision), dt_precision_name(o->grad_precision),
                 dt_precision_name(o->precision));
    else
        snprintf(why, whylen, "--grad-precision %s under --precision %s: the gradients are "
                 "fp32 or %s (the compute precision's 16-bit type)",
                 dt_precision_name(o->grad_precision), dt_precision_name(o->precision),
                 s == DT_TYPE_BF16 ? "bf16" : "fp16");
    return false;
}

enum dt_dtype dt_plan_region_dtype(const struct dt_plan *plan, int rank,
                                   const struct dt_region *g)
{
    if (g->buf == DT_BUF_KEEP && g->layer >= 0)
        return dt_shard_keep_dtype(plan->model, plan->views[plan->ranks[rank].view], g->layer,
                                   dt_buf_dtype(plan->opt.precision, g->buf));
    return dt_plan_buf_dtype(&plan->opt, g->buf);
}

/* The group of every rank in rank order (the overflow flag's), added once per plan. */
static int all_ranks_group(struct dt_plan *plan)
{
    for (int g = 0; g < plan->n_groups; g++) {
        const struct dt_group *G = &plan->groups[g];
        bool all = G->n == plan->n_ranks;
        for (int i = 0; i < G->n && all; i++)
            all = G->ranks[i] == i;
        if (all)
            return g;
    }
    int *ranks = malloc((size_t)plan->n_ranks * sizeof *ranks);
    if (!ranks)
        return -1;
    for (int i = 0; i < plan->n_ranks; i++)
        ranks[i] = i;
    int g = dt_plan_add_group(plan, plan->n_ranks, ranks);
    free(ranks);
    return g;
}

int dtc_overflow_check(struct dt_plan *plan, int r, long offset, long count)
{
    if (!dt_plan_mixed(plan->opt.precision))
        return DT_OK;
    struct dt_op unscale = {.kind = DT_OP_UNSCALE, .layer = -1,
                            .region = {DT_BUF_GRADS, offset, count, -1},
                            .dst = {DT_BUF_SCALER, DT_SCALER_FLAG, 1, -1}};
    int rc = dtc_push(plan, r, unscale);
    if (rc || plan->n_ranks < 2)
        return rc;
    int all = all_ranks_group(plan);
    if (all < 0)
        return DT_ENOMEM;
    struct dt_op max = dtc_coll(DT_COLL_ALLREDUCE, DT_ALG_LIBRARY, all, 0, DT_BUF_SCALER,
                                DT_SCALER_FLAG, 1);
    max.reduction = DT_RED_MAX;
    return dtc_push(plan, r, max);
}

int dtc_update_cast(struct dt_plan *plan, int r, struct dt_op update)
{
    int rc = dtc_push(plan, r, update);
    if (rc || !dt_plan_mixed(plan->opt.precision))
        return rc;
    long n = update.region.count;
    return dtc_push(plan, r, (struct dt_op){.kind = DT_OP_COPY, .layer = -1,
                                            .region = {DT_BUF_MASTER, update.dst.offset, n, -1},
                                            .dst = {DT_BUF_PARAMS, update.region.offset, n,
                                                    -1}});
}

int dtc_rescale(struct dt_plan *plan, int r)
{
    if (!dt_plan_mixed(plan->opt.precision))
        return DT_OK;
    return dtc_push(plan, r, (struct dt_op){.kind = DT_OP_RESCALE, .layer = -1,
                                            .region = {DT_BUF_SCALER, 0, DT_SCALER_ELEMS, -1}});
}

int dtc_optimizer_step(struct dt_plan *plan, int r, bool updates, long offset, long count,
                       long opt_offset)
{
    int rc = dtc_overflow_check(plan, r, offset, updates ? count : 0);
    if (!rc && updates)
        rc = dtc_update_cast(plan, r, dtc_update(offset, count, opt_offset));
    return rc ? rc : dtc_rescale(plan, r);
}

int dtc_precision_buffers(struct dt_plan *plan, int r)
{
    if (!dt_plan_mixed(plan->opt.precision))
        return DT_OK;
    const struct dt_rank_plan *rp = &plan->ranks[r];
    return dt_plan_add_buffer(plan, r, DT_BUF_MASTER, DT_TYPE_F32, -1, (double)rp->n_updated) |
           dt_plan_add_buffer(plan, r, DT_BUF_SCALER, DT_TYPE_F32, -1, DT_SCALER_ELEMS);
}

/* Bytes per sample of what the buffer table holds per row (dtc_finish_rank's entries of a
 * rank that runs every layer in one slot): outputs, their gradients (the pool and those of
 * their own), kept floats and ints, input, labels. -1: out of memory. */
static double bytes_per_sample(const struct dt_model *m, enum dt_precision p)
{
    double S = (double)dt_dtype_size(dt_buf_dtype(p, DT_BUF_ACT)), n = 0;
    struct dt_dact_layout d;
    if (dt_dact_init(&d, m, NULL, NULL, 1, false))
        return -1;
    for (int l = 0; l < m->n_layers; l++) {
        long act = dt_layer_act_floats(m, l), kf, ki;
        bool own = dt_layer_needs_dact(m, l) && d.at[l] < 0;
        dt_layer_keep(m, l, &kf, &ki);
        n += S * (double)(act * (own ? 2 : 1) + kf) + 4.0 * (double)ki;
    }
    n += S * (double)d.pool;
    dt_dact_free(&d);
    double in = (double)dt_shape_size(&m->input);
    return n + 4.0 * in * (m->input_is_tokens ? 2 : 1) + 4.0 * (double)dtc_labels_per_sample(m);
}

void dt_precision_print_memory(const struct dt_model *m, const struct dt_plan_options *o,
                               FILE *out)
{
    enum dt_precision p = o->precision;
    size_t w = dt_dtype_size(dt_buf_dtype(p, DT_BUF_PARAMS));
    size_t g = dt_dtype_size(dt_plan_grad_dtype(o));
    int moments = dt_optimizer_moments(o->optimizer);
    int opt = 4 * moments + (dt_plan_mixed(p) ? 4 : 0);
    fprintf(out, "Training memory at %s with %s: %zu (weights) + %zu (gradients) + %d (%s) = "
            "%zu bytes per parameter, %.0f bytes per sample (outputs, their gradients, "
            "kept tensors, input)\n", dt_precision_name(p), dt_optimizer_name(o->optimizer), w,
            g, opt, dt_plan_mixed(p) ? "fp32 master weights and optimizer state" : "optimizer state",
            w + g + (size_t)opt, bytes_per_sample(m, p));
}
