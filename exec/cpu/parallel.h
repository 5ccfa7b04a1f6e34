/* Threading of the CPU kernels.
 *
 * One pool of dtk_num_threads() threads (threads.c: the caller plus persistent workers) runs
 * the kernels' parallel work: a convolution gives each thread whole blocks of samples with
 * its own scratch, a large GEMM is cut into one slice per thread (dtk_sgemm), the large
 * elementwise loops (relu, max pooling, dropout, Adam) into ranges. OpenBLAS runs
 * on one thread inside the tasks: two pools spinning side by side on the same cores
 * (OpenBLAS's and the kernels') slow both, the more so on a shared machine.
 *
 * The OpenMP loop macros below thread the other loops only when the library is compiled
 * with OpenMP, which configure does not enable: they then expand to nothing.
 * Every parallel loop writes disjoint outputs, so results do not depend on the thread count,
 * except the weight and bias gradients of a threaded convolution (layers.h). */
#ifndef DTK_PARALLEL_H
#define DTK_PARALLEL_H

#include <stdbool.h>

#include "layers.h"

#ifdef _OPENMP
#define DTK_PRAGMA_(x) _Pragma(#x)
/* The next for loop runs in parallel when cond holds (enough work to pay for the threads). */
#define DTK_PARALLEL_FOR(cond)                                                                  \
    DTK_PRAGMA_(omp parallel for schedule(static) num_threads(dtk_num_threads()) if (cond))
#else
#define DTK_PARALLEL_FOR(cond)
#endif

/* Elements below which an elementwise loop stays on one thread, and the chunk it is cut in. */
#define DTK_PAR_MIN 32768L
#define DTK_PAR_CHUNK 8192L

/* A task of a parallel run: index i of [0, n), run by thread t in [0, threads). */
typedef void (*dtk_task_fn)(void *ctx, long i, int t);

/* Runs fn(ctx, i, t) for every i in [0, n) on at most `threads` threads of the pool (the
 * caller is thread 0 and takes tasks too; each task goes to whichever thread is free) and
 * returns when all are done. Called from inside a task, or with threads < 2, it runs the
 * tasks in order on the calling thread (t = 0). */
void dtk_parallel(long n, int threads, dtk_task_fn fn, void *ctx);
/* Whether the calling thread is running a task of the pool. */
bool dtk_in_task(void);

/* fn(ctx, lo, hi) over [0, n) cut into one range per thread (ranges start at multiples of
 * 16, so that blocks of 8 stay aligned to the whole); one call fn(ctx, 0, n) when n is below
 * min or there is one thread. For elementwise loops (min: DTK_PAR_MIN). */
typedef void (*dtk_range_fn)(void *ctx, long lo, long hi);
void dtk_parallel_range(long n, long min, dtk_range_fn fn, void *ctx);

/* C = alpha op(A) op(B) + beta C, row major (cblas_sgemm's arguments, transposes as flags).
 * With several threads and enough work, the larger of M and N is cut into one slice per
 * thread, each a one-thread cblas_sgemm (every element of C is the same sum over K as in one
 * call); inside a task, or small, it is one call. */
void dtk_sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);

#endif
