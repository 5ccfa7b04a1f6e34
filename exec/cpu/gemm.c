/* dtk_sgemm: a GEMM cut over the kernels' threads (parallel.h). */
#include <cblas.h>

#include "parallel.h"

/* Multiply-adds (M N K) up to which a GEMM stays one call. It is OpenBLAS's own threshold
 * (interface/gemm.c: 65536 x GEMM_MULTITHREAD_THRESHOLD = 4), so that OpenBLAS never starts
 * its threads for a GEMM that reaches it whole; waking a thread costs a few microseconds,
 * what one thread computes of 0.5 MFLOP. */
#define GEMM_PAR_MNK 262144.0
/* Slices are multiples of this many rows or columns (OpenBLAS' register blocks). */
#define GEMM_ALIGN 16

struct gemm_job {
    enum CBLAS_TRANSPOSE opa, opb;
    bool ta, tb, by_rows;
    int M, N, K, part;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int lda, ldb, ldc;
};

/* Slice s: rows [lo, lo + n) of op(A) and C, or columns of op(B) and C. */
static void gemm_slice(void *ctx, long s, int t)
{
    const struct gemm_job *g = ctx;
    (void)t;
    int L = g->by_rows ? g->M : g->N, lo = (int)s * g->part;
    int n = L - lo < g->part ? L - lo : g->part;
    if (g->by_rows)
        cblas_sgemm(CblasRowMajor, g->opa, g->opb, n, g->N, g->K, g->alpha,
                    g->ta ? g->A + lo : g->A + (long)lo * g->lda, g->lda, g->B, g->ldb, g->beta,
                    g->C + (long)lo * g->ldc, g->ldc);
    else
        cblas_sgemm(CblasRowMajor, g->opa, g->opb, g->M, n, g->K, g->alpha, g->A, g->lda,
                    g->tb ? g->B + (long)lo * g->ldb : g->B + lo, g->ldb, g->beta, g->C + lo,
                    g->ldc);
}

void dtk_sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc)
{
    struct gemm_job g = {ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, ta, tb,
                         M > N, M, N, K, 0, alpha, beta, A, B, C, lda, ldb, ldc};
    int T = dtk_num_threads();
    int L = g.by_rows ? M : N; /* the larger dimension is sliced */
    if (T < 2 || dtk_in_task() || (double)M * N * K <= GEMM_PAR_MNK || L < 2 * GEMM_ALIGN) {
        cblas_sgemm(CblasRowMajor, g.opa, g.opb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    g.part = ((L + T - 1) / T + GEMM_ALIGN - 1) / GEMM_ALIGN * GEMM_ALIGN;
    int slices = (L + g.part - 1) / g.part;
    dtk_parallel(slices, T, gemm_slice, &g);
}
