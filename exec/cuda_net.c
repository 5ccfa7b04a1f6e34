/* The CUDA net: see cuda_net.h. The layer calls mirror exec/cpu/net.c's forward_kernels,
 * backward_kernels and dtk_net_begin_backward for the kinds dtx_cuda_supports admits. */
#include "cuda_net.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_kernels.h"

/* One host allocation and its device mirror. */
struct mirror {
    uintptr_t host;
    size_t bytes;
    void *dev;
};

#define MAX_MIRRORS (DTK_NET_BLOCKS + 4)

struct dtx_cuda_net {
    struct dtk_net *host;
    const struct dt_model *model;
    struct dtcuda *cx;
    struct mirror mirrors[MAX_MIRRORS];
    int n_mirrors;
    double bytes, work_bytes;
    float *work;            /* conv2d scratch of the largest layer */
    float *losses;          /* per-row losses of a LOSS (rows x groups) */
    const float *x;         /* host: the model's input rows */
    int rc;                 /* the first failure, kept */
    struct dt_error err;
};

/* Keeps the first failure; later calls do nothing until the executor reports it. */
static void keep(struct dtx_cuda_net *g, int rc, const struct dt_error *e)
{
    if (rc && !g->rc) {
        g->rc = rc;
        g->err = *e;
    }
}

static bool failed(const struct dtx_cuda_net *g)
{
    return g->rc != DT_OK;
}

/* The device address of a host address inside a mirrored allocation (its end included, for
 * empty regions); NULL for NULL. An address outside every mirror is a bug of the caller. */
static void *dev(struct dtx_cuda_net *g, const void *host)
{
    if (!host)
        return NULL;
    uintptr_t h = (uintptr_t)host;
    for (int k = 0; k < g->n_mirrors; k++) {
        const struct mirror *m = &g->mirrors[k];
        if (m->bytes && h >= m->host && h <= m->host + m->bytes)
            return (char *)m->dev + (h - m->host);
    }
    struct dt_error e;
    keep(g, dt_fail(&e, DT_EINTERNAL, NULL, 0, 0, "--device cuda: host address %p is in no "
                    "mirrored buffer", host), &e);
    return NULL;
}

int dtx_cuda_mirror(struct dtx_cuda_net *g, void *host, size_t bytes, struct dt_error *err)
{
    if (!bytes || !host)
        return DT_OK;
    if (g->n_mirrors == MAX_MIRRORS)
        return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "--device cuda: too many buffers");
    struct mirror *m = &g->mirrors[g->n_mirrors];
    int rc = dtcuda_malloc(&m->dev, bytes, err);
    if (!rc)
        rc = dtcuda_to_device(g->cx, m->dev, host, bytes, err);
    if (rc) {
        dtcuda_free(m->dev);
        return rc;
    }
    m->host = (uintptr_t)host;
    m->bytes = bytes;
    g->n_mirrors++;
    g->bytes += (double)bytes;
    return DT_OK;
}

/* Scratch: the largest conv2d workspace at the net's rows, and a loss per labelled row. */
static int alloc_scratch(struct dtx_cuda_net *g, struct dt_error *err)
{
    const struct dt_model *m = g->model;
    long work = 0;
    for (int i = 0; i < m->n_layers; i++) {
        struct dtk_net_layer ly;
        dtk_net_layer_info(g->host, i, &ly);
        if (ly.runs && m->layers[i].kind == DT_L_CONV2D) {
            long w = dtcuda_conv2d_workspace_floats(&ly.cd);
            work = w > work ? w : work;
        }
    }
    long rows = (long)dtk_net_max_batch(g->host) * dtk_net_labels_per_sample(g->host);
    g->work_bytes = (double)(work + rows) * sizeof(float);
    int rc = dtcuda_malloc((void **)&g->work, (size_t)(work + 1) * sizeof(float), err);
    if (!rc)
        rc = dtcuda_malloc((void **)&g->losses, (size_t)rows * sizeof(float), err);
    return rc;
}

int dtx_cuda_create(struct dtk_net *host, int device, struct dtx_cuda_net **out,
                    struct dt_error *err)
{
    *out = NULL;
    struct dtx_cuda_net *g = calloc(1, sizeof *g);
    if (!g)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    g->host = host;
    g->model = dtk_net_model(host);
    int rc = dtcuda_create(&g->cx, device, err);
    struct dtk_net_block b[DTK_NET_BLOCKS];
    dtk_net_blocks(host, b);
    for (int k = 0; k < DTK_NET_BLOCKS && !rc; k++)
        rc = dtx_cuda_mirror(g, b[k].host, b[k].bytes, err);
    if (!rc)
        rc = alloc_scratch(g, err);
    if (rc) {
        dtx_cuda_destroy(g);
        return rc;
    }
    *out = g;
    return DT_OK;
}

void dtx_cuda_destroy(struct dtx_cuda_net *g)
{
    if (!g)
        return;
    for (int k = 0; k < g->n_mirrors; k++)
        dtcuda_free(g->mirrors[k].dev);
    dtcuda_free(g->work);
    dtcuda_free(g->losses);
    dtcuda_destroy(g->cx);
    free(g);
}

void dtx_cuda_set_input(struct dtx_cuda_net *g, const float *x) { g->x = x; }
double dtx_cuda_bytes(const struct dtx_cuda_net *g) { return g->bytes; }
double dtx_cuda_work_bytes(const struct dtx_cuda_net *g) { return g->work_bytes; }

void dtx_cuda_describe(const struct dtx_cuda_net *g, char *buf, size_t len)
{
    struct dt_error e;
    if (dtcuda_describe(g->cx, buf, len, &e))
        snprintf(buf, len, "a GPU (%s)", e.msg);
}

int dtx_cuda_status(struct dtx_cuda_net *g, bool wait, struct dt_error *err)
{
    struct dt_error e;
    if (wait && !failed(g))
        keep(g, dtcuda_sync(g->cx, &e), &e);
    if (failed(g) && err)
        *err = g->err;
    return g->rc;
}

void dtx_cuda_download(struct dtx_cuda_net *g, void *host, size_t bytes)
{
    struct dt_error e;
    void *d = dev(g, host);
    if (bytes && d && !failed(g))
        keep(g, dtcuda_to_host(g->cx, host, d, bytes, &e), &e);
}

void dtx_cuda_upload(struct dtx_cuda_net *g, const void *host, size_t bytes)
{
    struct dt_error e;
    void *d = dev(g, host);
    if (bytes && d && !failed(g))
        keep(g, dtcuda_to_device(g->cx, d, host, bytes, &e), &e);
}

void dtx_cuda_zero(struct dtx_cuda_net *g, void *host, size_t bytes)
{
    struct dt_error e;
    void *d = dev(g, host);
    if (bytes && d && !failed(g))
        keep(g, dtcuda_zero(g->cx, d, bytes, &e), &e);
}

void dtx_cuda_copy(struct dtx_cuda_net *g, void *dst, const void *src, long n, bool sum)
{
    struct dt_error e;
    float *d = dev(g, dst);
    const float *s = dev(g, src);
    if (n <= 0 || !d || !s || failed(g))
        return;
    keep(g, sum ? dtcuda_accumulate(g->cx, d, s, n, &e)
                : dtcuda_copy(g->cx, d, s, (size_t)n * sizeof(float), &e), &e);
}

void dtx_cuda_adam(struct dtx_cuda_net *g, float *p, const float *grad, float *m, float *v,
                   long n, long t, const struct dtk_adam *cfg)
{
    struct dt_error e;
    if (n > 0 && !failed(g))
        keep(g, dtcuda_adam_step(g->cx, dev(g, p), dev(g, grad), dev(g, m), dev(g, v), n, t,
                                 cfg, &e), &e);
}

void dtx_cuda_sgd(struct dtx_cuda_net *g, float *p, const float *grad, float *buf, long n,
                  long t, const struct dtk_sgd *cfg)
{
    struct dt_error e;
    if (n > 0 && !failed(g))
        keep(g, dtcuda_sgd_step(g->cx, dev(g, p), dev(g, grad), dev(g, buf), n, t, cfg, &e),
             &e);
}

/* ---- layers ---- */

static struct dtk_net_layer info(const struct dtx_cuda_net *g, int i)
{
    struct dtk_net_layer ly;
    dtk_net_layer_info(g->host, i, &ly);
    return ly;
}

/* Device rows from b0 of layer j's output (j < 0: the model's input; an output held until
 * sent holds ws_rows rows). */
static const float *in_rows(struct dtx_cuda_net *g, int j, int b0)
{
    if (j < 0)
        return dev(g, g->x + (long)b0 * dtk_net_out_floats(g->host, -1));
    struct dtk_net_layer ly = info(g, j);
    return dev(g, ly.act + dtk_net_act_offset(g->host, j, (long)b0 * ly.out_sz));
}

/* Host rows from b0 of layer j's output gradient (a pooled gradient holds one slot's rows);
 * NULL when nothing needs it. */
static float *dact_rows(struct dtx_cuda_net *g, int j, int b0)
{
    struct dtk_net_layer ly;
    if (j < 0 || !(ly = info(g, j)).dact)
        return NULL;
    return ly.dact + dtk_net_dact_offset(g->host, j, (long)b0 * ly.out_sz);
}

/* The device address of a layer's parameters or their gradients; NULL for a layer without
 * (a rank whose layers have none mirrors no parameter buffer). */
static void *weights(struct dtx_cuda_net *g, const struct dt_layer *L, const float *host)
{
    return L->params > 0 ? dev(g, host) : NULL;
}

static void zero_rows(struct dtx_cuda_net *g, int j, int b0, int nb)
{
    dtx_cuda_zero(g, dact_rows(g, j, b0), (size_t)nb * (size_t)info(g, j).out_sz * sizeof(float));
}

static long conv_weights(const struct dtk_conv_dims *d)
{
    return (long)d->F * (d->C / d->groups) * d->kh * d->kw;
}

/* A last softmax is fused with the loss (dtx_cuda_begin_backward writes its output). */
static bool fused_softmax(const struct dtx_cuda_net *g, int i)
{
    return i == g->model->n_layers - 1 && g->model->layers[i].kind == DT_L_SOFTMAX;
}

void dtx_cuda_forward_layer(struct dtx_cuda_net *g, int i, int b0, int nb)
{
    const struct dt_layer *L = &g->model->layers[i];
    const struct dtk_net_layer ly = info(g, i);
    const float *x = in_rows(g, L->in[0], b0), *w = weights(g, L, ly.w);
    float *y = dev(g, ly.act + dtk_net_act_offset(g->host, i, (long)b0 * ly.out_sz));
    const long n = (long)nb * ly.out_sz;
    struct dtk_conv_dims d = ly.cd;
    d.B = nb;
    struct dt_error e;
    int rc = DT_OK;
    if (failed(g))
        return;
    switch (L->kind) {
    case DT_L_DENSE:
        rc = dtcuda_dense_forward(g->cx, y, x, w, L->bias ? w + (long)ly.units * ly.cols : NULL,
                                  nb * ly.rows, ly.cols, ly.units, &e);
        break;
    case DT_L_RELU: rc = dtcuda_relu_forward(g->cx, y, x, n, &e); break;
    case DT_L_CONV2D:
        rc = dtcuda_conv2d_forward(g->cx, y, g->work, x, w,
                                   L->bias ? w + conv_weights(&d) : NULL, &d, &e);
        break;
    case DT_L_MAXPOOL:
        rc = dtcuda_maxpool_forward(g->cx, y, dev(g, ly.iaux + (long)b0 * ly.iaux_row), x, &d,
                                    &e);
        break;
    case DT_L_FLATTEN: /* a view, but of the model's input: a copy */
        if (!ly.alias)
            rc = dtcuda_copy(g->cx, y, x, (size_t)n * sizeof(float), &e);
        break;
    case DT_L_SOFTMAX: /* fused_softmax: the loss computes it */
        break;
    default:
        rc = dt_fail(&e, DT_EINTERNAL, NULL, 0, 0, "--device cuda: layer '%s' has no kernel",
                     L->name);
        break;
    }
    keep(g, rc, &e);
}

/* Zeroes the input gradient rows that layer i writes first (the GPU kernels always add). */
static void zero_inputs(struct dtx_cuda_net *g, int i, int b0, int nb)
{
    int o[DT_MAX_INPUTS], n = dtk_net_first_writes(g->host, i, o);
    for (int k = 0; k < n; k++)
        zero_rows(g, o[k], b0, nb);
}

void dtx_cuda_backward_layer(struct dtx_cuda_net *g, int i, int b0, int nb)
{
    zero_inputs(g, i, b0, nb);
    const struct dt_layer *L = &g->model->layers[i];
    const struct dtk_net_layer ly = info(g, i);
    if (!ly.need || ly.alias || fused_softmax(g, i) || failed(g))
        return;
    const float *x = in_rows(g, L->in[0], b0), *w = weights(g, L, ly.w);
    float *dx = dev(g, dact_rows(g, L->in[0], b0)), *dw = weights(g, L, ly.dw);
    const float *dy = dev(g, dact_rows(g, i, b0));
    struct dtk_conv_dims d = ly.cd;
    d.B = nb;
    struct dt_error e;
    int rc = DT_OK;
    switch (L->kind) {
    case DT_L_DENSE:
        rc = dtcuda_dense_backward(g->cx, dx, dw, L->bias ? dw + (long)ly.units * ly.cols : NULL,
                                   dy, x, w, nb * ly.rows, ly.cols, ly.units, &e);
        break;
    case DT_L_RELU:
        if (dx)
            rc = dtcuda_relu_backward(g->cx, dx, dy, x, (long)nb * ly.out_sz, &e);
        break;
    case DT_L_CONV2D:
        rc = dtcuda_conv2d_backward(g->cx, dx, dw, L->bias ? dw + conv_weights(&d) : NULL,
                                    g->work, dy, x, w, &d, &e);
        break;
    case DT_L_MAXPOOL:
        if (dx)
            rc = dtcuda_maxpool_backward(g->cx, dx, dy, dev(g, ly.iaux + (long)b0 * ly.iaux_row),
                                         &d, &e);
        break;
    default: /* flatten of the model's input: no gradient */
        break;
    }
    keep(g, rc, &e);
}

/* The mean of the rows' losses, downloaded (in double, as the CPU sums them). */
static double mean_loss(struct dtx_cuda_net *g, long rows)
{
    float *h = malloc((size_t)rows * sizeof *h);
    struct dt_error e;
    double s = 0;
    if (!h) {
        keep(g, dt_fail(&e, DT_ENOMEM, NULL, 0, 0, "out of memory"), &e);
        return 0;
    }
    keep(g, dtcuda_to_host(g->cx, h, g->losses, (size_t)rows * sizeof *h, &e), &e);
    for (long r = 0; r < rows && !failed(g); r++)
        s += h[r];
    free(h);
    return s / (double)rows;
}

/* The loss of rows [b0, b0 + nb) and, with grads, the gradient it seeds. */
static int loss_rows(struct dtx_cuda_net *g, const int *labels, int b0, int nb, double denom,
                     double *loss, bool grads, struct dt_error *err)
{
    const int last = g->model->n_layers - 1;
    struct dtk_net_loss lo;
    dtk_net_loss_info(g->host, &lo);
    const long rows = (long)nb * lo.groups;
    int rc = dtk_net_check_loss(g->host, labels, b0, nb, denom, err);
    if (rc)
        return rc;
    for (int i = 0; i <= last && grads; i++)
        if (dtk_net_loss_zeroes(g->host, i))
            zero_rows(g, i, b0, nb);
    const struct dtk_net_layer ll = info(g, last);
    const long off = (long)b0 * ll.out_sz;
    float *probs = dev(g, lo.kind == DTK_LOSS_LOGITS ? lo.probs + off : ll.act + off);
    const float *logits = lo.kind == DTK_LOSS_LOGITS ? dev(g, ll.act + off)
                                                     : in_rows(g, g->model->layers[last].in[0], b0);
    /* the gradient the loss seeds: of the logits, or of a fused softmax's input */
    const int seeded = lo.kind == DTK_LOSS_LOGITS ? last : g->model->layers[last].in[0];
    float *dlogits = grads ? dev(g, dact_rows(g, seeded, b0)) : NULL;
    const int *dlabels = dev(g, labels);
    struct dt_error e;
    if (!failed(g))
        keep(g, dtcuda_softmax_xent_forward(g->cx, probs, g->losses, logits, dlabels, (int)rows,
                                            lo.classes, &e), &e);
    /* each sample's loss is the mean over its labelled positions; samples sum to denom */
    float scale = (float)(1.0 / (denom * (double)lo.groups));
    if (dlogits && !failed(g))
        keep(g, dtcuda_softmax_xent_backward(g->cx, dlogits, probs, dlabels, (int)rows,
                                             lo.classes, scale, &e), &e);
    double l = failed(g) ? 0 : mean_loss(g, rows);
    dtx_cuda_download(g, ll.act + off, (size_t)nb * (size_t)ll.out_sz * sizeof(float));
    if (loss)
        *loss = l;
    return dtx_cuda_status(g, false, err);
}

int dtx_cuda_begin_backward(struct dtx_cuda_net *g, const int *labels, int b0, int nb,
                            double denom, double *loss, struct dt_error *err)
{
    return loss_rows(g, labels, b0, nb, denom, loss, true, err);
}

int dtx_cuda_eval_loss(struct dtx_cuda_net *g, const int *labels, int b0, int nb, double *loss,
                       struct dt_error *err)
{
    return loss_rows(g, labels, b0, nb, nb, loss, false, err);
}
