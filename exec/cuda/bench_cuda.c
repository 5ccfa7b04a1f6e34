/* bench_cuda: time per call and GFLOP/s of the CUDA conv and dense kernels on the shapes that
 * exec/bench_kernels times on the CPU (the seed-002 CNN's layers), so the two tables compare.
 * FLOPs count a multiply-add as 2; backward counts twice the forward (data and weights).
 * Each figure is the fastest of repeated runs of `reps` calls, each run ended by a stream
 * sync (a GPU call only queues work). Without a GPU it says so and exits 0.
 * Usage: bench_cuda [batch] [min seconds per figure] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_kernels.h"
#include "layers.h"
#include "rng.h"

static double min_s = 0.5;
static struct dtcuda *cx;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check(int status, const struct dt_error *err)
{
    if (status != DT_OK) {
        dt_error_print("bench_cuda", err);
        exit(1);
    }
}

/* A device buffer of n random floats in [-1, 1). */
static float *dev_rand(long n, struct dtk_rng *rng)
{
    struct dt_error err;
    float *h = malloc((size_t)n * sizeof *h), *d;
    if (!h) {
        fprintf(stderr, "bench_cuda: out of memory\n");
        exit(1);
    }
    for (long i = 0; i < n; i++)
        h[i] = dtk_rng_uniform_range(rng, -1.0f, 1.0f);
    check(dtcuda_malloc((void **)&d, (size_t)n * sizeof *h, &err), &err);
    check(dtcuda_to_device(cx, d, h, (size_t)n * sizeof *h, &err), &err);
    free(h);
    return d;
}

/* Seconds per call of fn(ctx): batches of 10 queued calls then a sync, fastest batch. */
static double time_it(int (*fn)(void *, struct dt_error *), void *ctx)
{
    struct dt_error err;
    check(fn(ctx, &err), &err);
    check(dtcuda_sync(cx, &err), &err);
    double best = 1e30, start = now_s(), t;
    do {
        double t0 = now_s();
        for (int i = 0; i < 10; i++)
            check(fn(ctx, &err), &err);
        check(dtcuda_sync(cx, &err), &err);
        t = now_s();
        if ((t - t0) / 10 < best)
            best = (t - t0) / 10;
    } while (t - start < min_s);
    return best;
}

struct conv_ctx {
    struct dtk_conv_dims d;
    float *x, *dx, *w, *dw, *b, *db, *y, *work;
};

static int run_conv_fwd(void *p, struct dt_error *err)
{
    struct conv_ctx *c = p;
    return dtcuda_conv2d_forward(cx, c->y, c->work, c->x, c->w, c->b, &c->d, err);
}

static int run_conv_bwd(void *p, struct dt_error *err)
{
    struct conv_ctx *c = p;
    return dtcuda_conv2d_backward(cx, c->dx, c->dw, c->db, c->work, c->y, c->x, c->w, &c->d, err);
}

static void bench_conv(const char *name, int B, int C, int H, int W, int F, int k,
                       struct dtk_rng *rng)
{
    struct conv_ctx c = {.d = {.B = B, .C = C, .H = H, .W = W, .F = F, .kh = k, .kw = k,
                               .sh = 1, .sw = 1, .groups = 1}};
    dtk_conv_dims_finish(&c.d);
    long in = (long)B * C * H * W, out = (long)B * F * c.d.OH * c.d.OW, nw = (long)F * C * k * k;
    c.x = dev_rand(in, rng);
    c.dx = dev_rand(in, rng);
    c.w = dev_rand(nw, rng);
    c.dw = dev_rand(nw, rng);
    c.b = dev_rand(F, rng);
    c.db = dev_rand(F, rng);
    c.y = dev_rand(out, rng);
    c.work = dev_rand(dtcuda_conv2d_workspace_floats(&c.d), rng);
    double flops = 2.0 * F * C * k * k * (double)B * c.d.OH * c.d.OW;
    double tf = time_it(run_conv_fwd, &c), tb = time_it(run_conv_bwd, &c);
    printf("%-28s fwd %7.3f ms %8.1f GFLOP/s   bwd %7.3f ms %8.1f GFLOP/s\n", name, tf * 1e3,
           flops / tf / 1e9, tb * 1e3, 2 * flops / tb / 1e9);
    dtcuda_free(c.x), dtcuda_free(c.dx), dtcuda_free(c.w), dtcuda_free(c.dw);
    dtcuda_free(c.b), dtcuda_free(c.db), dtcuda_free(c.y), dtcuda_free(c.work);
}

struct dense_ctx {
    int N, in, out;
    float *x, *w, *b, *y, *dx, *dw, *db;
};

static int run_dense_fwd(void *p, struct dt_error *err)
{
    struct dense_ctx *c = p;
    return dtcuda_dense_forward(cx, c->y, c->x, c->w, c->b, c->N, c->in, c->out, err);
}

static int run_dense_bwd(void *p, struct dt_error *err)
{
    struct dense_ctx *c = p;
    return dtcuda_dense_backward(cx, c->dx, c->dw, c->db, c->y, c->x, c->w, c->N, c->in, c->out,
                                 err);
}

static void bench_dense(const char *name, int N, int in, int out, struct dtk_rng *rng)
{
    struct dense_ctx c = {N, in, out, dev_rand((long)N * in, rng), dev_rand((long)in * out, rng),
                          dev_rand(out, rng), dev_rand((long)N * out, rng),
                          dev_rand((long)N * in, rng), dev_rand((long)in * out, rng),
                          dev_rand(out, rng)};
    double flops = 2.0 * N * in * (double)out;
    double tf = time_it(run_dense_fwd, &c), tb = time_it(run_dense_bwd, &c);
    printf("%-28s fwd %7.3f ms %8.1f GFLOP/s   bwd %7.3f ms %8.1f GFLOP/s\n", name, tf * 1e3,
           flops / tf / 1e9, tb * 1e3, 2 * flops / tb / 1e9);
    dtcuda_free(c.x), dtcuda_free(c.w), dtcuda_free(c.b), dtcuda_free(c.y);
    dtcuda_free(c.dx), dtcuda_free(c.dw), dtcuda_free(c.db);
}

int main(int argc, char **argv)
{
    int B = argc > 1 ? atoi(argv[1]) : 128;
    if (argc > 2)
        min_s = atof(argv[2]);
    if (B < 1 || !(min_s > 0)) {
        fprintf(stderr, "usage: bench_cuda [batch >= 1] [min seconds > 0]\n");
        return 2;
    }
    if (dtcuda_device_count() == 0) {
        printf("bench_cuda: no GPU (%s): nothing to time\n",
               dtcuda_built() ? "no device or driver" : "no CUDA backend built");
        return 0;
    }
    struct dt_error err;
    char desc[256];
    check(dtcuda_create(&cx, 0, &err), &err);
    check(dtcuda_describe(cx, desc, sizeof desc, &err), &err);
    printf("bench_cuda: batch %d, %s\n", B, desc);
    struct dtk_rng rng;
    dtk_rng_seed(&rng, 42);
    bench_conv("conv 1->32 3x3 @28x28", B, 1, 28, 28, 32, 3, &rng);
    bench_conv("conv 32->128 3x3 @13x13", B, 32, 13, 13, 128, 3, &rng);
    bench_conv("conv 128->256 3x3 @5x5", B, 128, 5, 5, 256, 3, &rng);
    bench_conv("conv 64->64 3x3 @32x32", B, 64, 32, 32, 64, 3, &rng);
    bench_dense("dense 256->1000", B, 256, 1000, &rng);
    bench_dense("dense 1000->100", B, 1000, 100, &rng);
    bench_dense("dense 784->128 (MLP)", B, 784, 128, &rng);
    bench_dense("dense 4096->4096", B, 4096, 4096, &rng);
    dtcuda_destroy(cx);
    return 0;
}
