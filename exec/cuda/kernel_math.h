/* The per-element arithmetic of the CUDA kernels, written once for both compilers: nvcc builds
 * it into the kernels (__host__ __device__), gcc into tests/test_cuda_math.c, which checks it
 * against the CPU kernels on every build, GPU or not. A kernel is then a grid-stride loop around
 * one of these functions plus cuBLAS calls, so the index arithmetic that a machine without a
 * GPU cannot run through the kernels is still tested. They are defined in this header (an
 * exception to the project's habit) because device code can only inline what it sees.
 *
 * Layouts follow exec/cpu: NCHW, conv geometry in struct dtk_conv_dims, the unfolded matrix
 * "col" of a chunk of nb samples is (K, N) row-major with K = C kh kw (row (c kh + i) kw + j)
 * and N = nb P, P = OH OW, column bi P + p for sample bi, output position p. */
#ifndef DTCUDA_KERNEL_MATH_H
#define DTCUDA_KERNEL_MATH_H

#include <math.h>
#include <stdbool.h>

#include "../cpu/layers.h"
#include "../cpu/optim.h"

#ifdef __CUDACC__
#define DTCUDA_HD static __host__ __device__ inline
#else
#define DTCUDA_HD static inline
#endif

/* Columns of the unfolded matrix per GEMM: wide enough to fill an A100/H100 (a 128x128 tile
 * grid of 16k columns and tens of rows), small enough that col + dcol + dtmp stay below a few
 * hundred MB for the models in models/. */
#define DTCUDA_CONV_TARGET_N 16384

/* Samples per chunk (>= 1, <= B) so that nb P is about DTCUDA_CONV_TARGET_N. */
DTCUDA_HD int dtcuda_conv_chunk(const struct dtk_conv_dims *d)
{
    long P = (long)d->OH * d->OW;
    long nb = (DTCUDA_CONV_TARGET_N + P - 1) / P;
    if (nb > d->B)
        nb = d->B;
    return nb < 1 ? 1 : (int)nb;
}

/* Scratch of conv2d forward and backward: col + dcol (K x N each) + dtmp (F x N). */
DTCUDA_HD long dtcuda_conv_workspace(const struct dtk_conv_dims *d)
{
    long K = (long)d->C * d->kh * d->kw;
    long N = (long)dtcuda_conv_chunk(d) * d->OH * d->OW;
    return 2 * K * N + (long)d->F * N;
}

/* Element idx (row k = idx / N, column idx % N) of the unfolding of samples [b0, b0 + nb). */
DTCUDA_HD float dtcuda_im2col_at(const float *inp, const struct dtk_conv_dims *d, int b0, int nb,
                                 long idx)
{
    const long P = (long)d->OH * d->OW, N = nb * P;
    const long k = idx / N, q = idx % N;
    const long bi = q / P, p = q % P;
    const int oh = (int)(p / d->OW), ow = (int)(p % d->OW);
    const int j = (int)(k % d->kw), i = (int)(k / d->kw % d->kh), c = (int)(k / d->kw / d->kh);
    const int ih = oh * d->sh - d->pad_t + i, iw = ow * d->sw - d->pad_l + j;
    if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W)
        return 0.0f;
    return inp[((b0 + bi) * d->C + c) * (long)d->H * d->W + (long)ih * d->W + iw];
}

/* The adjoint, gathered: the sum of every element of dcol (K, nb P) that im2col would have
 * read from input element idx of the chunk (sample idx / (C H W), then c, ih, iw). Gathering
 * instead of scattering needs no atomics and is deterministic. */
DTCUDA_HD float dtcuda_col2im_at(const float *dcol, const struct dtk_conv_dims *d, int nb,
                                 long idx)
{
    const long HW = (long)d->H * d->W, img = d->C * HW;
    const long P = (long)d->OH * d->OW, N = nb * P;
    const long bi = idx / img, r = idx % img;
    const int c = (int)(r / HW), ih = (int)(r % HW / d->W), iw = (int)(r % d->W);
    float acc = 0.0f;
    for (int i = 0; i < d->kh; i++) {
        int t = ih + d->pad_t - i; /* = oh sh */
        if (t < 0 || t % d->sh != 0 || t / d->sh >= d->OH)
            continue;
        for (int j = 0; j < d->kw; j++) {
            int u = iw + d->pad_l - j; /* = ow sw */
            if (u < 0 || u % d->sw != 0 || u / d->sw >= d->OW)
                continue;
            long k = ((long)c * d->kh + i) * d->kw + j;
            acc += dcol[k * N + bi * P + (long)(t / d->sh) * d->OW + u / d->sw];
        }
    }
    return acc;
}

/* Where element idx of a chunk's NCHW output (bi, f, p) sits in the GEMM result (F, nb P). */
DTCUDA_HD long dtcuda_fold_index(const struct dtk_conv_dims *d, int nb, long idx)
{
    const long P = (long)d->OH * d->OW, FP = (long)d->F * P;
    const long bi = idx / FP, f = idx % FP / P, p = idx % P;
    return f * nb * P + bi * P + p;
}

/* Max pooling of output element idx of (B, C, OH, OW): the CPU's scan order, so the same
 * first maximum wins; *arg gets ih W + iw, or -1 (and the result 0) for an empty window. */
DTCUDA_HD float dtcuda_maxpool_at(int *arg, const float *inp, const struct dtk_conv_dims *d,
                                  long idx)
{
    const long P = (long)d->OH * d->OW, bc = idx / P, p = idx % P;
    const float *x = inp + bc * d->H * (long)d->W;
    const int h0 = (int)(p / d->OW) * d->sh - d->pad_t, w0 = (int)(p % d->OW) * d->sw - d->pad_l;
    float best = 0.0f;
    int a = -1;
    for (int i = h0 < 0 ? 0 : h0; i < h0 + d->kh && i < d->H; i++)
        for (int j = w0 < 0 ? 0 : w0; j < w0 + d->kw && j < d->W; j++) {
            float v = x[i * d->W + j];
            if (a < 0 || v > best) {
                best = v;
                a = i * d->W + j;
            }
        }
    *arg = a;
    return a < 0 ? 0.0f : best;
}

/* Max pooling's gradient at input element idx of (B, C, H, W), gathered: acc (the current
 * dinp value) plus dout of every window whose argmax is this element, in increasing output
 * order, which is the order in which the CPU scatters them (so the sums are bitwise equal). */
DTCUDA_HD float dtcuda_maxpool_grad_at(float acc, const float *dout, const int *argmax,
                                       const struct dtk_conv_dims *d, long idx)
{
    const long HW = (long)d->H * d->W, P = (long)d->OH * d->OW;
    const long bc = idx / HW;
    const int s = (int)(idx % HW), ih = s / d->W, iw = s % d->W;
    /* windows oh with oh sh - pad_t <= ih < oh sh - pad_t + kh */
    const int lo_h = ih + d->pad_t - d->kh + 1, lo_w = iw + d->pad_l - d->kw + 1;
    const int oh0 = lo_h <= 0 ? 0 : (lo_h + d->sh - 1) / d->sh;
    const int ow0 = lo_w <= 0 ? 0 : (lo_w + d->sw - 1) / d->sw;
    int oh1 = (ih + d->pad_t) / d->sh, ow1 = (iw + d->pad_l) / d->sw;
    if (oh1 > d->OH - 1)
        oh1 = d->OH - 1;
    if (ow1 > d->OW - 1)
        ow1 = d->OW - 1;
    const float *g = dout + bc * P;
    const int *a = argmax + bc * P;
    for (int oh = oh0; oh <= oh1; oh++)
        for (int ow = ow0; ow <= ow1; ow++) {
            long p = (long)oh * d->OW + ow;
            if (a[p] == s)
                acc += g[p];
        }
    return acc;
}

/* Adam: the step's scalars, computed once on the host in double as exec/cpu/optim.c does. */
struct dtcuda_adam_scalars {
    bool keras;
    float b1, b2, eps;
    float alpha; /* Keras: lr sqrt(1 - b2^t) / (1 - b1^t); PyTorch: lr / (1 - b1^t) */
    float rs2;   /* PyTorch: 1 / sqrt(1 - b2^t); unused for Keras */
};

static inline struct dtcuda_adam_scalars dtcuda_adam_prepare(const struct dtk_adam *cfg, long t)
{
    const double bc1 = 1.0 - pow(cfg->beta1, (double)t);
    const double bc2 = 1.0 - pow(cfg->beta2, (double)t);
    struct dtcuda_adam_scalars s;
    s.keras = cfg->flavor == DTK_ADAM_KERAS;
    s.b1 = cfg->beta1;
    s.b2 = cfg->beta2;
    s.eps = cfg->eps;
    s.alpha = s.keras ? (float)(cfg->lr * sqrt(bc2) / bc1) : (float)(cfg->lr / bc1);
    s.rs2 = (float)(1.0 / sqrt(bc2));
    return s;
}

/* One element's update, the formulas of dtk_adam_step. */
DTCUDA_HD void dtcuda_adam_at(float *p, float *m, float *v, float g,
                              const struct dtcuda_adam_scalars *s)
{
    if (s->keras) {
        *m += (g - *m) * (1.0f - s->b1);
        *v += (g * g - *v) * (1.0f - s->b2);
        *p -= s->alpha * *m / (sqrtf(*v) + s->eps);
    } else {
        *m = s->b1 * *m + (1.0f - s->b1) * g;
        *v = s->b2 * *v + (1.0f - s->b2) * g * g;
        *p -= s->alpha * *m / (sqrtf(*v) * s->rs2 + s->eps);
    }
}

/* SGD: one element's update, the formulas of dtk_sgd_step (torch.optim.SGD); buf may be NULL
 * when momentum is 0. */
DTCUDA_HD void dtcuda_sgd_at(float *p, float *buf, float g, long t, const struct dtk_sgd *c)
{
    g += c->weight_decay * *p;
    if (c->momentum != 0.0f) {
        *buf = t <= 1 ? g : c->momentum * *buf + (1.0f - c->dampening) * g;
        g = c->nesterov ? g + c->momentum * *buf : *buf;
    }
    *p -= c->lr * g;
}

/* A row-major product C (M x N) = op(A) op(B), as cblas_sgemm(CblasRowMajor, ...) takes it,
 * restated for a column-major BLAS (cuBLAS): a row-major matrix is its transpose in column
 * major, so C^T = op(B)^T op(A)^T, i.e. swap the operands, their transposes and M with N.
 * The .cu call sites then read exactly like the CPU's cblas calls. */
struct dtcuda_gemm_cm {
    bool ta, tb; /* transpose the first / second column-major operand */
    int m, n, k;
    const float *a;
    int lda;
    const float *b;
    int ldb;
    int ldc;
};

DTCUDA_HD struct dtcuda_gemm_cm dtcuda_gemm_rm(bool ta, bool tb, int M, int N, int K,
                                               const float *A, int lda, const float *B, int ldb,
                                               int ldc)
{
    struct dtcuda_gemm_cm g;
    g.ta = tb;
    g.tb = ta;
    g.m = N;
    g.n = M;
    g.k = K;
    g.a = B;
    g.lda = ldb;
    g.b = A;
    g.ldb = lda;
    g.ldc = ldc;
    return g;
}

#endif
