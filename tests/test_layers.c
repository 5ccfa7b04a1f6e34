/* Tests of the CPU layer kernels (exec/cpu/layers.h).
 *
 * Gradient checks: for a layer y = f(x, w, b) and a fixed random r, the scalar
 * L = sum_i r_i y_i has dL/dy = r, so backward(dout = r) must give dL/dx, dL/dw, dL/db.
 * Each is compared with the central difference (L(v + h) - L(v - h)) / 2h, L summed in double
 * from the float forward, with h = GC_H, on every element (or GC_MAX_CHECK elements picked
 * at random in larger arrays). Tolerance: |numeric - analytic| <= GC_ATOL + GC_RTOL |analytic|.
 * With h = 1e-2 the truncation error h^2 f'''/6 is ~1e-5 and float rounding of L (~1e-6 over
 * a few hundred outputs) divided by 2h is ~1e-4, both well inside GC_ATOL; a wrong factor or
 * a missing term gives errors of order 1. Inputs of relu and max pooling are kept at least
 * 4h away from their kinks so the difference does not straddle one.
 * Backward accumulates: every check starts from gradients holding GC_SEED_GRAD, which the
 * analytic result must keep (it is subtracted before the comparison). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

#define GC_H 1e-2
#define GC_ATOL 5e-3
#define GC_RTOL 1e-2
#define GC_MAX_CHECK 150
#define GC_SEED_GRAD 0.25f

struct gvar {
    const char *name;
    float *x, *dx;
    long n;
};

struct gcheck {
    void (*fwd)(void *ctx);
    void (*bwd)(void *ctx); /* reads dout from *out_grad */
    void *ctx;
    float *out;
    long n_out;
    float *dout;
    int n_vars;
    struct gvar var[5];
};

static struct dtk_rng trng;

static float *fbuf(long n)
{
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    assert_non_null(p);
    return p;
}

static float *frand(long n, float lo, float hi)
{
    float *p = fbuf(n);
    for (long i = 0; i < n; i++)
        p[i] = dtk_rng_uniform_range(&trng, lo, hi);
    return p;
}

/* Values away from 0 by at least 4h: uniform in [-hi, -lo] U [lo, hi]. */
static float *frand_nonzero(long n, float lo, float hi)
{
    float *p = fbuf(n);
    for (long i = 0; i < n; i++) {
        float v = dtk_rng_uniform_range(&trng, lo, hi);
        p[i] = dtk_rng_uniform(&trng) < 0.5f ? -v : v;
    }
    return p;
}

static double objective(struct gcheck *g)
{
    g->fwd(g->ctx);
    double s = 0.0;
    for (long i = 0; i < g->n_out; i++)
        s += (double)g->out[i] * g->dout[i];
    return s;
}

/* Runs the check; returns the number of mismatches (printed). */
static int gradcheck(struct gcheck *g)
{
    int bad = 0;
    for (long i = 0; i < g->n_out; i++)
        g->dout[i] = dtk_rng_uniform_range(&trng, -1.0f, 1.0f);
    for (int v = 0; v < g->n_vars; v++)
        if (g->var[v].dx)
            for (long i = 0; i < g->var[v].n; i++)
                g->var[v].dx[i] = GC_SEED_GRAD;
    g->fwd(g->ctx);
    g->bwd(g->ctx);
    for (int v = 0; v < g->n_vars; v++) {
        struct gvar *gv = &g->var[v];
        if (!gv->dx)
            continue;
        long checks = gv->n < GC_MAX_CHECK ? gv->n : GC_MAX_CHECK;
        for (long c = 0; c < checks; c++) {
            long i = gv->n <= GC_MAX_CHECK ? c : (long)dtk_rng_below(&trng, (uint64_t)gv->n);
            float keep = gv->x[i];
            gv->x[i] = keep + (float)GC_H;
            double lp = objective(g);
            gv->x[i] = keep - (float)GC_H;
            double lm = objective(g);
            gv->x[i] = keep;
            /* the perturbation actually applied, in float */
            double step = (double)(keep + (float)GC_H) - (double)(keep - (float)GC_H);
            double num = (lp - lm) / step;
            double ana = (double)gv->dx[i] - GC_SEED_GRAD;
            if (fabs(num - ana) > GC_ATOL + GC_RTOL * fabs(ana)) {
                if (bad < 8)
                    print_error("  %s[%ld]: numeric %.6f analytic %.6f\n", gv->name, i, num, ana);
                bad++;
            }
        }
    }
    return bad;
}

/* ---------------------------------------------------------------- dense */

struct dense_ctx {
    int N, in, out;
    float *x, *w, *b, *y, *dx, *dw, *db, *dy;
};

static void dense_fwd(void *p)
{
    struct dense_ctx *c = p;
    dtk_dense_forward(c->y, c->x, c->w, c->b, c->N, c->in, c->out);
}

static void dense_bwd(void *p)
{
    struct dense_ctx *c = p;
    dtk_dense_backward(c->dx, c->dw, c->db, c->dy, c->x, c->w, c->N, c->in, c->out);
}

/* Ensure that dense forward equals the hand-written sum y = x W^T + b. */
static void test_dense_forward_values(void **state)
{
    (void)state;
    /* x = [1 2], W = [[1 0], [2 -1], [0.5 3]], b = [0.5 0 -1]:
     * y = [1+0.5, 2-2+0, 0.5+6-1] = [1.5, 0, 5.5] (by hand). */
    float x[2] = {1, 2}, w[6] = {1, 0, 2, -1, 0.5f, 3}, b[3] = {0.5f, 0, -1}, y[3];
    dtk_dense_forward(y, x, w, b, 1, 2, 3);
    assert_float_equal(y[0], 1.5f, 1e-6f);
    assert_float_equal(y[1], 0.0f, 1e-6f);
    assert_float_equal(y[2], 5.5f, 1e-6f);
}

/* Ensure that dense backward matches finite differences for input, weight and bias. */
static void test_dense_gradcheck(void **state)
{
    (void)state;
    struct dense_ctx c = {.N = 3, .in = 5, .out = 4};
    c.x = frand(15, -1, 1), c.w = frand(20, -1, 1), c.b = frand(4, -1, 1);
    c.y = fbuf(12), c.dx = fbuf(15), c.dw = fbuf(20), c.db = fbuf(4), c.dy = fbuf(12);
    struct gcheck g = {dense_fwd, dense_bwd, &c, c.y, 12, c.dy, 3,
                       {{"x", c.x, c.dx, 15}, {"w", c.w, c.dw, 20}, {"b", c.b, c.db, 4}}};
    assert_int_equal(gradcheck(&g), 0);
    free(c.x), free(c.w), free(c.b), free(c.y), free(c.dx), free(c.dw), free(c.db), free(c.dy);
}

/* ---------------------------------------------------------------- conv2d */

struct conv_ctx {
    struct dtk_conv_dims d;
    bool transpose;
    float *x, *w, *b, *y, *dx, *dw, *db, *dy, *work;
};

static void conv_fwd(void *p)
{
    struct conv_ctx *c = p;
    if (c->transpose)
        dtk_convt_forward(c->y, c->work, c->x, c->w, c->b, &c->d);
    else
        dtk_conv2d_forward(c->y, c->work, c->x, c->w, c->b, &c->d);
}

static void conv_bwd(void *p)
{
    struct conv_ctx *c = p;
    if (c->transpose)
        dtk_convt_backward(c->dx, c->dw, c->db, c->work, c->dy, c->x, c->w, &c->d);
    else
        dtk_conv2d_backward(c->dx, c->dw, c->db, c->work, c->dy, c->x, c->w, &c->d);
}

/* Direct convolution in double, the definition: y[b][f][oh][ow] = bias[f] +
 * sum_{c in group, i, j} W[f][c'][i][j] x[b][c][oh*sh - pt + i][ow*sw - pl + j]. */
static double conv_ref(const struct conv_ctx *c, int b, int f, int oh, int ow)
{
    const struct dtk_conv_dims *d = &c->d;
    int G = d->groups, Cg = d->C / G, g = f / (d->F / G);
    double s = c->b ? c->b[f] : 0.0;
    for (int cc = 0; cc < Cg; cc++)
        for (int i = 0; i < d->kh; i++)
            for (int j = 0; j < d->kw; j++) {
                int ih = oh * d->sh - d->pad_t + i, iw = ow * d->sw - d->pad_l + j;
                if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W)
                    continue;
                int ch = g * Cg + cc;
                s += (double)c->w[((f * Cg + cc) * d->kh + i) * d->kw + j] *
                     c->x[(((long)b * d->C + ch) * d->H + ih) * d->W + iw];
            }
    return s;
}

static void conv_setup(struct conv_ctx *c, bool transpose)
{
    c->transpose = transpose;
    assert_true(transpose ? dtk_convt_dims_finish(&c->d) : dtk_conv_dims_finish(&c->d));
    const struct dtk_conv_dims *d = &c->d;
    long nx = (long)d->B * d->C * d->H * d->W, ny = (long)d->B * d->F * d->OH * d->OW;
    long nw = (long)d->F * (d->C / d->groups) * d->kh * d->kw;
    c->x = frand(nx, -1, 1), c->w = frand(nw, -1, 1), c->b = frand(d->F, -1, 1);
    c->y = fbuf(ny), c->dx = fbuf(nx), c->dw = fbuf(nw), c->db = fbuf(d->F), c->dy = fbuf(ny);
    c->work = fbuf(transpose ? dtk_convt_workspace_floats(d) : dtk_conv2d_workspace_floats(d));
}

static void conv_free(struct conv_ctx *c)
{
    free(c->x), free(c->w), free(c->b), free(c->y), free(c->dx), free(c->dw), free(c->db);
    free(c->dy), free(c->work);
}

static int conv_check(struct conv_ctx *c)
{
    const struct dtk_conv_dims *d = &c->d;
    long nx = (long)d->B * d->C * d->H * d->W, ny = (long)d->B * d->F * d->OH * d->OW;
    long nw = (long)d->F * (d->C / d->groups) * d->kh * d->kw;
    struct gcheck g = {conv_fwd, conv_bwd, c, c->y, ny, c->dy, 3,
                       {{"x", c->x, c->dx, nx}, {"w", c->w, c->dw, nw}, {"b", c->b, c->db, d->F}}};
    return gradcheck(&g);
}

static void conv_forward_matches_ref(struct conv_ctx *c)
{
    conv_fwd(c);
    const struct dtk_conv_dims *d = &c->d;
    for (int b = 0; b < d->B; b++)
        for (int f = 0; f < d->F; f++)
            for (int oh = 0; oh < d->OH; oh++)
                for (int ow = 0; ow < d->OW; ow++) {
                    double want = conv_ref(c, b, f, oh, ow);
                    float got = c->y[(((long)b * d->F + f) * d->OH + oh) * d->OW + ow];
                    assert_true(fabs(got - want) <= 1e-4 * (1 + fabs(want)));
                }
}

/* Ensure that conv2d forward equals the direct convolution (padding 1, stride 1; samples
 * folded into one GEMM since P = 36 is small). */
static void test_conv2d_forward_reference(void **state)
{
    (void)state;
    struct conv_ctx c = {.d = {.B = 3, .C = 3, .H = 6, .W = 6, .F = 4, .kh = 3, .kw = 3, .sh = 1,
                               .sw = 1, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1,
                               .groups = 1}};
    conv_setup(&c, false);
    assert_int_equal(c.d.OH, 6);
    conv_forward_matches_ref(&c);
    conv_free(&c);
}

/* Ensure that conv2d forward equals the direct convolution with stride 2, asymmetric padding
 * (TensorFlow's "same" for even inputs pads bottom/right only) and 2 groups. */
static void test_conv2d_forward_strided_grouped(void **state)
{
    (void)state;
    struct conv_ctx c = {.d = {.B = 2, .C = 4, .H = 7, .W = 8, .F = 6, .kh = 3, .kw = 2, .sh = 2,
                               .sw = 2, .pad_t = 0, .pad_l = 1, .pad_b = 1, .pad_r = 0,
                               .groups = 2}};
    conv_setup(&c, false);
    conv_forward_matches_ref(&c);
    conv_free(&c);
}

/* Ensure that conv2d forward equals the direct convolution when one sample fills a GEMM
 * (P = 48*48 >= the 2048-column block, so the GEMM writes straight into the output in bands
 * of 42 and 6 output rows; the second band starts inside the padded image), also with
 * stride 2 (P = 50*50, bands of 40 and 10 rows). */
static void test_conv2d_forward_wide(void **state)
{
    (void)state;
    struct conv_ctx c = {.d = {.B = 2, .C = 2, .H = 48, .W = 48, .F = 3, .kh = 3, .kw = 3,
                               .sh = 1, .sw = 1, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1,
                               .groups = 1}};
    conv_setup(&c, false);
    conv_forward_matches_ref(&c);
    conv_free(&c);
    struct conv_ctx s2 = {.d = {.B = 1, .C = 2, .H = 100, .W = 99, .F = 2, .kh = 3, .kw = 3,
                                .sh = 2, .sw = 2, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1,
                                .groups = 1}};
    conv_setup(&s2, false);
    assert_int_equal(s2.d.OH * s2.d.OW, 2500);
    conv_forward_matches_ref(&s2);
    conv_free(&s2);
}

/* Ensure that conv2d backward (input, weight, bias) matches finite differences: padding 1. */
static void test_conv2d_gradcheck(void **state)
{
    (void)state;
    struct conv_ctx c = {.d = {.B = 2, .C = 3, .H = 5, .W = 5, .F = 4, .kh = 3, .kw = 3, .sh = 1,
                               .sw = 1, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1,
                               .groups = 1}};
    conv_setup(&c, false);
    assert_int_equal(conv_check(&c), 0);
    conv_free(&c);
}

/* Ensure that conv2d backward matches finite differences with stride 2, asymmetric padding
 * and groups. */
static void test_conv2d_gradcheck_strided_grouped(void **state)
{
    (void)state;
    struct conv_ctx c = {.d = {.B = 2, .C = 4, .H = 6, .W = 7, .F = 6, .kh = 3, .kw = 2, .sh = 2,
                               .sw = 2, .pad_t = 1, .pad_l = 0, .pad_b = 0, .pad_r = 1,
                               .groups = 2}};
    conv_setup(&c, false);
    assert_int_equal(conv_check(&c), 0);
    conv_free(&c);
}

/* Ensure that conv2d backward matches finite differences on the direct path (one sample per
 * GEMM) and for a 1x1 convolution on both paths. */
static void test_conv2d_gradcheck_wide_and_pointwise(void **state)
{
    (void)state;
    /* P = 46*46 = 2116 output pixels: at least the chunk target, so nb = 1 */
    struct conv_ctx w = {.d = {.B = 2, .C = 1, .H = 48, .W = 48, .F = 2, .kh = 3, .kw = 3,
                               .sh = 1, .sw = 1, .groups = 1}};
    conv_setup(&w, false);
    assert_int_equal(conv_check(&w), 0);
    conv_free(&w);
    struct conv_ctx p1 = {.d = {.B = 2, .C = 3, .H = 50, .W = 50, .F = 2, .kh = 1, .kw = 1,
                                .sh = 1, .sw = 1, .groups = 1}};
    conv_setup(&p1, false);
    assert_int_equal(conv_check(&p1), 0);
    conv_forward_matches_ref(&p1);
    conv_free(&p1);
    struct conv_ctx p2 = {.d = {.B = 3, .C = 4, .H = 4, .W = 4, .F = 2, .kh = 1, .kw = 1,
                                .sh = 1, .sw = 1, .groups = 2}};
    conv_setup(&p2, false);
    assert_int_equal(conv_check(&p2), 0);
    conv_forward_matches_ref(&p2);
    conv_free(&p2);
}

/* Ensure that conv2d_transpose with stride = kernel = 2 (U-Net) places each input pixel's
 * kernel patch on its own 2x2 block: for one input channel of value v and a kernel k,
 * out[2i+a][2j+b] = v[i][j] k[a][b] + bias (hand derivation from the definition). */
static void test_convt_forward_values(void **state)
{
    (void)state;
    struct conv_ctx c = {.d = {.B = 1, .C = 1, .H = 2, .W = 2, .F = 1, .kh = 2, .kw = 2, .sh = 2,
                               .sw = 2, .groups = 1}};
    conv_setup(&c, true);
    assert_int_equal(c.d.OH, 4);
    float x[4] = {1, 2, 3, 4}, k[4] = {1, 10, 100, 1000};
    memcpy(c.x, x, sizeof x);
    memcpy(c.w, k, sizeof k);
    c.b[0] = 0.5f;
    conv_fwd(&c);
    for (int oh = 0; oh < 4; oh++)
        for (int ow = 0; ow < 4; ow++)
            assert_float_equal(c.y[oh * 4 + ow], x[(oh / 2) * 2 + ow / 2] * k[(oh % 2) * 2 + ow % 2] + 0.5f,
                               1e-4f);
    conv_free(&c);
}

/* Ensure that conv2d_transpose backward matches finite differences: stride = kernel = 2, and
 * stride 2 with a 3x3 kernel and padding 1 (overlapping patches). */
static void test_convt_gradcheck(void **state)
{
    (void)state;
    struct conv_ctx a = {.d = {.B = 2, .C = 3, .H = 3, .W = 3, .F = 2, .kh = 2, .kw = 2, .sh = 2,
                               .sw = 2, .groups = 1}};
    conv_setup(&a, true);
    assert_int_equal(conv_check(&a), 0);
    conv_free(&a);
    struct conv_ctx b = {.d = {.B = 2, .C = 2, .H = 3, .W = 4, .F = 3, .kh = 3, .kw = 3, .sh = 2,
                               .sw = 2, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1,
                               .groups = 1}};
    conv_setup(&b, true);
    assert_int_equal(b.d.OH, 5);
    assert_int_equal(conv_check(&b), 0);
    conv_free(&b);
}

/* ---------------------------------------------------------------- pools */

struct pool_ctx {
    struct dtk_conv_dims d;
    int kind; /* 0 max, 1 avg, 2 global */
    float *x, *y, *dx, *dy;
    int *arg;
};

static void pool_fwd(void *p)
{
    struct pool_ctx *c = p;
    if (c->kind == 0)
        dtk_maxpool_forward(c->y, c->arg, c->x, &c->d);
    else if (c->kind == 1)
        dtk_avgpool_forward(c->y, c->x, &c->d);
    else
        dtk_globalpool_forward(c->y, c->x, c->d.B, c->d.C, c->d.H * c->d.W);
}

static void pool_bwd(void *p)
{
    struct pool_ctx *c = p;
    if (c->kind == 0)
        dtk_maxpool_backward(c->dx, c->dy, c->arg, &c->d);
    else if (c->kind == 1)
        dtk_avgpool_backward(c->dx, c->dy, &c->d);
    else
        dtk_globalpool_backward(c->dx, c->dy, c->d.B, c->d.C, c->d.H * c->d.W);
}

static int pool_check(struct dtk_conv_dims d, int kind)
{
    struct pool_ctx c = {.d = d, .kind = kind};
    d.F = d.C;
    c.d.F = d.C;
    assert_true(dtk_conv_dims_finish(&c.d));
    long nx = (long)d.B * d.C * d.H * d.W;
    long ny = kind == 2 ? (long)d.B * d.C : (long)d.B * d.C * c.d.OH * c.d.OW;
    /* distinct values 5h apart, shuffled: no two candidates of a max within 2h */
    c.x = fbuf(nx);
    for (long i = 0; i < nx; i++)
        c.x[i] = (float)(i * 5 * GC_H);
    for (long i = nx - 1; i > 0; i--) {
        long j = (long)dtk_rng_below(&trng, (uint64_t)(i + 1));
        float t = c.x[i];
        c.x[i] = c.x[j];
        c.x[j] = t;
    }
    c.y = fbuf(ny), c.dx = fbuf(nx), c.dy = fbuf(ny);
    c.arg = calloc((size_t)ny, sizeof(int));
    struct gcheck g = {pool_fwd, pool_bwd, &c, c.y, ny, c.dy, 1, {{"x", c.x, c.dx, nx}}};
    int bad = gradcheck(&g);
    free(c.x), free(c.y), free(c.dx), free(c.dy), free(c.arg);
    return bad;
}

/* Ensure that 2x2 max pooling picks each window's maximum and its index (values by hand). */
static void test_maxpool_forward_values(void **state)
{
    (void)state;
    struct dtk_conv_dims d = {.B = 1, .C = 1, .H = 2, .W = 4, .F = 1, .kh = 2, .kw = 2, .sh = 2,
                              .sw = 2};
    assert_true(dtk_conv_dims_finish(&d));
    float x[8] = {1, 5, -2, -1, 3, 2, -3, -4}, y[2];
    int arg[2];
    dtk_maxpool_forward(y, arg, x, &d);
    assert_float_equal(y[0], 5.0f, 0.0f);
    assert_int_equal(arg[0], 1);
    assert_float_equal(y[1], -1.0f, 0.0f);
    assert_int_equal(arg[1], 3);
}

/* Ensure that max pooling backward (valid 2x2/2 with an odd input, and 3x3/2 with padding 1)
 * matches finite differences. */
static void test_maxpool_gradcheck(void **state)
{
    (void)state;
    assert_int_equal(pool_check((struct dtk_conv_dims){.B = 2, .C = 2, .H = 5, .W = 5, .kh = 2,
                                                       .kw = 2, .sh = 2, .sw = 2}, 0), 0);
    assert_int_equal(pool_check((struct dtk_conv_dims){.B = 2, .C = 2, .H = 6, .W = 5, .kh = 3,
                                                       .kw = 3, .sh = 2, .sw = 2, .pad_t = 1,
                                                       .pad_l = 1, .pad_b = 1, .pad_r = 1}, 0), 0);
}

/* Ensure that average pooling with padding divides by the cells inside the image only
 * (Keras "same"): a 3x3/1 window at the corner of a 2x2 image of ones averages to 1. */
static void test_avgpool_padding_excluded(void **state)
{
    (void)state;
    struct dtk_conv_dims d = {.B = 1, .C = 1, .H = 2, .W = 2, .F = 1, .kh = 3, .kw = 3, .sh = 1,
                              .sw = 1, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1};
    assert_true(dtk_conv_dims_finish(&d));
    float x[4] = {1, 2, 3, 4}, y[4];
    dtk_avgpool_forward(y, x, &d);
    for (int i = 0; i < 4; i++)
        assert_float_equal(y[i], 2.5f, 1e-6f); /* every window covers all four cells */
}

/* Ensure that average and global average pooling backward match finite differences. */
static void test_avgpool_globalpool_gradcheck(void **state)
{
    (void)state;
    assert_int_equal(pool_check((struct dtk_conv_dims){.B = 2, .C = 2, .H = 5, .W = 6, .kh = 3,
                                                       .kw = 2, .sh = 2, .sw = 2, .pad_t = 1,
                                                       .pad_b = 1}, 1), 0);
    assert_int_equal(pool_check((struct dtk_conv_dims){.B = 2, .C = 3, .H = 3, .W = 4, .kh = 1,
                                                       .kw = 1, .sh = 1, .sw = 1}, 2), 0);
}

/* ---------------------------------------------------------------- activations */

struct act_ctx {
    int kind;
    long n;
    float *x, *y, *dx, *dy;
};

static void act_fwd(void *p)
{
    struct act_ctx *c = p;
    switch (c->kind) {
    case 0: dtk_relu_forward(c->y, c->x, c->n); break;
    case 1: dtk_tanh_forward(c->y, c->x, c->n); break;
    case 2: dtk_sigmoid_forward(c->y, c->x, c->n); break;
    default: dtk_gelu_forward(c->y, c->x, c->n); break;
    }
}

static void act_bwd(void *p)
{
    struct act_ctx *c = p;
    switch (c->kind) {
    case 0: dtk_relu_backward(c->dx, c->dy, c->x, c->n); break;
    case 1: dtk_tanh_backward(c->dx, c->dy, c->y, c->n); break;
    case 2: dtk_sigmoid_backward(c->dx, c->dy, c->y, c->n); break;
    default: dtk_gelu_backward(c->dx, c->dy, c->x, c->n); break;
    }
}

/* Ensure that relu, tanh, sigmoid and gelu backward match finite differences (inputs in
 * [-3, 3], at least 4h from 0). */
static void test_activations_gradcheck(void **state)
{
    (void)state;
    for (int kind = 0; kind < 4; kind++) {
        struct act_ctx c = {.kind = kind, .n = 60};
        c.x = frand_nonzero(60, (float)(4 * GC_H), 3.0f);
        c.y = fbuf(60), c.dx = fbuf(60), c.dy = fbuf(60);
        struct gcheck g = {act_fwd, act_bwd, &c, c.y, 60, c.dy, 1, {{"x", c.x, c.dx, 60}}};
        assert_int_equal(gradcheck(&g), 0);
        free(c.x), free(c.y), free(c.dx), free(c.dy);
    }
}

/* Ensure that gelu uses the tanh approximation: gelu(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715))
 * = 0.841192 and gelu(-2) = -0.045402 (evaluated from the formula in double). */
static void test_gelu_values(void **state)
{
    (void)state;
    float x[2] = {1.0f, -2.0f}, y[2];
    dtk_gelu_forward(y, x, 2);
    double k = sqrt(2.0 / M_PI);
    assert_float_equal(y[0], 0.5 * (1 + tanh(k * 1.044715)), 1e-6f);
    assert_float_equal(y[1], -1.0 * (1 + tanh(k * (-2 - 0.044715 * 8))), 1e-6f);
    assert_float_equal(y[0], 0.841192f, 1e-5f);
    assert_float_equal(y[1], -0.045402f, 1e-5f);
}

/* ---------------------------------------------------------------- softmax and loss */

struct sm_ctx {
    int B, V;
    float *x, *y, *dx, *dy;
};

static void sm_fwd(void *p)
{
    struct sm_ctx *c = p;
    dtk_softmax_forward(c->y, c->x, c->B, c->V);
}

static void sm_bwd(void *p)
{
    struct sm_ctx *c = p;
    dtk_softmax_backward(c->dx, c->dy, c->y, c->B, c->V);
}

/* Ensure that the plain softmax backward matches finite differences. */
static void test_softmax_gradcheck(void **state)
{
    (void)state;
    struct sm_ctx c = {.B = 3, .V = 5};
    c.x = frand(15, -2, 2), c.y = fbuf(15), c.dx = fbuf(15), c.dy = fbuf(15);
    struct gcheck g = {sm_fwd, sm_bwd, &c, c.y, 15, c.dy, 1, {{"x", c.x, c.dx, 15}}};
    assert_int_equal(gradcheck(&g), 0);
    free(c.x), free(c.y), free(c.dx), free(c.dy);
}

/* Ensure that the softmax cross-entropy loss of uniform logits is log(V) (closed form) and that
 * its fused gradient (p - onehot)/B matches finite differences of the loss itself. */
static void test_softmax_xent(void **state)
{
    (void)state;
    float z0[8] = {0}, p0[8];
    int l0[2] = {1, 3};
    assert_float_equal(dtk_softmax_xent_forward(p0, z0, l0, 2, 4), log(4.0), 1e-6);

    enum { B = 4, V = 6 };
    float *z = frand(B * V, -3, 3), p[B * V], dz[B * V];
    int labels[B] = {0, 5, 2, 2};
    for (int i = 0; i < B * V; i++)
        dz[i] = GC_SEED_GRAD;
    dtk_softmax_xent_forward(p, z, labels, B, V);
    dtk_softmax_xent_backward(dz, p, labels, B, V);
    for (int i = 0; i < B * V; i++) {
        float keep = z[i];
        z[i] = keep + (float)GC_H;
        double lp = dtk_softmax_xent_forward(p, z, labels, B, V);
        z[i] = keep - (float)GC_H;
        double lm = dtk_softmax_xent_forward(p, z, labels, B, V);
        z[i] = keep;
        double num = (lp - lm) / (2 * GC_H), ana = dz[i] - GC_SEED_GRAD;
        assert_true(fabs(num - ana) <= 1e-4 + 1e-3 * fabs(ana));
    }
    free(z);
}

/* ---------------------------------------------------------------- dropout */

/* Ensure that inverted dropout zeroes about `rate` of the elements, scales the rest by
 * 1/(1-rate), repeats with the same key, that a stretch drawn from its first position equals
 * the same elements of the whole draw (a counter-based stream), that another key or step
 * draws another mask, and that backward applies the same mask (it is linear in x, so dL/dx =
 * mask r exactly). */
static void test_dropout(void **state)
{
    (void)state;
    enum { N = 20000 };
    float *x = frand(N, 0.5f, 1.5f), *y = fbuf(N), *m = fbuf(N), *y2 = fbuf(N), *m2 = fbuf(N);
    float *dx = fbuf(N), *dy = frand(N, -1, 1);
    uint64_t key = dtk_rng_key(7, 3, 2);
    dtk_dropout_forward(y, m, x, N, 0.25f, key, 100);
    dtk_dropout_forward(y2, m2, x, N, 0.25f, key, 100);
    long zeros = 0, same = 0;
    for (long i = 0; i < N; i++) {
        assert_true(m[i] == 0.0f || fabsf(m[i] - 1.0f / 0.75f) < 1e-6f);
        assert_float_equal(y[i], x[i] * m[i], 1e-6f);
        assert_true(y[i] == y2[i]);
        zeros += m[i] == 0.0f;
    }
    /* Binomial(20000, 0.25): mean 5000, sd 61; 5 sd either side. */
    assert_in_range(zeros, 5000 - 306, 5000 + 306);
    /* the stretch from position 100 + 777: the whole draw's elements 777 on */
    dtk_dropout_forward(y2, m2, x + 777, N - 777, 0.25f, key, 100 + 777);
    for (long i = 777; i < N; i++)
        assert_true(m2[i - 777] == m[i]);
    /* step 4 instead of 3: an independent mask (agreement 0.625 expected, sd 0.0034) */
    dtk_dropout_forward(y2, m2, x, N, 0.25f, dtk_rng_key(7, 4, 2), 100);
    for (long i = 0; i < N; i++)
        same += m2[i] == m[i];
    assert_in_range(same, 12500 - 400, 12500 + 400);
    dtk_dropout_backward(dx, dy, m, N);
    for (long i = 0; i < N; i++)
        assert_float_equal(dx[i], dy[i] * m[i], 1e-6f);
    free(x), free(y), free(m), free(y2), free(m2), free(dx), free(dy);
}

/* ---------------------------------------------------------------- batchnorm, layernorm */

struct bn_ctx {
    int B, C, S;
    float *x, *g, *b, *y, *dx, *dg, *db, *dy, *mean, *rstd, *rm, *rv;
};

static void bn_fwd(void *p)
{
    struct bn_ctx *c = p;
    dtk_batchnorm_forward_train(c->y, c->mean, c->rstd, c->rm, c->rv, c->x, c->g, c->b, c->B,
                                c->C, c->S, 1e-5f, 0.1f);
}

static void bn_bwd(void *p)
{
    struct bn_ctx *c = p;
    dtk_batchnorm_backward(c->dx, c->dg, c->db, c->dy, c->x, c->g, c->mean, c->rstd, c->B, c->C,
                           c->S);
}

static struct bn_ctx bn_make(int B, int C, int S)
{
    long n = (long)B * C * S;
    struct bn_ctx c = {.B = B, .C = C, .S = S};
    c.x = frand(n, -2, 2), c.g = frand(C, 0.5f, 1.5f), c.b = frand(C, -1, 1);
    c.y = fbuf(n), c.dx = fbuf(n), c.dg = fbuf(C), c.db = fbuf(C), c.dy = fbuf(n);
    c.mean = fbuf(C), c.rstd = fbuf(C), c.rm = fbuf(C), c.rv = fbuf(C);
    for (int i = 0; i < C; i++)
        c.rv[i] = 1.0f;
    return c;
}

static void bn_free(struct bn_ctx *c)
{
    free(c->x), free(c->g), free(c->b), free(c->y), free(c->dx), free(c->dg), free(c->db);
    free(c->dy), free(c->mean), free(c->rstd), free(c->rm), free(c->rv);
}

/* Ensure that batchnorm in training normalises each channel to mean beta and standard
 * deviation gamma (up to eps), and updates the running statistics PyTorch's way:
 * running_mean = 0.9 * 0 + 0.1 * mean, running_var = 0.9 * 1 + 0.1 * unbiased variance. */
static void test_batchnorm_forward_stats(void **state)
{
    (void)state;
    struct bn_ctx c = bn_make(4, 3, 5);
    bn_fwd(&c);
    const long M = 4 * 5;
    for (int ch = 0; ch < 3; ch++) {
        double s = 0, ss = 0, xs = 0, xss = 0;
        for (int b = 0; b < 4; b++)
            for (int i = 0; i < 5; i++) {
                double y = c.y[(b * 3 + ch) * 5 + i], x = c.x[(b * 3 + ch) * 5 + i];
                s += y, ss += y * y, xs += x, xss += x * x;
            }
        double mean = s / M, var = ss / M - mean * mean;
        assert_float_equal(mean, c.b[ch], 1e-5);
        assert_float_equal(sqrt(var), c.g[ch], 1e-3);
        double xm = xs / M, xv = (xss - M * xm * xm) / (M - 1);
        assert_float_equal(c.rm[ch], 0.1 * xm, 1e-5);
        assert_float_equal(c.rv[ch], 0.9 + 0.1 * xv, 1e-4);
    }
    bn_free(&c);
}

/* Ensure that batchnorm in evaluation uses the running statistics:
 * y = gamma (x - rm)/sqrt(rv + eps) + beta, here with rm = 1, rv = 4: (3 - 1)/2 = 1 (by hand). */
static void test_batchnorm_eval(void **state)
{
    (void)state;
    float x = 3, g = 2, b = 0.5f, rm = 1, rv = 4, y;
    dtk_batchnorm_forward_eval(&y, &x, &g, &b, &rm, &rv, 1, 1, 1, 0.0f);
    assert_float_equal(y, 2.5f, 1e-6f);
}

/* Ensure that batchnorm backward (training statistics) matches finite differences for the
 * input, gamma and beta, on images (S = 6) and on flat features (S = 1). */
static void test_batchnorm_gradcheck(void **state)
{
    (void)state;
    int shapes[2][3] = {{3, 2, 6}, {5, 4, 1}};
    for (int s = 0; s < 2; s++) {
        struct bn_ctx c = bn_make(shapes[s][0], shapes[s][1], shapes[s][2]);
        long n = (long)c.B * c.C * c.S;
        struct gcheck g = {bn_fwd, bn_bwd, &c, c.y, n, c.dy, 3,
                           {{"x", c.x, c.dx, n}, {"gamma", c.g, c.dg, c.C},
                            {"beta", c.b, c.db, c.C}}};
        assert_int_equal(gradcheck(&g), 0);
        bn_free(&c);
    }
}

struct ln_ctx {
    int N, D;
    float *x, *g, *b, *y, *dx, *dg, *db, *dy, *mean, *rstd;
};

static void ln_fwd(void *p)
{
    struct ln_ctx *c = p;
    dtk_layernorm_forward(c->y, c->mean, c->rstd, c->x, c->g, c->b, c->N, c->D, 1e-5f);
}

static void ln_bwd(void *p)
{
    struct ln_ctx *c = p;
    dtk_layernorm_backward(c->dx, c->dg, c->db, c->dy, c->x, c->g, c->mean, c->rstd, c->N, c->D);
}

/* Ensure that layernorm backward matches finite differences for input, gamma and beta. */
static void test_layernorm_gradcheck(void **state)
{
    (void)state;
    struct ln_ctx c = {.N = 4, .D = 6};
    c.x = frand(24, -2, 2), c.g = frand(6, 0.5f, 1.5f), c.b = frand(6, -1, 1);
    c.y = fbuf(24), c.dx = fbuf(24), c.dg = fbuf(6), c.db = fbuf(6), c.dy = fbuf(24);
    c.mean = fbuf(4), c.rstd = fbuf(4);
    struct gcheck g = {ln_fwd, ln_bwd, &c, c.y, 24, c.dy, 3,
                       {{"x", c.x, c.dx, 24}, {"gamma", c.g, c.dg, 6}, {"beta", c.b, c.db, 6}}};
    assert_int_equal(gradcheck(&g), 0);
    free(c.x), free(c.g), free(c.b), free(c.y), free(c.dx), free(c.dg), free(c.db), free(c.dy);
    free(c.mean), free(c.rstd);
}

/* ---------------------------------------------------------------- data movement */

struct mv_ctx {
    int kind;
    float *a, *b, *y, *da, *db, *dy;
    int *ids;
};

/* add (a, b: 24) -> 24; concat (a: 2x2x3, b: 2x1x3) -> 2x3x3; upsample 2x1x2x3 by 2 -> 48;
 * embedding table a (5x3) with ids (4) -> 12; seqpool a (2x3x4) -> 8;
 * rows_add: y = a (2x3x4) + b (3x4) -> 24. */
static void mv_fwd(void *p)
{
    struct mv_ctx *c = p;
    switch (c->kind) {
    case 0: dtk_add_forward(c->y, c->a, c->b, 24); break;
    case 1:
        dtk_concat_forward(c->y, c->a, 2, 2, 3, 3, 0);
        dtk_concat_forward(c->y, c->b, 2, 1, 3, 3, 2);
        break;
    case 2: dtk_upsample_forward(c->y, c->a, 2, 1, 2, 3, 2); break;
    case 3: dtk_embedding_forward(c->y, c->ids, c->a, 4, 5, 3); break;
    case 4: dtk_seqpool_forward(c->y, c->a, 2, 3, 4); break;
    default:
        memcpy(c->y, c->a, 24 * sizeof(float));
        dtk_rows_add_forward(c->y, c->b, 2, 3, 4);
        break;
    }
}

static void mv_bwd(void *p)
{
    struct mv_ctx *c = p;
    switch (c->kind) {
    case 0:
        dtk_accumulate(c->da, c->dy, 24);
        dtk_accumulate(c->db, c->dy, 24);
        break;
    case 1:
        dtk_concat_backward(c->da, c->dy, 2, 2, 3, 3, 0);
        dtk_concat_backward(c->db, c->dy, 2, 1, 3, 3, 2);
        break;
    case 2: dtk_upsample_backward(c->da, c->dy, 2, 1, 2, 3, 2); break;
    case 3: dtk_embedding_backward(c->da, c->dy, c->ids, 4, 5, 3); break;
    case 4: dtk_seqpool_backward(c->da, c->dy, 2, 3, 4); break;
    default:
        dtk_accumulate(c->da, c->dy, 24);
        dtk_rows_add_backward(c->db, c->dy, 2, 3, 4);
        break;
    }
}

/* Ensure that add, concat, upsample, embedding (ids 4, 0, 4, 2: a repeated row sums its
 * gradients), seqpool and the position-row add backward match finite differences. */
static void test_movement_gradcheck(void **state)
{
    (void)state;
    static const long na[] = {24, 12, 12, 15, 24, 24}, nb[] = {24, 6, 0, 0, 0, 12};
    static const long ny[] = {24, 18, 48, 12, 8, 24};
    int ids[4] = {4, 0, 4, 2};
    for (int kind = 0; kind < 6; kind++) {
        struct mv_ctx c = {.kind = kind};
        c.a = frand(na[kind], -1, 1), c.b = frand(nb[kind], -1, 1), c.y = fbuf(ny[kind]);
        c.da = fbuf(na[kind]), c.db = fbuf(nb[kind]), c.dy = fbuf(ny[kind]);
        c.ids = ids;
        struct gcheck g = {mv_fwd, mv_bwd, &c, c.y, ny[kind], c.dy, nb[kind] ? 2 : 1,
                           {{"a", c.a, c.da, na[kind]}, {"b", c.b, c.db, nb[kind]}}};
        assert_int_equal(gradcheck(&g), 0);
        free(c.a), free(c.b), free(c.y), free(c.da), free(c.db), free(c.dy);
    }
}

/* Ensure that channel concat places the second input after the first one's channels and
 * nearest upsampling repeats each pixel in an s x s block (layouts by hand). */
static void test_concat_upsample_layout(void **state)
{
    (void)state;
    float a[4] = {1, 2, 3, 4}, b[2] = {5, 6}, y[6];
    dtk_concat_forward(y, a, 1, 2, 2, 3, 0); /* a: 2 channels of 2 pixels */
    dtk_concat_forward(y, b, 1, 1, 2, 3, 2);
    float want[6] = {1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 6; i++)
        assert_float_equal(y[i], want[i], 0.0f);
    float u[16];
    dtk_upsample_forward(u, a, 1, 1, 2, 2, 2);
    float wu[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    for (int i = 0; i < 16; i++)
        assert_float_equal(u[i], wu[i], 0.0f);
}

/* ---------------------------------------------------------------- lstm, attention */

struct lstm_ctx {
    int B, T, D, H;
    bool seq;
    float *x, *wx, *wh, *b, *y, *cache, *dx, *dwx, *dwh, *db, *dy, *work;
};

static void lstm_fwd(void *p)
{
    struct lstm_ctx *c = p;
    dtk_lstm_forward(c->y, c->cache, c->x, c->wx, c->wh, c->b, c->B, c->T, c->D, c->H, c->seq);
}

static void lstm_bwd(void *p)
{
    struct lstm_ctx *c = p;
    dtk_lstm_backward(c->dx, c->dwx, c->dwh, c->db, c->work, c->dy, c->x, c->wx, c->wh, c->cache,
                      c->B, c->T, c->D, c->H, c->seq);
}

/* Ensure that LSTM backward (through time) matches finite differences for the input, both
 * weight matrices and the bias, returning all steps and only the last. */
static void test_lstm_gradcheck(void **state)
{
    (void)state;
    for (int seq = 0; seq < 2; seq++) {
        struct lstm_ctx c = {.B = 2, .T = 4, .D = 3, .H = 3, .seq = seq};
        long nx = 2 * 4 * 3, nwx = 12 * 3, nwh = 12 * 3, ny = seq ? 2 * 4 * 3 : 2 * 3;
        c.x = frand(nx, -1, 1), c.wx = frand(nwx, -0.8f, 0.8f), c.wh = frand(nwh, -0.8f, 0.8f);
        c.b = frand(12, -0.5f, 0.5f), c.y = fbuf(ny), c.cache = fbuf(dtk_lstm_cache_floats(2, 4, 3));
        c.dx = fbuf(nx), c.dwx = fbuf(nwx), c.dwh = fbuf(nwh), c.db = fbuf(12), c.dy = fbuf(ny);
        c.work = fbuf(dtk_lstm_workspace_floats(2, 4, 3));
        struct gcheck g = {lstm_fwd, lstm_bwd, &c, c.y, ny, c.dy, 4,
                           {{"x", c.x, c.dx, nx}, {"wx", c.wx, c.dwx, nwx},
                            {"wh", c.wh, c.dwh, nwh}, {"b", c.b, c.db, 12}}};
        assert_int_equal(gradcheck(&g), 0);
        free(c.x), free(c.wx), free(c.wh), free(c.b), free(c.y), free(c.cache), free(c.dx);
        free(c.dwx), free(c.dwh), free(c.db), free(c.dy), free(c.work);
    }
}

/* Ensure that one LSTM step from zero state matches the Keras equations by hand with
 * D = H = 1, all weights 0 and biases (i, f, c, o) = (0, 0, 1, 0): i = o = 1/2, g = tanh 1,
 * c = g/2, h = tanh(c)/2. */
static void test_lstm_step_values(void **state)
{
    (void)state;
    float x = 0.7f, wx[4] = {0}, wh[4] = {0}, b[4] = {0, 0, 1, 0}, y, cache[6];
    dtk_lstm_forward(&y, cache, &x, wx, wh, b, 1, 1, 1, 1, false);
    assert_float_equal(y, 0.5 * tanh(tanh(1.0) / 2), 1e-6);
}

struct att_ctx {
    int B, T, D, heads;
    float *x, *w, *y, *cache, *dx, *dw, *dy, *work;
};

static void att_fwd(void *p)
{
    struct att_ctx *c = p;
    dtk_attention_forward(c->y, c->cache, c->x, c->w, c->B, c->T, c->D, c->heads);
}

static void att_bwd(void *p)
{
    struct att_ctx *c = p;
    dtk_attention_backward(c->dx, c->dw, c->work, c->dy, c->x, c->w, c->cache, c->B, c->T, c->D,
                           c->heads);
}

/* Ensure that multi-head self-attention backward matches finite differences for the input
 * and all projection weights and biases (2 heads of width 3). */
static void test_attention_gradcheck(void **state)
{
    (void)state;
    struct att_ctx c = {.B = 2, .T = 4, .D = 6, .heads = 2};
    long nx = 2 * 4 * 6, nw = 4 * 36 + 4 * 6;
    c.x = frand(nx, -1, 1), c.w = frand(nw, -0.6f, 0.6f), c.y = fbuf(nx);
    c.cache = fbuf(dtk_attention_cache_floats(2, 4, 6, 2)), c.dx = fbuf(nx), c.dw = fbuf(nw);
    c.dy = fbuf(nx), c.work = fbuf(dtk_attention_workspace_floats(2, 4, 6, 2));
    struct gcheck g = {att_fwd, att_bwd, &c, c.y, nx, c.dy, 2,
                       {{"x", c.x, c.dx, nx}, {"w", c.w, c.dw, nw}}};
    assert_int_equal(gradcheck(&g), 0);
    free(c.x), free(c.w), free(c.y), free(c.cache), free(c.dx), free(c.dw), free(c.dy);
    free(c.work);
}

/* Ensure that with all projections the identity and zero biases, a single token attends only
 * to itself: the output equals the input (softmax over one score is 1). */
static void test_attention_single_token_identity(void **state)
{
    (void)state;
    enum { D = 4 };
    float x[D] = {0.3f, -1, 2, 0.5f}, w[4 * D * D + 4 * D] = {0}, y[D];
    float cache[64];
    for (int m = 0; m < 4; m++)
        for (int i = 0; i < D; i++)
            w[m * D * D + i * D + i] = 1.0f;
    assert_true(dtk_attention_cache_floats(1, 1, D, 2) <= 64);
    dtk_attention_forward(y, cache, x, w, 1, 1, D, 2);
    for (int i = 0; i < D; i++)
        assert_float_equal(y[i], x[i], 1e-6f);
}

struct core_ctx {
    int B, T, D, heads;
    bool causal;
    float *qkv, *y, *att, *dqkv, *dy, *work;
};

static void core_fwd(void *p)
{
    struct core_ctx *c = p;
    dtk_attn_core_forward(c->y, c->att, c->qkv, c->B, c->T, c->D, c->heads, c->causal);
}

static void core_bwd(void *p)
{
    struct core_ctx *c = p;
    dtk_attn_core_backward(c->dqkv, c->work, 2, c->dy, c->qkv, c->att, c->B, c->T, c->D,
                           c->heads);
}

/* Ensure that the attention core's backward matches finite differences for q, k and v, with
 * and without the causal mask (2 samples, 5 tokens, 3 heads of width 2). */
static void test_attn_core_gradcheck(void **state)
{
    (void)state;
    for (int causal = 0; causal < 2; causal++) {
        struct core_ctx c = {.B = 2, .T = 5, .D = 6, .heads = 3, .causal = causal};
        long nq = 2 * 5 * 18, ny = 2 * 5 * 6;
        c.qkv = frand(nq, -1.5f, 1.5f), c.y = fbuf(ny), c.att = fbuf(2 * 3 * 25);
        c.dqkv = fbuf(nq), c.dy = fbuf(ny), c.work = fbuf(dtk_attn_core_workspace_floats(5, 2));
        struct gcheck g = {core_fwd, core_bwd, &c, c.y, ny, c.dy, 1,
                           {{"qkv", c.qkv, c.dqkv, nq}}};
        assert_int_equal(gradcheck(&g), 0);
        free(c.qkv), free(c.y), free(c.att), free(c.dqkv), free(c.dy), free(c.work);
    }
}

/* Ensure that the causal core never looks ahead: changing the k and v of the last token leaves
 * every earlier output as it was, the first output is exactly v of token 0, and P is zero above
 * the diagonal with rows summing to 1. */
static void test_attn_core_causal(void **state)
{
    (void)state;
    enum { T = 4, D = 4, H = 2 };
    float *qkv = frand(T * 3 * D, -1, 1), y[T * D], y2[T * D], att[H * T * T];
    dtk_attn_core_forward(y, att, qkv, 1, T, D, H, true);
    for (int i = 0; i < D; i++)
        assert_float_equal(y[i], qkv[2 * D + i], 1e-6f);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) {
                float pr = att[(h * T + i) * T + j];
                if (j > i)
                    assert_true(pr == 0.0f);
                sum += pr;
            }
            assert_float_equal(sum, 1.0, 1e-6);
        }
    for (int i = D; i < 3 * D; i++)
        qkv[(T - 1) * 3 * D + i] += 0.5f;
    dtk_attn_core_forward(y2, att, qkv, 1, T, D, H, true);
    for (int i = 0; i < (T - 1) * D; i++)
        assert_true(y[i] == y2[i]);
    assert_false(y[(T - 1) * D] == y2[(T - 1) * D]);
    free(qkv);
}

/* Ensure that a dense q|k|v projection, the unmasked core and a dense output projection give
 * what the fused attention layer gives with the same weights (its layout: Wq, Wk, Wv, Wo,
 * then the four biases), so the two cuts of one computation agree. */
static void test_attn_core_matches_attention(void **state)
{
    (void)state;
    enum { B = 2, T = 3, D = 6, H = 2 };
    float *x = frand(B * T * D, -1, 1), *w = frand(4 * D * D + 4 * D, -0.5f, 0.5f);
    float wqkv[3 * D * D], bqkv[3 * D], qkv[B * T * 3 * D], ctx[B * T * D], y[B * T * D];
    float ref[B * T * D], att[B * H * T * T];
    float *cache = fbuf(dtk_attention_cache_floats(B, T, D, H));
    memcpy(wqkv, w, sizeof wqkv);            /* Wq, Wk, Wv stacked are the (3D, D) matrix */
    memcpy(bqkv, w + 4 * D * D, sizeof bqkv);
    dtk_dense_forward(qkv, x, wqkv, bqkv, B * T, D, 3 * D);
    dtk_attn_core_forward(ctx, att, qkv, B, T, D, H, false);
    dtk_dense_forward(y, ctx, w + 3 * D * D, w + 4 * D * D + 3 * D, B * T, D, D);
    dtk_attention_forward(ref, cache, x, w, B, T, D, H);
    for (int i = 0; i < B * T * D; i++)
        assert_float_equal(y[i], ref[i], 1e-5f);
    free(x), free(w), free(cache);
}

/* ---------------------------------------------------------------- rng */

/* Ensure that the generator is deterministic per seed, differs between seeds, and that its
 * uniforms have mean 1/2 and variance 1/12 (within 5 standard errors over 10^5 draws). */
static void test_rng(void **state)
{
    (void)state;
    struct dtk_rng a, b, c;
    dtk_rng_seed(&a, 1);
    dtk_rng_seed(&b, 1);
    dtk_rng_seed(&c, 2);
    assert_true(dtk_rng_u64(&a) == dtk_rng_u64(&b));
    assert_true(dtk_rng_u64(&a) != dtk_rng_u64(&c));
    double s = 0, ss = 0;
    enum { N = 100000 };
    for (int i = 0; i < N; i++) {
        double u = dtk_rng_uniform(&a);
        assert_true(u >= 0.0 && u < 1.0);
        s += u, ss += u * u;
    }
    double mean = s / N, var = ss / N - mean * mean;
    assert_true(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / N));
    assert_true(fabs(var - 1.0 / 12) < 0.002);
}

int main(void)
{
    dtk_rng_seed(&trng, 12345);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_dense_forward_values),
        cmocka_unit_test(test_dense_gradcheck),
        cmocka_unit_test(test_conv2d_forward_reference),
        cmocka_unit_test(test_conv2d_forward_strided_grouped),
        cmocka_unit_test(test_conv2d_forward_wide),
        cmocka_unit_test(test_conv2d_gradcheck),
        cmocka_unit_test(test_conv2d_gradcheck_strided_grouped),
        cmocka_unit_test(test_conv2d_gradcheck_wide_and_pointwise),
        cmocka_unit_test(test_convt_forward_values),
        cmocka_unit_test(test_convt_gradcheck),
        cmocka_unit_test(test_maxpool_forward_values),
        cmocka_unit_test(test_maxpool_gradcheck),
        cmocka_unit_test(test_avgpool_padding_excluded),
        cmocka_unit_test(test_avgpool_globalpool_gradcheck),
        cmocka_unit_test(test_activations_gradcheck),
        cmocka_unit_test(test_gelu_values),
        cmocka_unit_test(test_softmax_gradcheck),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_batchnorm_forward_stats),
        cmocka_unit_test(test_batchnorm_eval),
        cmocka_unit_test(test_batchnorm_gradcheck),
        cmocka_unit_test(test_layernorm_gradcheck),
        cmocka_unit_test(test_movement_gradcheck),
        cmocka_unit_test(test_concat_upsample_layout),
        cmocka_unit_test(test_lstm_gradcheck),
        cmocka_unit_test(test_lstm_step_values),
        cmocka_unit_test(test_attention_gradcheck),
        cmocka_unit_test(test_attention_single_token_identity),
        cmocka_unit_test(test_attn_core_gradcheck),
        cmocka_unit_test(test_attn_core_causal),
        cmocka_unit_test(test_attn_core_matches_attention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
