/* The CUDA kernels against the CPU kernels (exec/cpu, the oracle, as karpathy/llm.c checks its
 * CUDA kernels against train_gpt2.c): random inputs, the same call on both sides, results
 * compared with a stated tolerance. Without a GPU (or without a CUDA backend) the whole test is
 * skipped with exit status 77 and says so.
 * Expected values: the CPU kernels' outputs. Tolerances: elementwise kernels 1e-6 relative
 * (the same float formulas, nvcc may contract a multiply-add into an FMA); sums and GEMMs
 * 1e-4 relative to the largest reference magnitude (float32 sums of up to a few thousand
 * terms in another order: ~sqrt(n) 6e-8 typical, 1e-4 leaves a wide margin yet catches any
 * wrong index, which is O(1) off). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cuda_kernels.h"
#include "layers.h"
#include "optim.h"
#include "rng.h"

#define ELEM_TOL 1e-6
#define SUM_TOL 1e-4

#ifdef __SANITIZE_ADDRESS__
/* The CUDA driver maps memory where AddressSanitizer keeps its shadow gap. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "protect_shadow_gap=0";
}
#endif

static struct dtcuda *cx;
static struct dt_error err;

/* ---- helpers: host buffers, device copies ---- */

static float *randv(struct dtk_rng *r, long n)
{
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (long i = 0; i < n; i++)
        x[i] = dtk_rng_uniform_range(r, -1.0f, 1.0f);
    return x;
}

static void *up(const void *host, size_t bytes)
{
    void *d;
    assert_int_equal(dtcuda_malloc(&d, bytes, &err), DT_OK);
    assert_int_equal(dtcuda_to_device(cx, d, host, bytes, &err), DT_OK);
    return d;
}

static float *upf(const float *host, long n)
{
    return up(host, (size_t)n * sizeof(float));
}

/* Copies n floats back and frees the device buffer. */
static float *down(float *dev, long n)
{
    float *h = malloc((size_t)n * sizeof *h);
    assert_non_null(h);
    assert_int_equal(dtcuda_to_host(cx, h, dev, (size_t)n * sizeof *h, &err), DT_OK);
    dtcuda_free(dev);
    return h;
}

static void assert_close(const float *got, const float *want, long n, double tol)
{
    double scale = 1.0;
    for (long i = 0; i < n; i++)
        if (fabs(want[i]) > scale)
            scale = fabs(want[i]);
    for (long i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * scale))
            fail_msg("element %ld of %ld: got %.9g, want %.9g (tolerance %.3g)", i, n, got[i],
                     want[i], tol * scale);
}

/* ---- tests ---- */

/* Ensure that memory makes the round trip host -> device -> host unchanged and that zeroing
 * zeroes (expected: the bytes sent; zeros). */
static void test_memory_round_trip(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 1);
    float *x = randv(&r, 1000);
    float *y = down(upf(x, 1000), 1000);
    assert_memory_equal(x, y, 1000 * sizeof(float));
    float *d = upf(x, 1000);
    assert_int_equal(dtcuda_zero(cx, d, 1000 * sizeof(float), &err), DT_OK);
    float *z = down(d, 1000);
    for (int i = 0; i < 1000; i++)
        assert_true(z[i] == 0.0f);
    char desc[256];
    assert_int_equal(dtcuda_describe(cx, desc, sizeof desc, &err), DT_OK);
    printf("# device: %s\n", desc);
    free(x), free(y), free(z);
}

/* Ensure that asking for a device beyond the last fails with DT_EINPUT and a message. */
static void test_bad_device(void **state)
{
    (void)state;
    struct dtcuda *other;
    struct dt_error e;
    assert_int_equal(dtcuda_create(&other, dtcuda_device_count(), &e), DT_EINPUT);
    assert_null(other);
    assert_non_null(strstr(e.msg, "no CUDA device"));
}

/* Ensure that dense forward (with and without bias) and backward (accumulating into non-zero
 * gradients) match dtk_dense_* for a non-square layer: N 37, in 53, out 29. */
static void test_dense(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 2);
    const int N = 37, in = 53, outd = 29;
    float *x = randv(&r, (long)N * in), *w = randv(&r, (long)outd * in), *b = randv(&r, outd);
    float *dy = randv(&r, (long)N * outd);
    float *dx = randv(&r, (long)N * in), *dw = randv(&r, (long)outd * in), *db = randv(&r, outd);
    float *x_d = upf(x, (long)N * in), *w_d = upf(w, (long)outd * in), *b_d = upf(b, outd);
    float *dy_d = upf(dy, (long)N * outd);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        float *want = malloc((size_t)N * outd * sizeof(float)), *y_d;
        assert_int_equal(dtcuda_malloc((void **)&y_d, (size_t)N * outd * sizeof(float), &err), 0);
        dtk_dense_forward(want, x, w, with_bias ? b : NULL, N, in, outd);
        assert_int_equal(dtcuda_dense_forward(cx, y_d, x_d, w_d, with_bias ? b_d : NULL, N, in,
                                              outd, &err), DT_OK);
        float *got = down(y_d, (long)N * outd);
        assert_close(got, want, (long)N * outd, SUM_TOL);
        free(want), free(got);
    }
    float *dx_d = upf(dx, (long)N * in), *dw_d = upf(dw, (long)outd * in), *db_d = upf(db, outd);
    dtk_dense_backward(dx, dw, db, dy, x, w, N, in, outd);
    assert_int_equal(dtcuda_dense_backward(cx, dx_d, dw_d, db_d, dy_d, x_d, w_d, N, in, outd,
                                           &err), DT_OK);
    float *gx = down(dx_d, (long)N * in), *gw = down(dw_d, (long)outd * in), *gb = down(db_d, outd);
    assert_close(gx, dx, (long)N * in, SUM_TOL);
    assert_close(gw, dw, (long)outd * in, SUM_TOL);
    assert_close(gb, db, outd, SUM_TOL);
    dtcuda_free(x_d), dtcuda_free(w_d), dtcuda_free(b_d), dtcuda_free(dy_d);
    free(x), free(w), free(b), free(dy), free(dx), free(dw), free(db), free(gx), free(gw), free(gb);
}

/* Ensure that relu forward and backward (accumulating) match the CPU over 10007 floats, a
 * size that is not a multiple of the block, with some exact zeros (derivative 0 at 0). */
static void test_relu(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 3);
    const long n = 10007;
    float *x = randv(&r, n), *dy = randv(&r, n), *dx = randv(&r, n);
    float *y = malloc((size_t)n * sizeof(float));
    assert_non_null(y);
    for (long i = 0; i < n; i += 97)
        x[i] = 0.0f;
    float *x_d = upf(x, n), *dy_d = upf(dy, n), *dx_d = upf(dx, n), *y_d = upf(x, n);
    dtk_relu_forward(y, x, n);
    dtk_relu_backward(dx, dy, x, n);
    assert_int_equal(dtcuda_relu_forward(cx, y_d, x_d, n, &err), DT_OK);
    assert_int_equal(dtcuda_relu_backward(cx, dx_d, dy_d, x_d, n, &err), DT_OK);
    float *gy = down(y_d, n), *gx = down(dx_d, n);
    assert_close(gy, y, n, 0.0);
    assert_close(gx, dx, n, ELEM_TOL);
    dtcuda_free(x_d), dtcuda_free(dy_d);
    free(x), free(dy), free(dx), free(y), free(gy), free(gx);
}

/* Ensure that softmax + cross-entropy matches the CPU: probabilities, the mean loss (the CPU
 * returns it; the GPU gives per-row losses averaged here) and the accumulated gradient, for
 * 10 classes (the MNIST head) and 1000 (rows longer than a warp), with logits up to +-8. */
static void test_softmax_xent(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 4);
    const int Vs[2] = {10, 1000}, B = 33;
    for (int k = 0; k < 2; k++) {
        const int V = Vs[k];
        const long n = (long)B * V;
        float *z = randv(&r, n), *p = malloc((size_t)n * sizeof(float)), *dz = randv(&r, n);
        int labels[33];
        assert_non_null(p);
        for (long i = 0; i < n; i++)
            z[i] *= 8.0f;
        for (int b = 0; b < B; b++)
            labels[b] = (int)dtk_rng_below(&r, (uint64_t)V);
        float *z_d = upf(z, n), *p_d = upf(z, n), *dz_d = upf(dz, n), *loss_d;
        int *lab_d = up(labels, sizeof labels);
        assert_int_equal(dtcuda_malloc((void **)&loss_d, B * sizeof(float), &err), DT_OK);
        double want = dtk_softmax_xent_forward(p, z, labels, B, V);
        dtk_softmax_xent_backward(dz, p, labels, B, V);
        assert_int_equal(dtcuda_softmax_xent_forward(cx, p_d, loss_d, z_d, lab_d, B, V, &err),
                         DT_OK);
        assert_int_equal(dtcuda_softmax_xent_backward(cx, dz_d, p_d, lab_d, B, V, 1.0f / B, &err),
                         DT_OK);
        float *losses = down(loss_d, B), *gp = down(p_d, n), *gdz = down(dz_d, n);
        double mean = 0;
        for (int b = 0; b < B; b++)
            mean += losses[b];
        mean /= B;
        assert_float_equal(mean, want, SUM_TOL * fabs(want));
        assert_close(gp, p, n, SUM_TOL);
        assert_close(gdz, dz, n, SUM_TOL);
        dtcuda_free(z_d), dtcuda_free(lab_d);
        free(z), free(p), free(dz), free(losses), free(gp), free(gdz);
    }
}

/* One conv2d geometry on both backends: forward with bias, backward accumulating into
 * non-zero gradients. */
static void check_conv(struct dtk_conv_dims d, uint64_t seed)
{
    struct dtk_rng r;
    dtk_rng_seed(&r, seed);
    assert_true(dtk_conv_dims_finish(&d));
    const int G = d.groups > 0 ? d.groups : 1;
    const long P = (long)d.OH * d.OW, in = (long)d.B * d.C * d.H * d.W;
    const long on = (long)d.B * d.F * P, wn = (long)d.F * (d.C / G) * d.kh * d.kw;
    float *x = randv(&r, in), *w = randv(&r, wn), *b = randv(&r, d.F), *dy = randv(&r, on);
    float *dx = randv(&r, in), *dw = randv(&r, wn), *db = randv(&r, d.F);
    float *y = malloc((size_t)on * sizeof(float));
    float *work = malloc((size_t)dtk_conv2d_workspace_floats(&d) * sizeof(float));
    assert_true(y && work);
    float *x_d = upf(x, in), *w_d = upf(w, wn), *b_d = upf(b, d.F), *dy_d = upf(dy, on);
    float *dx_d = upf(dx, in), *dw_d = upf(dw, wn), *db_d = upf(db, d.F), *y_d, *work_d;
    assert_int_equal(dtcuda_malloc((void **)&y_d, (size_t)on * sizeof(float), &err), DT_OK);
    assert_int_equal(dtcuda_malloc((void **)&work_d,
                                   (size_t)dtcuda_conv2d_workspace_floats(&d) * sizeof(float),
                                   &err), DT_OK);
    dtk_conv2d_forward(y, work, x, w, b, &d);
    dtk_conv2d_backward(dx, dw, db, work, dy, x, w, &d);
    assert_int_equal(dtcuda_conv2d_forward(cx, y_d, work_d, x_d, w_d, b_d, &d, &err), DT_OK);
    assert_int_equal(dtcuda_conv2d_backward(cx, dx_d, dw_d, db_d, work_d, dy_d, x_d, w_d, &d,
                                            &err), DT_OK);
    float *gy = down(y_d, on), *gx = down(dx_d, in), *gw = down(dw_d, wn), *gb = down(db_d, d.F);
    assert_close(gy, y, on, SUM_TOL);
    assert_close(gx, dx, in, SUM_TOL);
    assert_close(gw, dw, wn, SUM_TOL);
    assert_close(gb, db, d.F, SUM_TOL);
    dtcuda_free(x_d), dtcuda_free(w_d), dtcuda_free(b_d), dtcuda_free(dy_d), dtcuda_free(work_d);
    free(x), free(w), free(b), free(dy), free(dx), free(dw), free(db), free(y), free(work);
    free(gy), free(gx), free(gw), free(gb);
}

/* Ensure that conv2d matches the CPU for: a padded 3x3 (the seed-002 model's shape, 28x28);
 * a strided 5x4 with asymmetric padding; a grouped 1x1; several chunks of samples with groups
 * (32x32: 16 samples per chunk, 20 samples); one-sample chunks (130x130 > 16384 columns). */
static void test_conv2d(void **state)
{
    (void)state;
    struct dtk_conv_dims g[5] = {
        {.B = 8, .C = 1, .H = 28, .W = 28, .F = 8, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
         .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1, .groups = 1},
        {.B = 4, .C = 2, .H = 11, .W = 9, .F = 3, .kh = 5, .kw = 4, .sh = 2, .sw = 3,
         .pad_t = 1, .pad_l = 2, .pad_b = 2, .pad_r = 1, .groups = 1},
        {.B = 3, .C = 4, .H = 5, .W = 5, .F = 6, .kh = 1, .kw = 1, .sh = 1, .sw = 1,
         .groups = 2},
        {.B = 20, .C = 4, .H = 32, .W = 32, .F = 6, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
         .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1, .groups = 2},
        {.B = 2, .C = 2, .H = 130, .W = 130, .F = 3, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
         .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1, .groups = 1},
    };
    for (int i = 0; i < 5; i++)
        check_conv(g[i], 50 + (uint64_t)i);
}

/* Ensure that maxpool forward (values and argmax, exactly) and backward (accumulating; the
 * same sums in the same order: exactly) match the CPU for 2x2 stride 2 and for padded,
 * overlapping 3x3 stride 2 windows. */
static void test_maxpool(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 6);
    struct dtk_conv_dims g[2] = {
        {.B = 4, .C = 3, .H = 28, .W = 28, .F = 3, .kh = 2, .kw = 2, .sh = 2, .sw = 2},
        {.B = 2, .C = 5, .H = 9, .W = 7, .F = 5, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pad_t = 1,
         .pad_l = 1, .pad_b = 1, .pad_r = 1},
    };
    for (int k = 0; k < 2; k++) {
        struct dtk_conv_dims d = g[k];
        assert_true(dtk_conv_dims_finish(&d));
        const long on = (long)d.B * d.C * d.OH * d.OW, in = (long)d.B * d.C * d.H * d.W;
        float *x = randv(&r, in), *dy = randv(&r, on), *dx = randv(&r, in);
        float *y = malloc((size_t)on * sizeof(float));
        int *arg = malloc((size_t)on * sizeof(int)), *garg = malloc((size_t)on * sizeof(int));
        assert_true(y && arg && garg);
        float *x_d = upf(x, in), *dy_d = upf(dy, on), *dx_d = upf(dx, in), *y_d = upf(dy, on);
        int *arg_d = up(arg, (size_t)on * sizeof(int));
        dtk_maxpool_forward(y, arg, x, &d);
        dtk_maxpool_backward(dx, dy, arg, &d);
        assert_int_equal(dtcuda_maxpool_forward(cx, y_d, arg_d, x_d, &d, &err), DT_OK);
        assert_int_equal(dtcuda_maxpool_backward(cx, dx_d, dy_d, arg_d, &d, &err), DT_OK);
        assert_int_equal(dtcuda_to_host(cx, garg, arg_d, (size_t)on * sizeof(int), &err), DT_OK);
        float *gy = down(y_d, on), *gx = down(dx_d, in);
        assert_memory_equal(garg, arg, (size_t)on * sizeof(int));
        assert_close(gy, y, on, 0.0);
        assert_close(gx, dx, in, 0.0);
        dtcuda_free(x_d), dtcuda_free(dy_d), dtcuda_free(arg_d);
        free(x), free(dy), free(dx), free(y), free(arg), free(garg), free(gy), free(gx);
    }
}

/* Ensure that three Adam steps match dtk_adam_step for both flavors over 5000 parameters. */
static void test_adam(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 7);
    const long n = 5000;
    for (int fl = 0; fl < 2; fl++) {
        struct dtk_adam cfg = dtk_adam_defaults(fl ? DTK_ADAM_PYTORCH : DTK_ADAM_KERAS);
        float *p = randv(&r, n), *m = calloc((size_t)n, sizeof(float));
        float *v = calloc((size_t)n, sizeof(float));
        assert_true(m && v);
        float *p_d = upf(p, n), *m_d = upf(m, n), *v_d = upf(v, n);
        for (long t = 1; t <= 3; t++) {
            float *g = randv(&r, n), *g_d = upf(g, n);
            dtk_adam_step(p, g, m, v, n, t, &cfg);
            assert_int_equal(dtcuda_adam_step(cx, p_d, g_d, m_d, v_d, n, t, &cfg, &err), DT_OK);
            assert_int_equal(dtcuda_sync(cx, &err), DT_OK);
            dtcuda_free(g_d);
            free(g);
        }
        float *gp = down(p_d, n), *gm = down(m_d, n), *gv = down(v_d, n);
        assert_close(gp, p, n, ELEM_TOL);
        assert_close(gm, m, n, ELEM_TOL);
        assert_close(gv, v, n, ELEM_TOL);
        free(p), free(m), free(v), free(gp), free(gm), free(gv);
    }
}

/* Ensure that three SGD steps with momentum match dtk_sgd_step, and that copy and accumulate
 * move and add device floats. */
static void test_sgd_copy(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 8);
    const long n = 5000;
    struct dtk_sgd cfg = {.lr = 0.1f, .momentum = 0.9f};
    float *p = randv(&r, n), *b = calloc((size_t)n, sizeof(float));
    assert_non_null(b);
    float *p_d = upf(p, n), *b_d = upf(b, n);
    for (long t = 1; t <= 3; t++) {
        float *g = randv(&r, n), *g_d = upf(g, n);
        dtk_sgd_step(p, g, b, n, t, &cfg);
        assert_int_equal(dtcuda_sgd_step(cx, p_d, g_d, b_d, n, t, &cfg, &err), DT_OK);
        assert_int_equal(dtcuda_sync(cx, &err), DT_OK);
        dtcuda_free(g_d);
        free(g);
    }
    /* b_d = p_d, then b_d += p_d: twice the parameters (down frees what it reads) */
    assert_int_equal(dtcuda_copy(cx, b_d, p_d, (size_t)n * sizeof(float), &err), DT_OK);
    assert_int_equal(dtcuda_accumulate(cx, b_d, p_d, n, &err), DT_OK);
    float *gp = down(p_d, n), *twice = down(b_d, n);
    assert_close(gp, p, n, ELEM_TOL);
    for (long i = 0; i < n; i++)
        assert_float_equal(twice[i], 2.0f * gp[i], 0.0f);
    free(p), free(b), free(gp), free(twice);
}

static int setup(void **state)
{
    (void)state;
    if (dtcuda_create(&cx, 0, &err) != DT_OK) {
        fprintf(stderr, "test_cuda_kernels: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (err.msg[0])
        fprintf(stderr, "test_cuda_kernels: last error: %s\n", err.msg);
    dtcuda_destroy(cx);
    return 0;
}

int main(void)
{
    if (dtcuda_device_count() == 0) {
        printf("no GPU: CUDA kernel tests skipped (%s)\n",
               dtcuda_built() ? "CUDA backend built, no device or driver"
                              : "no CUDA backend built");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_round_trip),
        cmocka_unit_test(test_bad_device),
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_relu),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_sgd_copy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
