/* bench_kernels: GFLOP/s of the CPU conv and dense kernels on the seed-002 CNN's shapes, of a
 * plain sgemm of the same sizes, and the time of one training step of models/cnn690k.yaml.
 * FLOPs count a multiply-add as 2 (as dt/model.h). Threads: OPENBLAS_NUM_THREADS (the
 * "make bench" target sets 1).
 * Usage: bench_kernels [batch] [min seconds per figure] [model.yaml ...] */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dt/model.h"
#include "layers.h"
#include "net.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *rand_buf(long n, struct dtk_rng *rng)
{
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        exit(1);
    }
    for (long i = 0; i < n; i++)
        p[i] = dtk_rng_uniform_range(rng, -1.0f, 1.0f);
    return p;
}

static double min_s = 0.5;

/* Seconds per call of fn(ctx): the fastest of the calls made in min_s (after one warm-up
 * call), which is stable on a shared machine where a mean is not. */
static double time_it(void (*fn)(void *), void *ctx)
{
    fn(ctx);
    double best = 1e30, start = now_s(), t;
    do {
        double t0 = now_s();
        fn(ctx);
        t = now_s();
        if (t - t0 < best)
            best = t - t0;
    } while (t - start < min_s);
    return best;
}

struct conv_ctx {
    struct dtk_conv_dims d;
    float *x, *w, *b, *y, *dx, *dw, *db, *work;
    int M, N, K; /* the equivalent single GEMM */
    float *A, *Bm, *C;
};

static void run_conv_fwd(void *p)
{
    struct conv_ctx *c = p;
    dtk_conv2d_forward(c->y, c->work, c->x, c->w, c->b, &c->d);
}

static void run_conv_bwd(void *p)
{
    struct conv_ctx *c = p;
    dtk_conv2d_backward(c->dx, c->dw, c->db, c->work, c->y, c->x, c->w, &c->d);
}

static void run_gemm(void *p)
{
    struct conv_ctx *c = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->M, c->N, c->K, 1.0f, c->A, c->K,
                c->Bm, c->N, 0.0f, c->C, c->N);
}

static void bench_conv(const char *name, int B, int C, int H, int W, int F, int k,
                       struct dtk_rng *rng)
{
    struct conv_ctx c = {.d = {.B = B, .C = C, .H = H, .W = W, .F = F, .kh = k, .kw = k,
                               .sh = 1, .sw = 1, .groups = 1}};
    dtk_conv_dims_finish(&c.d);
    long in = (long)B * C * H * W, out = (long)B * F * c.d.OH * c.d.OW, nw = (long)F * C * k * k;
    c.x = rand_buf(in, rng);
    c.dx = rand_buf(in, rng);
    c.w = rand_buf(nw, rng);
    c.dw = rand_buf(nw, rng);
    c.b = rand_buf(F, rng);
    c.db = rand_buf(F, rng);
    c.y = rand_buf(out, rng);
    c.work = rand_buf(dtk_conv2d_workspace_floats(&c.d), rng);
    c.M = F;
    c.K = C * k * k;
    c.N = B * c.d.OH * c.d.OW;
    c.A = rand_buf((long)c.M * c.K, rng);
    c.Bm = rand_buf((long)c.K * c.N, rng);
    c.C = rand_buf((long)c.M * c.N, rng);
    double flops = 2.0 * c.M * c.K * (double)c.N;
    double tf = time_it(run_conv_fwd, &c), tb = time_it(run_conv_bwd, &c);
    double tg = time_it(run_gemm, &c);
    printf("%-28s fwd %7.2f ms %6.1f GFLOP/s   bwd %7.2f ms %6.1f GFLOP/s   "
           "sgemm %dx%dx%d %6.1f GFLOP/s\n",
           name, tf * 1e3, flops / tf / 1e9, tb * 1e3, 2 * flops / tb / 1e9, c.M, c.N, c.K,
           flops / tg / 1e9);
    free(c.x), free(c.dx), free(c.w), free(c.dw), free(c.b), free(c.db), free(c.y);
    free(c.work), free(c.A), free(c.Bm), free(c.C);
}

struct dense_ctx {
    int N, in, out;
    float *x, *w, *b, *y, *dx, *dw, *db;
};

static void run_dense_fwd(void *p)
{
    struct dense_ctx *c = p;
    dtk_dense_forward(c->y, c->x, c->w, c->b, c->N, c->in, c->out);
}

static void run_dense_bwd(void *p)
{
    struct dense_ctx *c = p;
    dtk_dense_backward(c->dx, c->dw, c->db, c->y, c->x, c->w, c->N, c->in, c->out);
}

static void bench_dense(const char *name, int N, int in, int out, struct dtk_rng *rng)
{
    struct dense_ctx c = {N, in, out, rand_buf((long)N * in, rng), rand_buf((long)in * out, rng),
                          rand_buf(out, rng), rand_buf((long)N * out, rng),
                          rand_buf((long)N * in, rng), rand_buf((long)in * out, rng),
                          rand_buf(out, rng)};
    double flops = 2.0 * N * in * (double)out;
    double tf = time_it(run_dense_fwd, &c), tb = time_it(run_dense_bwd, &c);
    printf("%-28s fwd %7.3f ms %6.1f GFLOP/s   bwd %7.3f ms %6.1f GFLOP/s\n", name, tf * 1e3,
           flops / tf / 1e9, tb * 1e3, 2 * flops / tb / 1e9);
    free(c.x), free(c.w), free(c.b), free(c.y), free(c.dx), free(c.dw), free(c.db);
}

struct step_ctx {
    struct dtk_net *net;
    const float *x;
    const int *labels;
    int B;
    long t;
    struct dtk_adam adam;
};

static void run_step(void *p)
{
    struct step_ctx *c = p;
    dtk_net_forward(c->net, c->x, c->B, true, NULL);
    dtk_net_loss_backward(c->net, c->labels, c->B);
    dtk_net_adam_step(c->net, &c->adam, ++c->t);
}

static void bench_model(const char *path, int B, struct dtk_rng *rng)
{
    struct dt_model *m;
    struct dt_error err;
    if (dt_model_load(path, &m, &err)) {
        char buf[1600];
        dt_error_format(&err, buf, sizeof buf);
        printf("%-28s skipped: %s\n", "training step", buf);
        return;
    }
    struct dtk_net *net;
    if (dtk_net_create(m, B, DTK_INIT_GLOROT, 1, &net, &err)) {
        printf("%-28s skipped: %s\n", "training step", err.msg);
        dt_model_destroy(m);
        return;
    }
    long in = dtk_net_out_floats(net, -1);
    float *x = rand_buf(in * B, rng);
    int *labels = malloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++)
        labels[b] = (int)dtk_rng_below(rng, (uint64_t)m->classes);
    struct step_ctx c = {net, x, labels, B, 0, dtk_adam_defaults(DTK_ADAM_KERAS)};
    double t = time_it(run_step, &c);
    double flops = (m->fwd_flops + m->bwd_flops) * B;
    printf("%-28s %s batch %d: %.2f ms/step, %.0f samples/s, %.1f GFLOP/s (%.1f MFLOP/sample)\n",
           "training step", m->name, B, t * 1e3, B / t, flops / t / 1e9,
           (m->fwd_flops + m->bwd_flops) / 1e6);
    free(x);
    free(labels);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

int main(int argc, char **argv)
{
    int B = argc > 1 ? atoi(argv[1]) : 128;
    if (argc > 2)
        min_s = atof(argv[2]);
    if (B < 1 || !(min_s > 0)) {
        fprintf(stderr, "usage: bench_kernels [batch >= 1] [min seconds > 0] [model.yaml ...]\n");
        return 2;
    }
    struct dtk_rng rng;
    dtk_rng_seed(&rng, 42);
    printf("bench_kernels: batch %d, OpenBLAS threads %d, kernel threads %d\n", B,
           openblas_get_num_threads(), dtk_num_threads());
    bench_conv("conv 1->32 3x3 @28x28", B, 1, 28, 28, 32, 3, &rng);
    bench_conv("conv 32->128 3x3 @13x13", B, 32, 13, 13, 128, 3, &rng);
    bench_conv("conv 128->256 3x3 @5x5", B, 128, 5, 5, 256, 3, &rng);
    bench_conv("conv 64->64 3x3 @32x32", B, 64, 32, 32, 64, 3, &rng);
    bench_dense("dense 256->1000", B, 256, 1000, &rng);
    bench_dense("dense 1000->100", B, 1000, 100, &rng);
    bench_dense("dense 784->128 (MLP)", B, 784, 128, &rng);
    for (int a = 3; a < argc; a++)
        bench_model(argv[a], B, &rng);
    return 0;
}
