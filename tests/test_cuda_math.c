/* Host tests of the CUDA kernels' arithmetic (exec/cuda/kernel_math.h), run on every build,
 * with or without CUDA or a GPU. Each element function is run over a whole tensor on the CPU
 * and compared with the CPU kernel it must reproduce (exec/cpu: the oracle). The conv2d tests
 * replay dtcuda_conv2d_forward/backward step by step (same chunks, same GEMM arguments, with
 * OpenBLAS in column-major mode standing in for cuBLAS), so a wrong index or transpose in the
 * GPU path fails here even on a machine that cannot run it.
 * Expected values: the CPU kernels' outputs; data movement must match bitwise, sums within
 * the stated float32 rounding tolerances; chunk sizes by hand. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cblas.h>

#include "cuda_kernels.h"
#include "kernel_math.h"
#include "im2col.h"
#include "layers.h"
#include "optim.h"
#include "rng.h"

/* Sums of at most a few hundred float32 products in another order: relative to the largest
 * magnitude of the reference, 1e-5 is ~100 float32 epsilons (6e-8) of slack. */
#define SUM_TOL 1e-5

static float *randv(struct dtk_rng *r, long n)
{
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (long i = 0; i < n; i++)
        x[i] = dtk_rng_uniform_range(r, -1.0f, 1.0f);
    return x;
}

static void assert_close(const float *got, const float *want, long n, double tol)
{
    double scale = 1.0;
    for (long i = 0; i < n; i++)
        if (fabs(want[i]) > scale)
            scale = fabs(want[i]);
    for (long i = 0; i < n; i++) {
        if (fabs((double)got[i] - want[i]) > tol * scale)
            fail_msg("element %ld: got %.9g, want %.9g (tolerance %.3g)", i, got[i], want[i],
                     tol * scale);
    }
}

/* Geometries shared by the conv tests: padded 3x3, strided 5x5 with asymmetric padding, 1x1
 * grouped, 2x2 stride 2 (pool-like, no overlap). */
static struct dtk_conv_dims geometry(int which)
{
    struct dtk_conv_dims g[4] = {
        {.B = 5, .C = 3, .H = 7, .W = 6, .F = 4, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
         .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1, .groups = 1},
        {.B = 4, .C = 2, .H = 11, .W = 9, .F = 3, .kh = 5, .kw = 4, .sh = 2, .sw = 3,
         .pad_t = 1, .pad_l = 2, .pad_b = 2, .pad_r = 1, .groups = 1},
        {.B = 3, .C = 4, .H = 5, .W = 5, .F = 6, .kh = 1, .kw = 1, .sh = 1, .sw = 1,
         .groups = 2},
        {.B = 2, .C = 2, .H = 8, .W = 6, .F = 2, .kh = 2, .kw = 2, .sh = 2, .sw = 2,
         .groups = 1},
    };
    struct dtk_conv_dims d = g[which];
    assert_true(dtk_conv_dims_finish(&d));
    return d;
}

/* Ensure that the unfolding of a chunk of samples is bit for bit the CPU's im2col of each
 * sample side by side (row stride nb P, sample bi at column bi P), for every geometry. */
static void test_im2col_matches_cpu(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 1);
    for (int w = 0; w < 4; w++) {
        struct dtk_conv_dims d = geometry(w);
        const long P = (long)d.OH * d.OW, K = (long)d.C * d.kh * d.kw, img = (long)d.C * d.H * d.W;
        const int b0 = 1, nb = d.B - 1;
        const long N = nb * P;
        float *inp = randv(&r, d.B * img), *want = calloc((size_t)(K * N), sizeof(float));
        assert_non_null(want);
        for (int bi = 0; bi < nb; bi++)
            dtk_im2col(want + bi * P, N, inp + (b0 + bi) * img, d.C, d.H, d.W, d.kh, d.kw, d.sh,
                       d.sw, d.pad_t, d.pad_l, d.OH, d.OW);
        for (long i = 0; i < K * N; i++)
            if (dtcuda_im2col_at(inp, &d, b0, nb, i) != want[i])
                fail_msg("geometry %d, element %ld", w, i);
        free(inp);
        free(want);
    }
}

/* Ensure that the gathered col2im adds to each input element what the CPU's scattering
 * col2im adds (same terms, another order: SUM_TOL), on top of an existing gradient. */
static void test_col2im_matches_cpu(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 2);
    for (int w = 0; w < 4; w++) {
        struct dtk_conv_dims d = geometry(w);
        const long P = (long)d.OH * d.OW, K = (long)d.C * d.kh * d.kw, img = (long)d.C * d.H * d.W;
        const int nb = d.B;
        const long N = nb * P;
        float *dcol = randv(&r, K * N), *want = randv(&r, nb * img);
        float *got = malloc((size_t)(nb * img) * sizeof *got);
        assert_non_null(got);
        memcpy(got, want, (size_t)(nb * img) * sizeof *got);
        for (int bi = 0; bi < nb; bi++)
            dtk_col2im(want + bi * img, dcol + bi * P, N, d.C, d.H, d.W, d.kh, d.kw, d.sh, d.sw,
                       d.pad_t, d.pad_l, d.OH, d.OW);
        for (long i = 0; i < nb * img; i++)
            got[i] += dtcuda_col2im_at(dcol, &d, nb, i);
        assert_close(got, want, nb * img, SUM_TOL);
        free(dcol);
        free(want);
        free(got);
    }
}

/* Row-major C = op(A) op(B) through the column-major restatement, as dtcuda_sgemm_rm hands it
 * to cuBLAS, with OpenBLAS' column-major sgemm in cuBLAS' place (same BLAS semantics). */
static void sgemm_cm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc)
{
    struct dtcuda_gemm_cm g = dtcuda_gemm_rm(ta, tb, M, N, K, A, lda, B, ldb, ldc);
    cblas_sgemm(CblasColMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                g.m, g.n, g.k, alpha, g.a, g.lda, g.b, g.ldb, beta, C, g.ldc);
}

/* Ensure that the row-major to column-major restatement computes C = alpha op(A) op(B) +
 * beta C for the four transpose cases, with leading dimensions wider than the matrices
 * (submatrices); expected values from the definition, a triple loop in double. */
static void test_gemm_restatement(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 3);
    const int M = 5, N = 7, K = 3, pad = 2;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            /* op(A) is M x K: A is stored M x K, or K x M when transposed (row-major) */
            int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
            int lda = acols + pad, ldb = bcols + pad, ldc = N + pad;
            float *A = randv(&r, (long)arows * lda), *B = randv(&r, (long)brows * ldb);
            float *C = randv(&r, (long)M * ldc), *want = malloc((size_t)M * ldc * sizeof(float));
            assert_non_null(want);
            memcpy(want, C, (size_t)M * ldc * sizeof(float));
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int k = 0; k < K; k++)
                        s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
                             (tb ? B[j * ldb + k] : B[k * ldb + j]);
                    want[i * ldc + j] = (float)(1.5 * s + 0.5 * want[i * ldc + j]);
                }
            sgemm_cm(ta, tb, M, N, K, 1.5f, A, lda, B, ldb, 0.5f, C, ldc);
            assert_close(C, want, (long)M * ldc, SUM_TOL);
            free(A);
            free(B);
            free(C);
            free(want);
        }
}

/* dtcuda_conv2d_forward replayed on the host (keep in step with exec/cuda/layers.cu). */
static void replay_conv_forward(float *out, float *work, const float *inp, const float *weight,
                                const float *bias, const struct dtk_conv_dims *d)
{
    const int G = d->groups > 0 ? d->groups : 1;
    const long P = (long)d->OH * d->OW, K = (long)d->C * d->kh * d->kw;
    const int Fg = d->F / G, Kg = (int)(K / G);
    const int nbmax = dtcuda_conv_chunk(d);
    float *col = work, *tmp = work + K * nbmax * P;
    for (int b0 = 0; b0 < d->B; b0 += nbmax) {
        const int nb = d->B - b0 < nbmax ? d->B - b0 : nbmax;
        const long N = nb * P;
        float *o = out + (long)b0 * d->F * P;
        float *dst = nb == 1 ? o : tmp;
        for (long i = 0; i < K * N; i++)
            col[i] = dtcuda_im2col_at(inp, d, b0, nb, i);
        for (int g = 0; g < G; g++)
            sgemm_cm(false, false, Fg, (int)N, Kg, 1.0f, weight + (long)g * Fg * Kg, Kg,
                     col + (long)g * Kg * N, (int)N, 0.0f, dst + (long)g * Fg * N, (int)N);
        for (long i = 0; i < N * d->F; i++) {
            float v = dst[dtcuda_fold_index(d, nb, i)];
            o[i] = bias ? v + bias[i / P % d->F] : v;
        }
    }
}

/* dtcuda_conv2d_backward replayed on the host (keep in step with exec/cuda/layers.cu). */
static void replay_conv_backward(float *dinp, float *dweight, float *dbias, float *work,
                                 const float *dout, const float *inp, const float *weight,
                                 const struct dtk_conv_dims *d)
{
    const int G = d->groups > 0 ? d->groups : 1;
    const long P = (long)d->OH * d->OW, K = (long)d->C * d->kh * d->kw;
    const long img = (long)d->C * d->H * d->W;
    const int Fg = d->F / G, Kg = (int)(K / G);
    const int nbmax = dtcuda_conv_chunk(d);
    float *col = work, *dcol = work + K * nbmax * P, *dtmp = dcol + K * nbmax * P;
    for (int f = 0; f < d->F; f++) {
        float s = 0.0f;
        for (long i = 0; i < (long)d->B * P; i++)
            s += dout[(i / P * d->F + f) * P + i % P];
        dbias[f] += s;
    }
    for (int b0 = 0; b0 < d->B; b0 += nbmax) {
        const int nb = d->B - b0 < nbmax ? d->B - b0 : nbmax;
        const long N = nb * P;
        const float *g_out = dout + (long)b0 * d->F * P;
        const float *dsrc = g_out;
        if (nb > 1) {
            for (long i = 0; i < N * d->F; i++)
                dtmp[dtcuda_fold_index(d, nb, i)] = g_out[i];
            dsrc = dtmp;
        }
        for (long i = 0; i < K * N; i++)
            col[i] = dtcuda_im2col_at(inp, d, b0, nb, i);
        for (int g = 0; g < G; g++)
            sgemm_cm(false, true, Fg, Kg, (int)N, 1.0f, dsrc + (long)g * Fg * N, (int)N,
                     col + (long)g * Kg * N, (int)N, 1.0f, dweight + (long)g * Fg * Kg, Kg);
        for (int g = 0; g < G; g++)
            sgemm_cm(true, false, Kg, (int)N, Fg, 1.0f, weight + (long)g * Fg * Kg, Kg,
                     dsrc + (long)g * Fg * N, (int)N, 0.0f, dcol + (long)g * Kg * N, (int)N);
        for (long i = 0; i < nb * img; i++)
            dinp[(long)b0 * img + i] += dtcuda_col2im_at(dcol, d, nb, i);
    }
}

/* Geometry 4: more samples than one chunk holds (P = 32 x 32 = 1024 with 3x3 "same", so
 * 16384 / 1024 = 16 samples per chunk, by hand) and a grouped convolution: 20 samples make a
 * chunk of 16 and one of 4. Geometry 5: a sample wider than the target (P = 130 x 130 =
 * 16900 > 16384), so chunks of one sample, where the GEMM writes straight into the output. */
static struct dtk_conv_dims big_geometry(int which)
{
    struct dtk_conv_dims d = {.B = 20, .C = 4, .H = 32, .W = 32, .F = 6, .kh = 3, .kw = 3,
                              .sh = 1, .sw = 1, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1,
                              .groups = 2};
    if (which == 1)
        d = (struct dtk_conv_dims){.B = 2, .C = 2, .H = 130, .W = 130, .F = 3, .kh = 3, .kw = 3,
                                   .sh = 1, .sw = 1, .pad_t = 1, .pad_l = 1, .pad_b = 1,
                                   .pad_r = 1, .groups = 1};
    assert_true(dtk_conv_dims_finish(&d));
    return d;
}

static void check_conv(const struct dtk_conv_dims *d, uint64_t seed)
{
    struct dtk_rng r;
    dtk_rng_seed(&r, seed);
    const long P = (long)d->OH * d->OW, img = (long)d->C * d->H * d->W;
    const long wn = (long)d->F * (d->C / (d->groups > 0 ? d->groups : 1)) * d->kh * d->kw;
    const long on = d->B * d->F * P, in = d->B * img;
    float *inp = randv(&r, in), *w = randv(&r, wn), *b = randv(&r, d->F), *dout = randv(&r, on);
    float *out = malloc((size_t)on * sizeof(float)), *want = malloc((size_t)on * sizeof(float));
    float *work = malloc((size_t)dtcuda_conv_workspace(d) * sizeof(float));
    float *cpu_work = malloc((size_t)dtk_conv2d_workspace_floats(d) * sizeof(float));
    /* gradients start non-zero: backward must add to them */
    float *dinp = randv(&r, in), *dw = randv(&r, wn), *db = randv(&r, d->F);
    float *dinp2 = malloc((size_t)in * sizeof(float)), *dw2 = malloc((size_t)wn * sizeof(float));
    float db2[16];
    assert_true(out && want && work && cpu_work && dinp2 && dw2 && d->F <= 16);
    memcpy(dinp2, dinp, (size_t)in * sizeof(float));
    memcpy(dw2, dw, (size_t)wn * sizeof(float));
    memcpy(db2, db, (size_t)d->F * sizeof(float));

    dtk_conv2d_forward(want, cpu_work, inp, w, b, d);
    replay_conv_forward(out, work, inp, w, b, d);
    assert_close(out, want, on, SUM_TOL);

    dtk_conv2d_backward(dinp2, dw2, db2, cpu_work, dout, inp, w, d);
    replay_conv_backward(dinp, dw, db, work, dout, inp, w, d);
    assert_close(dinp, dinp2, in, SUM_TOL);
    /* dW sums B P products (up to 33800 here): relative slack 1e-4 */
    assert_close(dw, dw2, wn, 1e-4);
    assert_close(db, db2, d->F, 1e-4);
    free(inp), free(w), free(b), free(dout), free(out), free(want), free(work), free(cpu_work);
    free(dinp), free(dw), free(db), free(dinp2), free(dw2);
}

/* Ensure that the GPU's conv2d sequence (chunks, groups, GEMM restatement, fold, gathered
 * col2im) gives the CPU's forward output and accumulated gradients, for the small geometries
 * (one chunk) and for several chunks with groups. */
static void test_conv_replay_matches_cpu(void **state)
{
    (void)state;
    for (int w = 0; w < 4; w++) {
        struct dtk_conv_dims d = geometry(w);
        check_conv(&d, 10 + (uint64_t)w);
    }
    struct dtk_conv_dims big = big_geometry(0);
    assert_int_equal(dtcuda_conv_chunk(&big), 16);
    check_conv(&big, 20);
}

/* Ensure that a sample wider than the column target gives one-sample chunks, which take the
 * in-place path (GEMM into the output, fold as identity), and still matches the CPU. */
static void test_conv_replay_one_sample_chunks(void **state)
{
    (void)state;
    struct dtk_conv_dims d = big_geometry(1);
    assert_int_equal(dtcuda_conv_chunk(&d), 1);
    check_conv(&d, 30);
}

/* Ensure that the workspace is col + dcol (K x N each) + dtmp (F x N) for N = chunk x P:
 * for the 32x32 geometry, K = 4 x 9 = 36, N = 16 x 1024, F = 6: (72 + 6) x 16384 floats. */
static void test_conv_workspace(void **state)
{
    (void)state;
    struct dtk_conv_dims d = big_geometry(0);
    assert_int_equal(dtcuda_conv_workspace(&d), 78L * 16384);
}

/* Ensure that max pooling gives the CPU's outputs and argmax bit for bit, including the first
 * maximum on ties (a constant plane) and padded, overlapping 3x3 stride 2 windows; and that
 * its gathered gradient equals the CPU's scattered one bit for bit (same order of sums). */
static void test_maxpool_matches_cpu(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 4);
    struct dtk_conv_dims g[3] = {
        {.B = 2, .C = 3, .H = 8, .W = 6, .kh = 2, .kw = 2, .sh = 2, .sw = 2},
        {.B = 2, .C = 2, .H = 9, .W = 7, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pad_t = 1,
         .pad_l = 1, .pad_b = 1, .pad_r = 1},
        {.B = 1, .C = 1, .H = 5, .W = 5, .kh = 3, .kw = 2, .sh = 1, .sw = 1},
    };
    for (int w = 0; w < 3; w++) {
        struct dtk_conv_dims d = g[w];
        d.F = d.C;
        assert_true(dtk_conv_dims_finish(&d));
        const long on = (long)d.B * d.C * d.OH * d.OW, in = (long)d.B * d.C * d.H * d.W;
        float *inp = randv(&r, in), *want = malloc((size_t)on * sizeof(float));
        if (w == 2)
            for (long i = 0; i < in; i++)
                inp[i] = 0.25f; /* all ties: the first cell of each window wins */
        int *warg = malloc((size_t)on * sizeof(int));
        assert_true(want && warg);
        dtk_maxpool_forward(want, warg, inp, &d);
        for (long i = 0; i < on; i++) {
            int a;
            float v = dtcuda_maxpool_at(&a, inp, &d, i);
            if (v != want[i] || a != warg[i])
                fail_msg("geometry %d, output %ld: got %g at %d, want %g at %d", w, i, v, a,
                         want[i], warg[i]);
        }
        float *dout = randv(&r, on), *dinp = randv(&r, in);
        float *dwant = malloc((size_t)in * sizeof(float));
        assert_non_null(dwant);
        memcpy(dwant, dinp, (size_t)in * sizeof(float));
        dtk_maxpool_backward(dwant, dout, warg, &d);
        for (long i = 0; i < in; i++)
            if (dtcuda_maxpool_grad_at(dinp[i], dout, warg, &d, i) != dwant[i])
                fail_msg("geometry %d, input %ld", w, i);
        free(inp), free(want), free(warg), free(dout), free(dinp), free(dwant);
    }
}

/* Ensure that the Adam element update with the host-prepared scalars follows dtk_adam_step
 * for both flavors over three steps (the same float formulas: within 1e-6 relative, equal on
 * x86-64 where nothing is contracted into an FMA). */
static void test_adam_matches_cpu(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 5);
    enum { n = 64 };
    for (int fl = 0; fl < 2; fl++) {
        struct dtk_adam cfg = dtk_adam_defaults(fl ? DTK_ADAM_PYTORCH : DTK_ADAM_KERAS);
        cfg.lr = 0.01f;
        float p[n], m[n] = {0}, v[n] = {0}, p2[n], m2[n] = {0}, v2[n] = {0};
        for (int i = 0; i < n; i++)
            p[i] = p2[i] = dtk_rng_uniform_range(&r, -1, 1);
        for (long t = 1; t <= 3; t++) {
            float g[n];
            for (int i = 0; i < n; i++)
                g[i] = dtk_rng_uniform_range(&r, -1, 1);
            dtk_adam_step(p2, g, m2, v2, n, t, &cfg);
            struct dtcuda_adam_scalars s = dtcuda_adam_prepare(&cfg, t);
            for (int i = 0; i < n; i++)
                dtcuda_adam_at(&p[i], &m[i], &v[i], g[i], &s);
        }
        assert_close(p, p2, n, 1e-6);
        assert_close(m, m2, n, 1e-6);
        assert_close(v, v2, n, 1e-6);
    }
}

/* Ensure that the SGD element update follows dtk_sgd_step over three steps: plain, with
 * momentum, with Nesterov momentum, dampening and weight decay (exactly, without FMA). */
static void test_sgd_matches_cpu(void **state)
{
    (void)state;
    struct dtk_rng r;
    dtk_rng_seed(&r, 6);
    enum { n = 64 };
    const struct dtk_sgd cfgs[3] = {{.lr = 0.1f},
                                    {.lr = 0.1f, .momentum = 0.9f},
                                    {.lr = 0.05f, .momentum = 0.8f, .dampening = 0.1f,
                                     .weight_decay = 0.01f, .nesterov = true}};
    for (int k = 0; k < 3; k++) {
        float p[n], b[n] = {0}, p2[n], b2[n] = {0};
        for (int i = 0; i < n; i++)
            p[i] = p2[i] = dtk_rng_uniform_range(&r, -1, 1);
        for (long t = 1; t <= 3; t++) {
            float g[n];
            for (int i = 0; i < n; i++)
                g[i] = dtk_rng_uniform_range(&r, -1, 1);
            dtk_sgd_step(p2, g, k ? b2 : NULL, n, t, &cfgs[k]);
            for (int i = 0; i < n; i++)
                dtcuda_sgd_at(&p[i], k ? &b[i] : NULL, g[i], t, &cfgs[k]);
        }
        assert_close(p, p2, n, 1e-6);
        assert_close(b, b2, n, 1e-6);
    }
}

/* Ensure that, on a machine without a GPU (or in a build without CUDA), the device count is 0
 * and creating a context fails with DT_EINPUT and says why, rather than crashing: the stub's
 * "no CUDA backend built", or the backend's "no CUDA device 0 (this machine has 0)". */
static void test_without_gpu_calls_fail(void **state)
{
    (void)state;
    if (dtcuda_device_count() > 0)
        skip();
    struct dtcuda *cx = (struct dtcuda *)&cx; /* must be reset to NULL */
    struct dt_error e;
    assert_int_equal(dtcuda_create(&cx, 0, &e), DT_EINPUT);
    assert_null(cx);
    assert_non_null(strstr(e.msg, dtcuda_built() ? "no CUDA device 0" : "no CUDA backend built"));
    void *p = &e;
    /* the stub: DT_EINPUT; the backend: whatever CUDA says about a missing device */
    assert_int_not_equal(dtcuda_malloc(&p, 16, &e), DT_OK);
    assert_null(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_im2col_matches_cpu),
        cmocka_unit_test(test_col2im_matches_cpu),
        cmocka_unit_test(test_gemm_restatement),
        cmocka_unit_test(test_conv_replay_matches_cpu),
        cmocka_unit_test(test_conv_replay_one_sample_chunks),
        cmocka_unit_test(test_conv_workspace),
        cmocka_unit_test(test_maxpool_matches_cpu),
        cmocka_unit_test(test_adam_matches_cpu),
        cmocka_unit_test(test_sgd_matches_cpu),
        cmocka_unit_test(test_without_gpu_calls_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
