/* Tests of the CPU kernels' threads (exec/cpu/parallel.h, threads.c, gemm.c) and of the
 * convolution run on them. Expected values come from the definitions: every task run once;
 * a GEMM computed element by element in double; the convolution and its three gradients
 * computed in double by their sums (y = W * x + b, dx = W^T * dy, dW = dy * x, db = sum dy).
 * Tolerances: float sums of at most a few hundred terms of size 1 are within 1e-4 relative of
 * the double sums; a wrong index or a task run twice is off by order 1. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "layers.h"
#include "parallel.h"

#define TOL 1e-4

static struct dtk_rng trng;

static float *frand(long n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(p);
    for (long i = 0; i < n; i++)
        p[i] = dtk_rng_uniform_range(&trng, -1.0f, 1.0f);
    return p;
}

static void assert_close(double got, double want)
{
    if (!(fabs(got - want) <= TOL * (1.0 + fabs(want))))
        fail_msg("got %.9g, want %.9g", got, want);
}

/* ---------------------------------------------------------------- the pool */

struct count_ctx {
    int *count;   /* runs of each task */
    int *thread;  /* the thread that ran it */
    int threads;
    int nested_ok;
};

static void count_task(void *ctx, long i, int t)
{
    struct count_ctx *c = ctx;
    __atomic_add_fetch(&c->count[i], 1, __ATOMIC_RELAXED);
    c->thread[i] = t;
}

/* Ensure that dtk_parallel runs every task exactly once, each on a thread numbered below the
 * threads asked for, for several task counts and thread counts, run after run (the workers
 * are reused). */
static void test_parallel_runs_each_task_once(void **state)
{
    (void)state;
    enum { N = 257 };
    int count[N], thread[N];
    for (int threads = 1; threads <= 3; threads++)
        for (long n = 0; n <= N; n += 32) {
            memset(count, 0, sizeof count);
            struct count_ctx c = {count, thread, threads, 0};
            dtk_parallel(n, threads, count_task, &c);
            for (long i = 0; i < n; i++) {
                assert_int_equal(count[i], 1);
                assert_true(thread[i] >= 0 && thread[i] < threads);
            }
            for (long i = n; i < N; i++)
                assert_int_equal(count[i], 0);
        }
}

/* order[8] counts the tasks run; in place they run in index order as thread 0 (a failed
 * check is recorded, not asserted: tasks may run on a worker thread) */
static void nested_inner(void *ctx, long i, int t)
{
    int *order = ctx;
    order[i] = t == 0 ? order[8] : -1;
    order[8]++;
}

static void nested_outer(void *ctx, long i, int t)
{
    struct count_ctx *c = ctx;
    (void)t;
    int order[9] = {0};
    dtk_parallel(8, 2, nested_inner, order);
    int ok = order[8] == 8;
    for (int k = 0; k < 8; k++)
        ok &= order[k] == k;
    /* inside a task OpenBLAS runs on one thread */
    ok &= dtk_in_task() && openblas_get_num_threads() == 1;
    if (ok)
        __atomic_add_fetch(&c->nested_ok, 1, __ATOMIC_RELAXED);
    c->count[i]++;
}

/* Ensure that a run started inside a task runs its tasks in place, in order, as thread 0,
 * that OpenBLAS is on one thread inside tasks, and that its count is restored after. */
static void test_parallel_nested_runs_in_place(void **state)
{
    (void)state;
    int count[6] = {0}, thread[6];
    struct count_ctx c = {count, thread, 2, 0};
    dtk_set_num_threads(2);
    dtk_parallel(6, 2, nested_outer, &c);
    assert_int_equal(c.nested_ok, 6);
    assert_int_equal(openblas_get_num_threads(), 2);
    assert_int_equal(dtk_num_threads(), 2);
    assert_false(dtk_in_task());
    dtk_set_num_threads(1);
    assert_int_equal(dtk_num_threads(), 1);
}

struct range_ctx {
    int *hits;
    int bad_start; /* ranges not starting at a multiple of 16 */
    int calls;
};

static void range_fn(void *ctx, long lo, long hi)
{
    struct range_ctx *c = ctx;
    for (long i = lo; i < hi; i++)
        c->hits[i]++;
    if (lo % 16)
        __atomic_add_fetch(&c->bad_start, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->calls, 1, __ATOMIC_RELAXED);
}

/* Ensure that dtk_parallel_range covers [0, n) exactly once with ranges starting at multiples
 * of 16, one range per thread when n reaches min, one call [0, n) below it. */
static void test_parallel_range_covers_once(void **state)
{
    (void)state;
    enum { N = 1000 };
    int hits[N];
    dtk_set_num_threads(3);
    for (long n = 1; n <= N; n = n * 3 + 1) {
        memset(hits, 0, sizeof hits);
        struct range_ctx c = {hits, 0, 0};
        dtk_parallel_range(n, 100, range_fn, &c);
        for (long i = 0; i < N; i++)
            assert_int_equal(hits[i], i < n ? 1 : 0);
        assert_int_equal(c.bad_start, 0);
        /* 3 threads: ranges of ceil(n/3) rounded up to 16, so 3 of them or fewer */
        assert_true(n < 100 ? c.calls == 1 : c.calls >= 2 && c.calls <= 3);
    }
    dtk_set_num_threads(1);
}

/* ---------------------------------------------------------------- dtk_sgemm */

/* C = alpha op(A) op(B) + beta C0 in double, element (m, n). */
static double gemm_ref(bool ta, bool tb, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, const float *C0, int ldc, int m,
                       int n)
{
    double s = 0;
    for (int k = 0; k < K; k++)
        s += (double)(ta ? A[(long)k * lda + m] : A[(long)m * lda + k]) *
             (tb ? B[(long)n * ldb + k] : B[(long)k * ldb + n]);
    return alpha * s + beta * C0[(long)m * ldc + n];
}

/* Ensure that dtk_sgemm on 2 threads gives alpha op(A) op(B) + beta C for the four
 * transposes, sliced by rows (M > N) and by columns (N > M), with leading dimensions larger
 * than the matrices (slices must keep them), M and N not multiples of the slice alignment. */
static void test_sgemm_sliced_matches_definition(void **state)
{
    (void)state;
    const int shapes[2][3] = {{203, 37, 61}, {29, 251, 70}};
    dtk_set_num_threads(2);
    for (int s = 0; s < 2; s++)
        for (int tr = 0; tr < 4; tr++) {
            bool ta = tr & 1, tb = tr & 2;
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 7;
            float *A = frand((long)(ta ? K : M) * lda), *B = frand((long)(tb ? N : K) * ldb);
            float *C = frand((long)M * ldc), *C0 = malloc((size_t)M * ldc * sizeof(float));
            assert_non_null(C0);
            memcpy(C0, C, (size_t)M * ldc * sizeof(float));
            dtk_sgemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, C, ldc);
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++)
                    assert_close(C[(long)m * ldc + n],
                                 gemm_ref(ta, tb, K, 0.5f, A, lda, B, ldb, 1.0f, C0, ldc, m, n));
            /* the padding columns of C are untouched */
            for (int m = 0; m < M; m++)
                for (int n = N; n < ldc; n++)
                    assert_true(C[(long)m * ldc + n] == C0[(long)m * ldc + n]);
            free(A), free(B), free(C), free(C0);
        }
    dtk_set_num_threads(1);
}

/* ---------------------------------------------------------------- threaded conv2d */

/* Runs forward and backward of conv2d with d->threads workspace slots on `threads` threads
 * and compares with the double sums of the definition. Backward starts from gradients
 * holding 0.25, which it must keep (it accumulates). */
static void check_conv(struct dtk_conv_dims d, int threads)
{
    assert_true(dtk_conv_dims_finish(&d));
    const int G = d.groups, Cg = d.C / G, Fg = d.F / G;
    const long nx = (long)d.B * d.C * d.H * d.W, ny = (long)d.B * d.F * d.OH * d.OW;
    const long nw = (long)d.F * Cg * d.kh * d.kw;
    float *x = frand(nx), *w = frand(nw), *b = frand(d.F), *dy = frand(ny);
    float *y = calloc((size_t)ny, sizeof(float)), *dx = malloc((size_t)nx * sizeof(float));
    float *dw = malloc((size_t)nw * sizeof(float)), *db = malloc((size_t)d.F * sizeof(float));
    float *work = malloc((size_t)dtk_conv2d_workspace_floats(&d) * sizeof(float));
    double *rx = calloc((size_t)nx, sizeof(double)), *rw = calloc((size_t)nw, sizeof(double));
    double *rb = calloc((size_t)d.F, sizeof(double));
    assert_true(y && dx && dw && db && work && rx && rw && rb);
    for (long i = 0; i < nx; i++)
        dx[i] = 0.25f;
    for (long i = 0; i < nw; i++)
        dw[i] = 0.25f;
    for (int f = 0; f < d.F; f++)
        db[f] = 0.25f;

    dtk_set_num_threads(threads);
    dtk_conv2d_forward(y, work, x, w, b, &d);
    dtk_conv2d_backward(dx, dw, db, work, dy, x, w, &d);
    dtk_set_num_threads(1);

    for (int bi = 0; bi < d.B; bi++)
        for (int f = 0; f < d.F; f++)
            for (int oh = 0; oh < d.OH; oh++)
                for (int ow = 0; ow < d.OW; ow++) {
                    long o = (((long)bi * d.F + f) * d.OH + oh) * d.OW + ow;
                    double s = b[f], g = dy[o];
                    rb[f] += g;
                    for (int c = 0; c < Cg; c++)
                        for (int i = 0; i < d.kh; i++)
                            for (int j = 0; j < d.kw; j++) {
                                int ih = oh * d.sh - d.pad_t + i, iw = ow * d.sw - d.pad_l + j;
                                if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W)
                                    continue;
                                long xi = (((long)bi * d.C + (f / Fg) * Cg + c) * d.H + ih) * d.W +
                                          iw;
                                long wi = ((long)(f * Cg + c) * d.kh + i) * d.kw + j;
                                s += (double)w[wi] * x[xi];
                                rx[xi] += (double)w[wi] * g;
                                rw[wi] += g * x[xi];
                            }
                    assert_close(y[o], s);
                }
    for (long i = 0; i < nx; i++)
        assert_close(dx[i] - 0.25f, rx[i]);
    for (long i = 0; i < nw; i++)
        assert_close(dw[i] - 0.25f, rw[i]);
    for (int f = 0; f < d.F; f++)
        assert_close(db[f] - 0.25f, rb[f]);
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db), free(work);
    free(rx), free(rw), free(rb);
}

/* Ensure that conv2d on 2 threads computes the convolution and its gradients: samples folded
 * into blocks (P = 64, the 21.8K CNN's second layer with fewer channels; 37 samples deal
 * into an even number of unequal blocks), one sample per task in bands of rows (P = 576),
 * padding with stride 2 and groups, and 1x1 (the image is its own unfolding). */
static void test_conv2d_threaded_matches_definition(void **state)
{
    (void)state;
    struct dtk_conv_dims g[4] = {
        {.B = 37, .C = 3, .H = 12, .W = 12, .F = 4, .kh = 5, .kw = 5, .sh = 1, .sw = 1,
         .groups = 1, .threads = 2},
        {.B = 5, .C = 1, .H = 28, .W = 28, .F = 3, .kh = 5, .kw = 5, .sh = 1, .sw = 1,
         .groups = 1, .threads = 2},
        {.B = 9, .C = 4, .H = 9, .W = 8, .F = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 2, .pad_t = 1,
         .pad_r = 1, .groups = 2, .threads = 2},
        {.B = 6, .C = 4, .H = 30, .W = 30, .F = 2, .kh = 1, .kw = 1, .sh = 1, .sw = 1,
         .groups = 1, .threads = 2},
    };
    for (int k = 0; k < 4; k++)
        check_conv(g[k], 2);
}

/* Ensure that a workspace sized for 2 threads is larger than for one (a slot per thread plus
 * the per-thread gradient sums), and that conv2d with more threads than slots still computes
 * the definition (it uses the slots it has). */
static void test_conv2d_workspace_per_thread(void **state)
{
    (void)state;
    struct dtk_conv_dims one = {.B = 16, .C = 2, .H = 10, .W = 10, .F = 3, .kh = 3, .kw = 3,
                                .sh = 1, .sw = 1, .groups = 1, .threads = 1};
    struct dtk_conv_dims two = one;
    two.threads = 2;
    assert_true(dtk_conv_dims_finish(&one) && dtk_conv_dims_finish(&two));
    /* two slots, plus 2 x (3*2*3*3 + 3) = 114 floats of gradient sums */
    assert_int_equal(dtk_conv2d_workspace_floats(&two),
                     2 * dtk_conv2d_workspace_floats(&one) + 2 * (3 * 2 * 3 * 3 + 3));
    check_conv(one, 3);
}

/* ---------------------------------------------------------------- _set backward forms */

/* Runs each _set form and its accumulating form on 1 and 2 threads and compares. */
static void check_set_forms(struct dtk_conv_dims d)
{
    assert_true(dtk_conv_dims_finish(&d));
    const long n = (long)d.B * d.C * d.H * d.W, np = (long)d.B * d.C * d.OH * d.OW;
    float *x = frand(n), *g = frand(n), *m = frand(n), *y = frand(np);
    float *acc = calloc((size_t)n, sizeof(float)), *set = frand(n);
    int *arg = malloc((size_t)np * sizeof(int));
    assert_true(acc && arg);
    for (int threads = 1; threads <= 2; threads++) {
        dtk_set_num_threads(threads);
        memset(acc, 0, (size_t)n * sizeof(float));
        dtk_relu_backward(acc, g, x, n);
        dtk_relu_backward_set(set, g, x, n);
        assert_memory_equal(acc, set, (size_t)n * sizeof(float));
        memset(acc, 0, (size_t)n * sizeof(float));
        dtk_dropout_backward(acc, g, m, n);
        dtk_dropout_backward_set(set, g, m, n);
        assert_memory_equal(acc, set, (size_t)n * sizeof(float));
        dtk_maxpool_forward(y, arg, x, &d);
        memset(acc, 0, (size_t)n * sizeof(float));
        dtk_maxpool_backward(acc, g, arg, &d);
        dtk_maxpool_backward_set(set, g, arg, &d);
        assert_memory_equal(acc, set, (size_t)n * sizeof(float));
    }
    dtk_set_num_threads(1);
    free(x), free(g), free(m), free(y), free(acc), free(set), free(arg);
}

/* Ensure that the _set forms of the relu, dropout and max pooling backward write what the
 * accumulating forms add to a zeroed gradient (the definition of "first writer"), also over
 * several threads (n above the parallel threshold), and overwrite what the gradient held:
 * 2x2 pooling with an odd width, with an odd height and width (the seed-002 CNN's 11x11), and
 * a 3x3 stride 2 padded pooling (the general form). */
static void test_backward_set_forms_match(void **state)
{
    (void)state;
    struct dtk_conv_dims g[3] = {
        {.B = 4, .C = 6, .H = 50, .W = 51, .F = 6, .kh = 2, .kw = 2, .sh = 2, .sw = 2},
        {.B = 9, .C = 40, .H = 11, .W = 11, .F = 40, .kh = 2, .kw = 2, .sh = 2, .sw = 2},
        {.B = 3, .C = 5, .H = 40, .W = 40, .F = 5, .kh = 3, .kw = 3, .sh = 2, .sw = 2,
         .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1},
    };
    for (int k = 0; k < 3; k++)
        check_set_forms(g[k]);
}

int main(void)
{
    dtk_rng_seed(&trng, 2024);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel_runs_each_task_once),
        cmocka_unit_test(test_parallel_nested_runs_in_place),
        cmocka_unit_test(test_parallel_range_covers_once),
        cmocka_unit_test(test_sgemm_sliced_matches_definition),
        cmocka_unit_test(test_conv2d_threaded_matches_definition),
        cmocka_unit_test(test_conv2d_workspace_per_thread),
        cmocka_unit_test(test_backward_set_forms_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
