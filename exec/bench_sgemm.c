/* bench_sgemm: the machine's single-thread sgemm rate, the yardstick of `make bench`'s GFLOP/s
 * column: C = A B on square n x n float matrices through cblas_sgemm with OpenBLAS pinned to
 * one thread, the fastest of the calls made in the time given (after one warm-up call), which
 * is stable on a shared machine where a mean is not. A multiply-add counts as 2 FLOP.
 * Usage: bench_sgemm [n (default 1024)] [seconds (default 1)]
 * Prints: "sgemm n=1024 threads=1 best_s=... gflops=..." */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    char *end = NULL;
    long n = argc > 1 ? strtol(argv[1], &end, 10) : 1024;
    if (argc > 1 && (*end || n < 16 || n > 8192)) {
        fprintf(stderr, "bench_sgemm: n must be an integer in [16, 8192]\n");
        return 2;
    }
    double secs = argc > 2 ? strtod(argv[2], &end) : 1.0;
    if (argc > 2 && (*end || !(secs > 0 && secs <= 60))) {
        fprintf(stderr, "bench_sgemm: seconds must be in (0, 60]\n");
        return 2;
    }
    openblas_set_num_threads(1);
    float *a = malloc((size_t)(n * n) * sizeof *a), *b = malloc((size_t)(n * n) * sizeof *b);
    float *c = malloc((size_t)(n * n) * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_sgemm: out of memory\n");
        return 1;
    }
    for (long i = 0; i < n * n; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.02f;
        c[i] = 0.0f;
    }
    int ni = (int)n;
    double best = 1e30, start = now_s(), t;
    int calls = 0;
    do {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a, ni, b, ni,
                    0.0f, c, ni);
        t = now_s();
        if (calls++ > 0 && t - t0 < best) /* the first call is the warm-up */
            best = t - t0;
    } while (t - start < secs || calls < 3);
    printf("sgemm n=%ld threads=1 best_s=%.6f gflops=%.1f\n", n, best,
           2.0 * (double)n * (double)n * (double)n / best / 1e9);
    free(a);
    free(b);
    free(c);
    return 0;
}
