/* What dtexec --device cuda executes (cuda_net.h), checked on the plan before any GPU is
 * touched, so that a refusal comes first and the same on a machine with or without one. */
#include "cuda_net.h"

/* A layer the CUDA kernels run (exec/cuda/cuda_kernels.h). A softmax only as the model's
 * last layer over its last axis, fused with the cross-entropy loss. */
static bool has_kernel(const struct dt_model *m, int i)
{
    const struct dt_layer *L = &m->layers[i];
    switch (L->kind) {
    case DT_L_DENSE:
    case DT_L_RELU:
    case DT_L_CONV2D:
    case DT_L_MAXPOOL:
    case DT_L_FLATTEN:
        return !L->tied;
    case DT_L_SOFTMAX:
        return i == m->n_layers - 1 && L->out_shape.rank != 3;
    default:
        return false;
    }
}

static int option_refused(struct dt_error *err, const char *what)
{
    return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--device cuda: %s has no CUDA path yet", what);
}

int dtx_cuda_supports(const struct dt_plan *plan, struct dt_error *err)
{
    const struct dt_plan_options *o = &plan->opt;
    const struct dt_model *m = plan->model;
    if (o->precision != DT_FP32)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--device cuda: --precision %s has no CUDA "
                       "path yet (fp32 only)", dt_precision_name(o->precision));
    if (o->tp > 1)
        return option_refused(err, "--tp (tensor parallelism)");
    if (o->recompute != DT_RECOMPUTE_NONE)
        return option_refused(err, "--recompute");
    for (int i = 0; i < m->n_layers; i++) {
        const struct dt_layer *L = &m->layers[i];
        if (!has_kernel(m, i))
            return dt_fail(err, DT_EINPUT, m->path, L->line, L->col,
                           "--device cuda: layer '%s' (%s%s) has no CUDA kernel yet", L->name,
                           dt_layer_kind_name(L->kind),
                           L->kind == DT_L_SOFTMAX ? " other than a last layer over classes"
                           : L->tied               ? ", tied weights"
                                                   : "");
    }
    const struct dt_layer *last = &m->layers[m->n_layers - 1];
    if (last->out_shape.rank == 3)
        return dt_fail(err, DT_EINPUT, m->path, last->line, last->col, "--device cuda: layer "
                       "'%s': a per-pixel loss has no CUDA kernel yet", last->name);
    return DT_OK;
}
