/* Per-kind part of the model loader: which keys a layer kind takes, how its output shape
 * follows from its inputs, and what it costs (parameters, FLOPs, activation memory).
 *
 * FLOP conventions (per sample; models/README.md has the table):
 * - a multiply-add is 2 FLOPs; a bias add is 1 per output element;
 * - backward-data of a weight op costs what its forward GEMM costs (dX = dY W^T), and so
 *   does backward-weights (dW = X^T dY); model.c zeroes backward-data where no gradient is
 *   needed (the first trainable layer and everything before it);
 * - pointwise layers cost a nominal number of FLOPs per element (table below); they are
 *   memory-bound anyway and the cost model charges their bytes. */
#include "model_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Largest kernel, stride or padding extent accepted (no real network comes close). */
#define MAX_WINDOW 4096
#define MAX_SCALE 64
#define MAX_HEADS 1024

/* ---- keys per kind ---- */

#define COMMON "kind", "name", "input"
#define COMMON_MULTI "kind", "name", "inputs"

static const char *const keys_conv2d[] = {COMMON, "filters", "kernel", "stride", "padding",
                                          "groups", "bias", "activation", NULL};
static const char *const keys_convt[] = {COMMON, "filters", "kernel", "stride", "padding",
                                         "bias", "activation", NULL};
static const char *const keys_pool[] = {COMMON, "kernel", "stride", "padding", NULL};
static const char *const keys_plain[] = {COMMON, NULL};
static const char *const keys_dense[] = {COMMON, "units", "bias", "activation", "tied", NULL};
static const char *const keys_dropout[] = {COMMON, "rate", NULL};
static const char *const keys_batchnorm[] = {COMMON, "eps", "activation", NULL};
static const char *const keys_layernorm[] = {COMMON, "eps", NULL};
static const char *const keys_add[] = {COMMON_MULTI, "activation", NULL};
static const char *const keys_concat[] = {COMMON_MULTI, NULL};
static const char *const keys_upsample[] = {COMMON, "scale", NULL};
static const char *const keys_embedding[] = {COMMON, "dim", "vocab", "positions", "token_types",
                                             NULL};
static const char *const keys_lstm[] = {COMMON, "units", "return_sequences", NULL};
static const char *const keys_attention[] = {COMMON, "heads", NULL};
static const char *const keys_attention_core[] = {COMMON, "heads", "causal", NULL};

const char *const *dt_layer_keys(enum dt_layer_kind kind)
{
    switch (kind) {
    case DT_L_CONV2D: return keys_conv2d;
    case DT_L_CONV2D_TRANSPOSE: return keys_convt;
    case DT_L_MAXPOOL:
    case DT_L_AVGPOOL: return keys_pool;
    case DT_L_DENSE: return keys_dense;
    case DT_L_DROPOUT: return keys_dropout;
    case DT_L_BATCHNORM: return keys_batchnorm;
    case DT_L_LAYERNORM: return keys_layernorm;
    case DT_L_ADD: return keys_add;
    case DT_L_CONCAT: return keys_concat;
    case DT_L_UPSAMPLE: return keys_upsample;
    case DT_L_EMBEDDING: return keys_embedding;
    case DT_L_LSTM: return keys_lstm;
    case DT_L_ATTENTION: return keys_attention;
    case DT_L_ATTENTION_CORE: return keys_attention_core;
    default: return keys_plain;
    }
}

bool dt_layer_multi_input(enum dt_layer_kind kind)
{
    return kind == DT_L_ADD || kind == DT_L_CONCAT;
}

bool dt_layer_takes_activation(enum dt_layer_kind kind)
{
    return kind == DT_L_CONV2D || kind == DT_L_CONV2D_TRANSPOSE || kind == DT_L_DENSE ||
           kind == DT_L_BATCHNORM || kind == DT_L_ADD;
}

/* ---- helpers ---- */

static const struct dt_ynode *key_node(const struct dt_layer_setup *s, const char *key)
{
    return s->node ? dt_ymap_get(s->node, key) : NULL;
}

/* Error at node, or at the layer when node is NULL. */
static int fail_at(const struct dt_layer_setup *s, const struct dt_ynode *node, const char *fmt,
                   ...) __attribute__((format(printf, 3, 4)));
static int fail_at(const struct dt_layer_setup *s, const struct dt_ynode *node, const char *fmt,
                   ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (node)
        dt_vfail(s->err, DT_EINPUT, dt_ydoc_name(s->doc), node->line, node->col, fmt, ap);
    else
        dt_vfail(s->err, DT_EINPUT, dt_ydoc_name(s->doc), s->layer->line, s->layer->col, fmt,
                 ap);
    va_end(ap);
    return DT_EINPUT;
}

static const char *kname(const struct dt_layer_setup *s)
{
    return dt_layer_kind_name(s->layer->kind);
}

/* The error for an input of the wrong rank: names the input and its shape. */
static int bad_input(const struct dt_layer_setup *s, int k, const char *want)
{
    char buf[64];
    dt_shape_format(s->in[k], buf, sizeof buf);
    const struct dt_ynode *where = key_node(s, dt_layer_multi_input(s->layer->kind) ? "inputs"
                                                                                    : "input");
    return fail_at(s, where, "%s layer '%s' needs %s, but its input '%s' is %s", kname(s),
                   s->layer->name, want, s->in_names[k], buf);
}

/* a*b into *out when it neither overflows nor exceeds limit. */
static bool mul_ok(long a, long b, long limit, long *out)
{
    long r;
    if (__builtin_mul_overflow(a, b, &r) || r > limit)
        return false;
    *out = r;
    return true;
}

/* Sets params from a product of factors plus an addend, checking overflow. */
static int set_params(const struct dt_layer_setup *s, long addend, int n, const long *factors)
{
    long p = 1;
    for (int i = 0; i < n; i++)
        if (!mul_ok(p, factors[i], DT_MODEL_MAX_PARAMS, &p))
            goto overflow;
    if (__builtin_add_overflow(p, addend, &p) || p > DT_MODEL_MAX_PARAMS)
        goto overflow;
    s->layer->params = p;
    return DT_OK;
overflow:
    return fail_at(s, NULL, "layer '%s' would have more than %ld parameters", s->layer->name,
                   DT_MODEL_MAX_PARAMS);
}

/* Sets the output shape, checking that every extent is positive and the tensor not absurd. */
static int set_out(const struct dt_layer_setup *s, int rank, long d0, long d1, long d2)
{
    struct dt_shape *o = &s->layer->out_shape;
    long d[3] = {d0, d1, d2};
    long n = 1;
    *o = (struct dt_shape){.rank = rank};
    for (int i = 0; i < rank; i++) {
        if (d[i] < 1)
            return fail_at(s, NULL, "layer '%s' would have an empty output (extent %ld)",
                           s->layer->name, d[i]);
        if (!mul_ok(n, d[i], DT_MODEL_MAX_ELEMS, &n))
            return fail_at(s, NULL,
                           "layer '%s' output is too large (more than %ld values per sample)",
                           s->layer->name, DT_MODEL_MAX_ELEMS);
        o->d[i] = d[i];
    }
    return DT_OK;
}

/* An integer or a [height, width] pair. */
static int get_pair(const struct dt_layer_setup *s, const char *key, bool required, long min,
                    long max, int *h, int *w)
{
    const struct dt_ynode *n = key_node(s, key);
    if (!n) {
        if (required)
            return fail_at(s, s->node, "missing required key '%s'", key);
        return DT_OK;
    }
    long a, b;
    int rc;
    if (n->type == DT_Y_SEQ) {
        if (n->n != 2)
            return fail_at(s, n, "%s must be one integer or a [height, width] pair", key);
        if ((rc = dt_ynode_long(s->doc, n->items[0], min, max, &a, s->err)) ||
            (rc = dt_ynode_long(s->doc, n->items[1], min, max, &b, s->err)))
            return rc;
    } else {
        if ((rc = dt_ynode_long(s->doc, n, min, max, &a, s->err)))
            return rc;
        b = a;
    }
    *h = (int)a;
    *w = (int)b;
    return DT_OK;
}

enum pad_mode { PAD_EXPLICIT, PAD_VALID, PAD_SAME };

/* padding: valid | same | <pixels> | [height, width]. */
static int get_padding(const struct dt_layer_setup *s, enum pad_mode *mode, int *ph, int *pw)
{
    const struct dt_ynode *n = key_node(s, "padding");
    *mode = PAD_VALID;
    *ph = *pw = 0;
    if (!n)
        return DT_OK;
    if (n->type == DT_Y_SCALAR && strcmp(n->value, "valid") == 0)
        return DT_OK;
    if (n->type == DT_Y_SCALAR && strcmp(n->value, "same") == 0) {
        *mode = PAD_SAME;
        return DT_OK;
    }
    if (n->type == DT_Y_SCALAR && !n->quoted && (n->value[0] == '-' || (n->value[0] >= '0' &&
                                                                        n->value[0] <= '9'))) {
        *mode = PAD_EXPLICIT;
        return get_pair(s, "padding", false, 0, MAX_WINDOW, ph, pw);
    }
    if (n->type == DT_Y_SEQ) {
        *mode = PAD_EXPLICIT;
        return get_pair(s, "padding", false, 0, MAX_WINDOW, ph, pw);
    }
    return fail_at(s, n, "padding must be valid, same, a number of pixels or [height, width]%s%s%s",
                   n->type == DT_Y_SCALAR ? ", found '" : "",
                   n->type == DT_Y_SCALAR ? n->value : "", n->type == DT_Y_SCALAR ? "'" : "");
}

/* Output extent of a sliding window along one axis, with TensorFlow's "same" rule (the odd
 * pixel of padding goes to the bottom/right). Returns the extent, or 0 when the kernel does
 * not fit. */
static long window_out(long in, int k, int stride, enum pad_mode mode, int p, int *pa, int *pb)
{
    if (mode == PAD_SAME) {
        long out = (in + stride - 1) / stride;
        long total = (out - 1) * stride + k - in;
        if (total < 0)
            total = 0;
        *pa = (int)(total / 2);
        *pb = (int)(total - total / 2);
        return out;
    }
    *pa = *pb = p;
    if (in + 2L * p < k)
        return 0;
    return (in + 2L * p - k) / stride + 1;
}

/* Resolves a conv/pool window over a (C,H,W) input into padding and output H, W. */
static int resolve_window(const struct dt_layer_setup *s, bool pool, long *oh, long *ow)
{
    struct dt_layer *l = s->layer;
    enum pad_mode mode;
    int ph, pw, rc;
    l->sh = l->sw = 1;
    if ((rc = get_pair(s, "kernel", true, 1, MAX_WINDOW, &l->kh, &l->kw)))
        return rc;
    if (pool) {
        l->sh = l->kh;
        l->sw = l->kw;
    }
    if ((rc = get_pair(s, "stride", false, 1, MAX_WINDOW, &l->sh, &l->sw)) ||
        (rc = get_padding(s, &mode, &ph, &pw)))
        return rc;
    if (pool && mode == PAD_EXPLICIT && (2 * ph > l->kh || 2 * pw > l->kw))
        return fail_at(s, key_node(s, "padding"),
                       "padding %dx%d is more than half the %dx%d pooling window", ph, pw, l->kh,
                       l->kw);
    long h = s->in[0]->d[1], w = s->in[0]->d[2];
    *oh = window_out(h, l->kh, l->sh, mode, ph, &l->pad_t, &l->pad_b);
    *ow = window_out(w, l->kw, l->sw, mode, pw, &l->pad_l, &l->pad_r);
    if (*oh == 0 || *ow == 0)
        return fail_at(s, key_node(s, "kernel"),
                       "the %dx%d kernel does not fit the %ldx%ld input of layer '%s' "
                       "(padding %dx%d)",
                       l->kh, l->kw, h, w, l->name, ph, pw);
    return DT_OK;
}

static int get_units(const struct dt_layer_setup *s, const char *key, long *out)
{
    return dt_yget_long(s->doc, s->node, key, true, 1, DT_MODEL_MAX_UNITS, out, s->err);
}

/* Nominal FLOPs per element of pointwise layers: forward, backward-data. */
static void pointwise_cost(enum dt_layer_kind kind, double *fwd, double *bwd)
{
    switch (kind) {
    case DT_L_RELU: *fwd = 1, *bwd = 1; break;       /* max(x,0); mask */
    case DT_L_TANH: *fwd = 4, *bwd = 3; break;       /* exp-based; g*(1-y*y) */
    case DT_L_SIGMOID: *fwd = 4, *bwd = 3; break;    /* 1/(1+exp(-x)); g*y*(1-y) */
    case DT_L_GELU: *fwd = 8, *bwd = 12; break;      /* tanh approximation */
    case DT_L_SOFTMAX: *fwd = 5, *bwd = 2; break;    /* max, sub, exp, sum, div; p - y (fused) */
    case DT_L_DROPOUT: *fwd = 2, *bwd = 1; break;    /* draw+mask, scale; mask */
    default: *fwd = 0, *bwd = 0; break;
    }
}

/* ---- kinds ---- */

static int setup_conv2d(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    int rc;
    if (s->in[0]->rank != 3)
        return bad_input(s, 0, "a (C,H,W) input");
    l->groups = 1;
    l->bias = true;
    if ((rc = get_units(s, "filters", &l->units)) ||
        (rc = dt_yget_int(s->doc, s->node, "groups", false, 1, 1 << 20, &l->groups, s->err)) ||
        (rc = dt_yget_bool(s->doc, s->node, "bias", false, &l->bias, s->err)))
        return rc;
    long c = s->in[0]->d[0];
    if (c % l->groups || l->units % l->groups)
        return fail_at(s, key_node(s, "groups"),
                       "groups (%d) must divide both the %ld input channels and the %ld filters",
                       l->groups, c, l->units);
    long oh, ow;
    if ((rc = resolve_window(s, false, &oh, &ow)) || (rc = set_out(s, 3, l->units, oh, ow)))
        return rc;
    long f[] = {l->units, c / l->groups, l->kh, l->kw};
    if ((rc = set_params(s, l->bias ? l->units : 0, 4, f)))
        return rc;
    double outn = (double)dt_shape_size(&l->out_shape);
    double macs = outn * (double)(c / l->groups) * l->kh * l->kw;
    double b = l->bias ? outn : 0;
    l->fwd_flops = 2 * macs + b;
    l->bwd_data_flops = 2 * macs;
    l->bwd_weight_flops = 2 * macs + b;
    return DT_OK;
}

static int setup_conv2d_transpose(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    int rc, ph, pw;
    enum pad_mode mode;
    if (s->in[0]->rank != 3)
        return bad_input(s, 0, "a (C,H,W) input");
    l->groups = 1;
    l->bias = true;
    l->sh = l->sw = 1;
    if ((rc = get_units(s, "filters", &l->units)) ||
        (rc = dt_yget_bool(s->doc, s->node, "bias", false, &l->bias, s->err)) ||
        (rc = get_pair(s, "kernel", true, 1, MAX_WINDOW, &l->kh, &l->kw)) ||
        (rc = get_pair(s, "stride", false, 1, MAX_WINDOW, &l->sh, &l->sw)) ||
        (rc = get_padding(s, &mode, &ph, &pw)))
        return rc;
    long c = s->in[0]->d[0], h = s->in[0]->d[1], w = s->in[0]->d[2];
    long oh, ow;
    if (mode == PAD_SAME) {
        /* TensorFlow: output = input * stride; the kernel overhang is cropped. */
        if (l->kh < l->sh || l->kw < l->sw)
            return fail_at(s, key_node(s, "padding"),
                           "padding: same needs a kernel at least as large as the stride");
        oh = h * l->sh;
        ow = w * l->sw;
        l->pad_t = (l->kh - l->sh) / 2;
        l->pad_b = l->kh - l->sh - l->pad_t;
        l->pad_l = (l->kw - l->sw) / 2;
        l->pad_r = l->kw - l->sw - l->pad_l;
    } else {
        l->pad_t = l->pad_b = ph;
        l->pad_l = l->pad_r = pw;
        oh = (h - 1) * l->sh + l->kh - 2L * ph;
        ow = (w - 1) * l->sw + l->kw - 2L * pw;
        if (oh < 1 || ow < 1)
            return fail_at(s, key_node(s, "padding"),
                           "padding %dx%d crops the whole output of layer '%s'", ph, pw, l->name);
    }
    if ((rc = set_out(s, 3, l->units, oh, ow)))
        return rc;
    long f[] = {c, l->units, l->kh, l->kw};
    if ((rc = set_params(s, l->bias ? l->units : 0, 4, f)))
        return rc;
    /* Every input pixel scatters a kh x kw x filters patch. */
    double macs = (double)c * h * w * (double)l->units * l->kh * l->kw;
    double b = l->bias ? (double)dt_shape_size(&l->out_shape) : 0;
    l->fwd_flops = 2 * macs + b;
    l->bwd_data_flops = 2 * macs;
    l->bwd_weight_flops = 2 * macs + b;
    return DT_OK;
}

static int setup_pool(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    int rc;
    if (s->in[0]->rank != 3)
        return bad_input(s, 0, "a (C,H,W) input");
    long oh, ow;
    if ((rc = resolve_window(s, true, &oh, &ow)) ||
        (rc = set_out(s, 3, s->in[0]->d[0], oh, ow)))
        return rc;
    double outn = (double)dt_shape_size(&l->out_shape);
    l->fwd_flops = outn * l->kh * l->kw;
    /* max: route each gradient to its argmax; avg: spread it over the window. */
    l->bwd_data_flops = l->kind == DT_L_MAXPOOL ? outn : outn * l->kh * l->kw;
    return DT_OK;
}

static int setup_globalpool(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    if (s->in[0]->rank != 3)
        return bad_input(s, 0, "a (C,H,W) input");
    double n = (double)dt_shape_size(s->in[0]);
    l->fwd_flops = n;
    l->bwd_data_flops = n;
    return set_out(s, 1, s->in[0]->d[0], 0, 0);
}

/* tied: <embedding>: the layer's W is that embedding's token table (vocab x dim), as GPT-2's
 * LM head reuses wte. It has no parameters and no bias of its own; units default to the
 * table's vocab. Sets l->tied_layer and l->units. */
static int setup_tied(struct dt_layer_setup *s, long width)
{
    struct dt_layer *l = s->layer;
    const struct dt_ynode *tn = key_node(s, "tied");
    const char *name = NULL;
    int rc = dt_yget_str(s->doc, s->node, "tied", true, &name, s->err);
    if (rc)
        return rc;
    int j = dt_model_find_layer(s->model, name);
    if (j < 0)
        return fail_at(s, tn, "tied: no layer named '%s' before this one", name);
    const struct dt_layer *e = &s->model->layers[j];
    if (e->kind != DT_L_EMBEDDING)
        return fail_at(s, tn,
                       "tied: '%s' is a %s layer; a dense layer can only be tied to an "
                       "embedding (it reuses the token table)",
                       name, dt_layer_kind_name(e->kind));
    if (width != e->units)
        return fail_at(s, tn,
                       "dense layer '%s' tied to '%s' needs inputs of the table's width %ld, "
                       "but its input '%s' has width %ld",
                       l->name, name, e->units, s->in_names[0], width);
    const struct dt_ynode *un = key_node(s, "units");
    if (un && (rc = get_units(s, "units", &l->units)))
        return rc;
    if (un && l->units != e->vocab)
        return fail_at(s, un, "units %ld differ from the vocab %ld of the tied table '%s'",
                       l->units, e->vocab, name);
    if (l->bias)
        return fail_at(s, key_node(s, "bias"),
                       "a tied dense layer has no bias (it reuses the table alone)");
    l->units = e->vocab;
    l->tied = true;
    l->tied_layer = j;
    return DT_OK;
}

static int setup_dense(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    const struct dt_shape *in = s->in[0];
    const bool tied = key_node(s, "tied") != NULL;
    int rc;
    l->bias = !tied;
    if ((!tied && (rc = get_units(s, "units", &l->units))) ||
        (rc = dt_yget_bool(s->doc, s->node, "bias", false, &l->bias, s->err)))
        return rc;
    if (in->rank == 3)
        return bad_input(s, 0, "a flat (N) or sequence (T,D) input (add a flatten layer "
                               "before it)");
    long d = in->d[in->rank - 1];
    long t = in->rank == 2 ? in->d[0] : 1;
    if (tied && (rc = setup_tied(s, d)))
        return rc;
    if ((rc = in->rank == 2 ? set_out(s, 2, t, l->units, 0) : set_out(s, 1, l->units, 0, 0)))
        return rc;
    long f[] = {tied ? 0 : d, l->units};
    if ((rc = set_params(s, l->bias ? l->units : 0, 2, f)))
        return rc;
    double macs = (double)t * d * l->units;
    double b = l->bias ? (double)t * l->units : 0;
    l->fwd_flops = 2 * macs + b;
    l->bwd_data_flops = 2 * macs;
    l->bwd_weight_flops = 2 * macs + b;
    return DT_OK;
}

static int setup_flatten(struct dt_layer_setup *s)
{
    return set_out(s, 1, dt_shape_size(s->in[0]), 0, 0);
}

/* relu, tanh, sigmoid, gelu, softmax, dropout: same shape, nominal cost per element. */
static int setup_pointwise(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    if (l->kind == DT_L_DROPOUT) {
        int rc = dt_yget_double(s->doc, s->node, "rate", true, 0, 1, &l->rate, s->err);
        if (rc)
            return rc;
        if (l->rate >= 1)
            return fail_at(s, key_node(s, "rate"),
                           "dropout rate must be below 1 (it is the fraction dropped)");
    }
    l->out_shape = *s->in[0];
    double n = (double)dt_shape_size(s->in[0]), f, b;
    pointwise_cost(l->kind, &f, &b);
    l->fwd_flops = f * n;
    l->bwd_data_flops = b * n;
    return DT_OK;
}

/* batchnorm (per channel of (C,H,W), per feature otherwise) and layernorm (last axis). */
static int setup_norm(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    const struct dt_shape *in = s->in[0];
    l->eps = 1e-5; /* PyTorch's default */
    int rc = dt_yget_double(s->doc, s->node, "eps", false, 0, 1, &l->eps, s->err);
    if (rc)
        return rc;
    if (!(l->eps > 0))
        return fail_at(s, key_node(s, "eps"), "eps must be above 0");
    long c;
    if (l->kind == DT_L_LAYERNORM) {
        if (in->rank == 3)
            return bad_input(s, 0, "a (N) or (T,D) input (it normalises the last axis)");
        c = in->d[in->rank - 1];
    } else {
        c = in->rank == 3 ? in->d[0] : in->d[in->rank - 1];
        l->state_floats = 2 * c; /* running mean and variance */
    }
    l->out_shape = *in;
    if ((rc = set_params(s, 0, 2, (long[]){2, c})))
        return rc;
    double n = (double)dt_shape_size(in);
    /* statistics 3, normalise 2, scale and shift 2; backward: about 9 and dgamma/dbeta 3 */
    l->fwd_flops = 7 * n;
    l->bwd_data_flops = 9 * n;
    l->bwd_weight_flops = 3 * n;
    return DT_OK;
}

static int setup_add(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    const struct dt_ynode *items = key_node(s, "inputs");
    for (int k = 1; k < l->n_in; k++) {
        const struct dt_shape *a = s->in[0], *b = s->in[k];
        if (a->rank != b->rank || memcmp(a->d, b->d, sizeof a->d[0] * (size_t)a->rank)) {
            char sa[64], sb[64];
            dt_shape_format(a, sa, sizeof sa);
            dt_shape_format(b, sb, sizeof sb);
            return fail_at(s, items ? items->items[k] : NULL,
                           "add needs inputs of one shape: '%s' is %s but '%s' is %s",
                           s->in_names[0], sa, s->in_names[k], sb);
        }
    }
    l->out_shape = *s->in[0];
    double n = (double)dt_shape_size(s->in[0]);
    l->fwd_flops = (l->n_in - 1) * n;
    l->bwd_data_flops = (l->n_in - 1) * n; /* the gradient is added into each branch */
    return DT_OK;
}

/* Concatenation along the feature axis: channels of (C,H,W), D of (T,D), N of (N). */
static int setup_concat(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    const struct dt_ynode *items = key_node(s, "inputs");
    const struct dt_shape *a = s->in[0];
    int axis = a->rank == 3 ? 0 : a->rank - 1;
    long sum = 0;
    for (int k = 0; k < l->n_in; k++) {
        const struct dt_shape *b = s->in[k];
        bool ok = b->rank == a->rank;
        for (int i = 0; ok && i < a->rank; i++)
            ok = i == axis || a->d[i] == b->d[i];
        if (!ok) {
            char sa[64], sb[64];
            dt_shape_format(a, sa, sizeof sa);
            dt_shape_format(b, sb, sizeof sb);
            return fail_at(s, items ? items->items[k] : NULL,
                           "concat needs inputs that differ only in %s: '%s' is %s but '%s' is %s",
                           a->rank == 3 ? "channels" : "the last axis", s->in_names[0], sa,
                           s->in_names[k], sb);
        }
        sum += b->d[axis];
        if (sum > DT_MODEL_MAX_ELEMS)
            return fail_at(s, items, "concat output is too large");
    }
    long d[3] = {a->d[0], a->d[1], a->d[2]};
    d[axis] = sum;
    return set_out(s, a->rank, d[0], d[1], d[2]);
}

static int setup_upsample(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    const struct dt_shape *in = s->in[0];
    l->scale = 2;
    int rc = dt_yget_int(s->doc, s->node, "scale", false, 1, MAX_SCALE, &l->scale, s->err);
    if (rc)
        return rc;
    if (in->rank != 3)
        return bad_input(s, 0, "a (C,H,W) input");
    if ((rc = set_out(s, 3, in->d[0], in->d[1] * l->scale, in->d[2] * l->scale)))
        return rc;
    l->bwd_data_flops = (double)dt_shape_size(&l->out_shape); /* sum each block */
    return DT_OK;
}

static int setup_embedding(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    const struct dt_model *m = s->model;
    int rc;
    if (l->in[0] != -1 || !m->input_is_tokens)
        return fail_at(s, key_node(s, "input"),
                       "embedding layer '%s' must read the model's token input "
                       "(input: {tokens: T, vocab: V})",
                       l->name);
    long t = s->in[0]->d[0];
    l->vocab = m->vocab;
    if ((rc = get_units(s, "dim", &l->units)) ||
        (rc = dt_yget_long(s->doc, s->node, "vocab", false, 1, DT_MODEL_MAX_UNITS, &l->vocab,
                           s->err)) ||
        (rc = dt_yget_long(s->doc, s->node, "positions", false, 1, DT_MODEL_MAX_UNITS,
                           &l->positions, s->err)) ||
        (rc = dt_yget_long(s->doc, s->node, "token_types", false, 1, DT_MODEL_MAX_UNITS,
                           &l->token_types, s->err)))
        return rc;
    if (l->vocab < m->vocab)
        return fail_at(s, key_node(s, "vocab"),
                       "vocab %ld is smaller than the input's vocab %ld: token ids would fall "
                       "outside the table",
                       l->vocab, m->vocab);
    if (l->positions && l->positions < t)
        return fail_at(s, key_node(s, "positions"),
                       "positions %ld do not cover the %ld tokens of the input", l->positions, t);
    if ((rc = set_out(s, 2, t, l->units, 0)))
        return rc;
    long rows = l->vocab + l->positions + l->token_types;
    if ((rc = set_params(s, 0, 2, (long[]){rows, l->units})))
        return rc;
    int tables = 1 + (l->positions > 0) + (l->token_types > 0);
    double n = (double)t * l->units;
    l->fwd_flops = (tables - 1) * n; /* the looked-up rows are summed */
    l->bwd_weight_flops = tables * n; /* scatter-add into the used rows */
    return DT_OK;
}

static int setup_lstm(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    const struct dt_shape *in = s->in[0];
    int rc;
    if ((rc = get_units(s, "units", &l->units)) ||
        (rc = dt_yget_bool(s->doc, s->node, "return_sequences", false, &l->return_sequences,
                           s->err)))
        return rc;
    if (in->rank != 2)
        return bad_input(s, 0, "a sequence (T,D) input");
    long t = in->d[0], d = in->d[1], h = l->units;
    if ((rc = l->return_sequences ? set_out(s, 2, t, h, 0) : set_out(s, 1, h, 0, 0)))
        return rc;
    long f[] = {4 * h, d + h};
    if ((rc = set_params(s, 4 * h, 2, f)))
        return rc;
    /* Per step: gates = W_x x + W_h h + b (4H x (D+H) MACs), then about 24 FLOPs per unit for
     * the sigmoids, tanhs and the cell update. Backward-weights includes backpropagation
     * through time (dh_{t-1} = W_h^T dgates), which the weights need even without dX. */
    double gemm = 2.0 * 4 * h * (double)(d + h);
    l->fwd_flops = t * (gemm + 4.0 * h + 24.0 * h);
    l->bwd_data_flops = t * 2.0 * 4 * h * (double)d;
    l->bwd_weight_flops = t * (gemm + 4.0 * h + 2.0 * 4 * h * (double)h + 30.0 * h);
    return DT_OK;
}

static int setup_attention(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    const struct dt_shape *in = s->in[0];
    int rc = dt_yget_int(s->doc, s->node, "heads", true, 1, MAX_HEADS, &l->heads, s->err);
    if (rc)
        return rc;
    if (in->rank != 2)
        return bad_input(s, 0, "a sequence (T,D) input");
    long t = in->d[0], d = in->d[1];
    if (d % l->heads)
        return fail_at(s, key_node(s, "heads"), "heads (%d) must divide the model width %ld",
                       l->heads, d);
    l->units = d;
    l->out_shape = *in;
    if ((rc = set_params(s, 4 * d, 3, (long[]){4, d, d})))
        return rc;
    /* Projections Q,K,V,O: 4 T D^2 MACs; scores Q K^T and context P V: 2 T^2 D MACs;
     * softmax over heads x T x T scores (scale included: 6 per score). */
    double td = (double)t * d, ttd = (double)t * t * d, htt = (double)l->heads * t * t;
    l->fwd_flops = 2 * 4 * td * d + 4 * td + 2 * 2 * ttd + 6 * htt;
    /* dX = sum of the Q, K, V projections' input gradients. Everything else (dW, db, the
     * gradient through Wo, softmax and both T^2 products) is needed for the weights. */
    l->bwd_data_flops = 2 * 3 * td * d;
    l->bwd_weight_flops = 2 * 4 * td * d + 4 * td + 2 * td * d + 2 * 4 * ttd + 4 * htt;
    return DT_OK;
}

/* The attention core of a transformer layer as llm.c and Megatron-LM cut it: q|k|v side by
 * side in (T, 3D) from a dense layer, per head softmax(q k^T / sqrt(D/heads)) v into (T, D),
 * which a dense output projection reads. No parameters. */
static int setup_attention_core(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    const struct dt_shape *in = s->in[0];
    int rc;
    if ((rc = dt_yget_int(s->doc, s->node, "heads", true, 1, MAX_HEADS, &l->heads, s->err)) ||
        (rc = dt_yget_bool(s->doc, s->node, "causal", false, &l->causal, s->err)))
        return rc;
    if (in->rank != 2 || in->d[1] % 3)
        return bad_input(s, 0, "a (T, 3D) input: q, k and v side by side (a dense layer of "
                               "3D units)");
    long t = in->d[0], d = in->d[1] / 3;
    if (d % l->heads)
        return fail_at(s, key_node(s, "heads"), "heads (%d) must divide the width %ld (a third "
                       "of the input's %ld)", l->heads, d, in->d[1]);
    l->units = d;
    if ((rc = set_out(s, 2, t, d, 0)))
        return rc;
    /* scores q k^T and context P v: 2 T^2 D MACs; scale, mask and softmax 6 per score. The
     * causal mask saves nothing: the kernels multiply whole T x T blocks (as GEMMs do and as
     * Megatron's FLOP formula counts them). Backward: dP = dY v^T, dv = P^T dY, dq, dk: 4 T^2 D
     * MACs, softmax 4 per score. All of it is input gradient: there are no weights. */
    double ttd = (double)t * t * d, htt = (double)l->heads * t * t;
    l->fwd_flops = 2 * 2 * ttd + 6 * htt;
    l->bwd_data_flops = 2 * 4 * ttd + 4 * htt;
    return DT_OK;
}

static int setup_seqpool(struct dt_layer_setup *s)
{
    if (s->in[0]->rank != 2)
        return bad_input(s, 0, "a sequence (T,D) input");
    return set_out(s, 1, s->in[0]->d[1], 0, 0);
}

/* What training keeps per sample for backward, in bytes (fp32 unless said). */
static double act_bytes(const struct dt_layer *l, const struct dt_shape *in)
{
    double out = (double)dt_shape_size(&l->out_shape);
    switch (l->kind) {
    case DT_L_FLATTEN:
        return 0; /* a view of its input */
    case DT_L_DROPOUT:
        return 4 * out + out; /* output and a byte mask */
    case DT_L_MAXPOOL:
        return 8 * out; /* output and int32 argmax */
    case DT_L_BATCHNORM:
    case DT_L_LAYERNORM: {
        long rows = l->kind == DT_L_BATCHNORM ? (in->rank == 3 ? in->d[0] : in->d[in->rank - 1])
                                              : (in->rank == 2 ? in->d[0] : 1);
        return 8 * out + 8.0 * rows; /* output, normalised input, mean and 1/std */
    }
    case DT_L_LSTM: {
        double t = (double)in->d[0], h = (double)l->units;
        return 4 * t * 6 * h; /* per step: 4 gates, cell and hidden state */
    }
    case DT_L_ATTENTION: {
        double t = (double)in->d[0], d = (double)in->d[1];
        return 4 * (5 * t * d + l->heads * t * t); /* Q, K, V, context, output; P */
    }
    case DT_L_ATTENTION_CORE:
        return 4 * (out + (double)l->heads * in->d[0] * in->d[0]); /* output; P */
    default:
        return 4 * out;
    }
}

int dt_layer_setup(struct dt_layer_setup *s)
{
    struct dt_layer *l = s->layer;
    int rc;
    switch (l->kind) {
    case DT_L_CONV2D: rc = setup_conv2d(s); break;
    case DT_L_CONV2D_TRANSPOSE: rc = setup_conv2d_transpose(s); break;
    case DT_L_MAXPOOL:
    case DT_L_AVGPOOL: rc = setup_pool(s); break;
    case DT_L_GLOBALPOOL: rc = setup_globalpool(s); break;
    case DT_L_DENSE: rc = setup_dense(s); break;
    case DT_L_FLATTEN: rc = setup_flatten(s); break;
    case DT_L_DROPOUT:
    case DT_L_RELU:
    case DT_L_TANH:
    case DT_L_SIGMOID:
    case DT_L_GELU:
    case DT_L_SOFTMAX: rc = setup_pointwise(s); break;
    case DT_L_BATCHNORM:
    case DT_L_LAYERNORM: rc = setup_norm(s); break;
    case DT_L_ADD: rc = setup_add(s); break;
    case DT_L_CONCAT: rc = setup_concat(s); break;
    case DT_L_UPSAMPLE: rc = setup_upsample(s); break;
    case DT_L_EMBEDDING: rc = setup_embedding(s); break;
    case DT_L_LSTM: rc = setup_lstm(s); break;
    case DT_L_ATTENTION: rc = setup_attention(s); break;
    case DT_L_SEQPOOL: rc = setup_seqpool(s); break;
    case DT_L_ATTENTION_CORE: rc = setup_attention_core(s); break;
    default: return fail_at(s, NULL, "internal error: unknown layer kind %d", (int)l->kind);
    }
    if (rc)
        return rc;
    l->in_shape = *s->in[0];
    l->act_bytes = act_bytes(l, s->in[0]);
    return DT_OK;
}
