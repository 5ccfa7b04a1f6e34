/* 2-D convolution and its transpose on im2col + GEMM (OpenBLAS through dtk_sgemm).
 *
 * Forward: a chunk of nb samples is unfolded into col (K, nb*P), K = C*kh*kw and P = OH*OW,
 * then each group does one GEMM  tmp_g (F/g, nb*P) = W_g (F/g, K/g) col_g (K/g, nb*P).
 * Folding samples into N matters for the small late feature maps of a CNN (P = 121 or 9 in the
 * seed-002 model), where a per-sample GEMM would be thin and slow; the chunk is sized so that
 * nb*P is about DTK_CONV_FOLD_N columns. When one sample alone is wide enough (nb = 1) the
 * GEMM writes straight into the NCHW output, one band of output rows at a time (leading
 * dimension P), so a large image never needs its whole unfolding. Backward reuses the same
 * blocks:
 * dW_g += dtmp_g col_g^T and dcol_g = W_g^T dtmp_g, folded back by col2im. */
#include "layers.h"

#include <string.h>

#include "im2col.h"
#include "parallel.h"

static void copy_floats(float *restrict dst, const float *restrict src, long n)
{
    long i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            dst[i + k] = src[i + k];
    for (; i < n; i++)
        dst[i] = src[i];
}

/* Columns per GEMM of one sample's band of output rows: wide enough to amortise OpenBLAS'
 * packing, small enough that the unfolded block stays mostly in cache. */
#ifndef DTK_CONV_TARGET_N
#define DTK_CONV_TARGET_N 2048
#endif
/* Columns per GEMM when small samples are folded together. The unfolded block (K x N floats)
 * is written by im2col and read back by the GEMM, so it should stay in L2: with K = 250 (the
 * 21.8K CNN's second convolution) 512 columns took 6.4 ms per step of batch 128 where 2048 took
 * 8.5 ms (one thread); the seed-002 CNN's layers do not care (within 2%). */
#ifndef DTK_CONV_FOLD_N
#define DTK_CONV_FOLD_N 512
#endif
/* Samples are folded together only below this many output pixels: above it one sample makes
 * a wide enough GEMM, which then writes the NCHW output directly (no reordering copy). */
#ifndef DTK_CONV_FOLD_BELOW
#define DTK_CONV_FOLD_BELOW 512
#endif

/* o[p] = (src ? src[p] : o[p]) + bias over n floats, blocks of 8 (vectorized at -O2). */
static void bias_row(float *restrict o, const float *restrict src, float bias, long n)
{
    long p = 0;
    if (src) {
        for (; p + 8 <= n; p += 8)
            for (int k = 0; k < 8; k++)
                o[p + k] = src[p + k] + bias;
        for (; p < n; p++)
            o[p] = src[p] + bias;
    } else {
        for (; p + 8 <= n; p += 8)
            for (int k = 0; k < 8; k++)
                o[p + k] += bias;
        for (; p < n; p++)
            o[p] += bias;
    }
}

/* Sum of n floats with 8 partial sums (vectorized at -O2; the order differs from a plain loop
 * only by float rounding). If dst is not NULL the values are also copied there. */
static float sum_row(float *restrict dst, const float *restrict src, long n)
{
    float acc[8] = {0};
    long p = 0;
    for (; p + 8 <= n; p += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += src[p + k];
    float s = 0.0f;
    for (; p < n; p++)
        s += src[p];
    if (dst)
        copy_floats(dst, src, n);
    return s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

bool dtk_conv_dims_finish(struct dtk_conv_dims *d)
{
    if (d->B <= 0 || d->C <= 0 || d->H <= 0 || d->W <= 0 || d->kh <= 0 || d->kw <= 0 ||
        d->sh <= 0 || d->sw <= 0 || d->pad_t < 0 || d->pad_l < 0 || d->pad_b < 0 || d->pad_r < 0)
        return false;
    int eh = d->H + d->pad_t + d->pad_b - d->kh, ew = d->W + d->pad_l + d->pad_r - d->kw;
    if (eh < 0 || ew < 0)
        return false;
    d->OH = eh / d->sh + 1;
    d->OW = ew / d->sw + 1;
    return true;
}

bool dtk_convt_dims_finish(struct dtk_conv_dims *d)
{
    if (d->B <= 0 || d->C <= 0 || d->H <= 0 || d->W <= 0 || d->kh <= 0 || d->kw <= 0 ||
        d->sh <= 0 || d->sw <= 0 || d->pad_t < 0 || d->pad_l < 0 || d->pad_b < 0 || d->pad_r < 0)
        return false;
    d->OH = (d->H - 1) * d->sh + d->kh - d->pad_t - d->pad_b;
    d->OW = (d->W - 1) * d->sw + d->kw - d->pad_l - d->pad_r;
    return d->OH > 0 && d->OW > 0;
}

/* Work is cut into blocks of output columns: nb whole samples side by side (about
 * DTK_CONV_FOLD_N columns) when a sample has fewer than DTK_CONV_FOLD_BELOW output pixels, else
 * bands of `rows` output rows of one sample (about DTK_CONV_TARGET_N columns, so that the
 * unfolded columns of a large image, U-Net's 256x256 say, never need K x H x W floats at
 * once). A block of samples is one task for a thread (all bands of a sample are one task). */
struct conv_block {
    int nb;       /* samples in the block */
    int rows;     /* output rows per sample in the block (OH when nb > 1) */
};

/* Blocking of B samples for T threads. With T > 1 the samples are dealt into a multiple of T
 * blocks of near-equal size (3 blocks of 57, 57 and 14 samples would leave a thread idle);
 * nb never exceeds the one-thread blocking, which sizes the workspace. */
static struct conv_block conv_blocking(const struct dtk_conv_dims *d, int B, int T)
{
    long P = (long)d->OH * d->OW;
    struct conv_block k = {1, d->OH};
    if (P >= DTK_CONV_FOLD_BELOW) {
        long rows = DTK_CONV_TARGET_N / d->OW;
        k.rows = rows < 1 ? 1 : rows > d->OH ? d->OH : (int)rows;
    } else {
        long nb = (DTK_CONV_FOLD_N + P - 1) / P;
        nb = nb > B ? B : nb < 1 ? 1 : nb;
        if (T > 1) {
            long blocks = (B + nb - 1) / nb;
            blocks = (blocks + T - 1) / T * T;
            nb = (B + blocks - 1) / blocks;
        }
        k.nb = (int)nb;
    }
    return k;
}

static bool conv_is_pointwise(const struct dtk_conv_dims *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->pad_t == 0 &&
           d->pad_l == 0 && d->pad_b == 0 && d->pad_r == 0;
}

/* Threads that get a workspace slot, and the threads a call uses. */
static int conv_slots(const struct dtk_conv_dims *d)
{
    return d->threads > 1 ? d->threads : 1;
}

static int conv_threads(const struct dtk_conv_dims *d)
{
    int T = dtk_num_threads(), S = conv_slots(d);
    return T < S ? T : S;
}

/* Floats of one thread's scratch for B samples: col + dcol (K x N each) + dtmp (F x N) for
 * backward (forward uses col + tmp). */
static long conv_slot_floats(const struct dtk_conv_dims *d, int B)
{
    struct conv_block k = conv_blocking(d, B, 1);
    long K = (long)d->C * d->kh * d->kw;
    long N = (long)k.nb * k.rows * d->OW;
    return 2 * K * N + (long)d->F * N;
}

/* Floats of one thread's weight and bias gradient sums (threaded backward). */
static long conv_grad_floats(const struct dtk_conv_dims *d)
{
    const int G = d->groups > 0 ? d->groups : 1;
    return (long)d->F * (d->C / G) * d->kh * d->kw + d->F;
}

long dtk_conv2d_workspace_floats(const struct dtk_conv_dims *d)
{
    int S = conv_slots(d);
    return S * conv_slot_floats(d, d->B) + (S > 1 ? S * conv_grad_floats(d) : 0);
}

/* Unfolds output rows [oh0, oh0 + rows) of samples [b0, b0 + nb) into col (K, nb*rows*OW):
 * the band is the convolution with rows output rows and the top padding moved by oh0*sh
 * (negative inside the image, which im2col's bounds test handles). */
static void conv_unfold(float *col, const float *inp, const struct dtk_conv_dims *d, int b0,
                        int nb, int oh0, int rows)
{
    long N = nb * (long)rows * d->OW, img = (long)d->C * d->H * d->W;
    dtk_im2col_batch(col, N, inp + b0 * img, img, nb, d->C, d->H, d->W, d->kh, d->kw, d->sh,
                     d->sw, d->pad_t - oh0 * d->sh, d->pad_l, rows, d->OW);
}

static void conv_fold(float *dinp, const float *dcol, const struct dtk_conv_dims *d, int b0,
                      int nb, int oh0, int rows)
{
    long N = nb * (long)rows * d->OW, img = (long)d->C * d->H * d->W;
    dtk_col2im_batch(dinp + b0 * img, img, dcol, N, nb, d->C, d->H, d->W, d->kh, d->kw, d->sh,
                     d->sw, d->pad_t - oh0 * d->sh, d->pad_l, rows, d->OW);
}

/* Forward of samples [b0, b0 + nb) (one block) with the scratch at work. */
static void conv_forward_block(float *out, float *work, const float *inp, const float *weight,
                               const float *bias, const struct dtk_conv_dims *d,
                               struct conv_block k, int b0, int nb)
{
    const int G = d->groups > 0 ? d->groups : 1;
    const long P = (long)d->OH * d->OW, img = (long)d->C * d->H * d->W;
    const long K = (long)d->C * d->kh * d->kw;
    const int Fg = d->F / G, Kg = (int)(K / G);
    const bool pointwise = conv_is_pointwise(d);
    float *col = work;
    float *tmp = work + K * k.nb * k.rows * d->OW;
    for (int oh0 = 0; oh0 < d->OH; oh0 += k.rows) {
        int rows = d->OH - oh0 < k.rows ? d->OH - oh0 : k.rows;
        long n = (long)rows * d->OW, N = nb * n;
        /* B operand (K, N) with leading dimension ldb; C operand likewise */
        const float *src = col;
        long ldb = N, ldc = N;
        if (nb == 1 && pointwise) {
            src = inp + b0 * img + oh0 * (long)d->OW; /* 1x1: the image is its unfolding */
            ldb = P;
        } else {
            conv_unfold(col, inp, d, b0, nb, oh0, rows);
        }
        float *dst = tmp;
        if (nb == 1) {
            dst = out + b0 * (long)d->F * P + oh0 * (long)d->OW;
            ldc = P;
        }
        for (int g = 0; g < G; g++)
            dtk_sgemm(false, false, Fg, (int)N, Kg, 1.0f, weight + (long)g * Fg * Kg, Kg,
                      src + (long)g * Kg * ldb, (int)ldb, 0.0f, dst + (long)g * Fg * ldc,
                      (int)ldc);
        if (nb > 1) { /* (F, nb, P) -> (nb, F, P), adding the bias on the way */
            DTK_PARALLEL_FOR(N * d->F >= DTK_PAR_MIN)
            for (long q = 0; q < (long)nb * d->F; q++) {
                long bi = q / d->F, f = q % d->F;
                bias_row(out + ((b0 + bi) * d->F + f) * P, tmp + f * N + bi * P,
                         bias ? bias[f] : 0.0f, P);
            }
        }
    }
    if (bias && nb == 1) {
        DTK_PARALLEL_FOR(P * d->F >= DTK_PAR_MIN)
        for (int f = 0; f < d->F; f++)
            bias_row(out + (b0 * (long)d->F + f) * P, NULL, bias[f], P);
    }
}

/* One call's blocks, for the pool's tasks: block i is samples [i nb, i nb + nb). */
struct conv_job {
    const struct dtk_conv_dims *d;
    struct conv_block k;
    long slot;              /* floats of scratch per thread */
    float *out, *work;
    const float *inp, *weight, *bias;
    float *dinp, *dweight, *dbias, *sums; /* backward; sums: per-task gradient sums */
    const float *dout;
    int tasks;              /* backward: tasks of the strided split (one per thread) */
};

static void conv_forward_task(void *ctx, long i, int t)
{
    const struct conv_job *j = ctx;
    int b0 = (int)i * j->k.nb, nb = j->d->B - b0 < j->k.nb ? j->d->B - b0 : j->k.nb;
    conv_forward_block(j->out, j->work + t * j->slot, j->inp, j->weight, j->bias, j->d, j->k,
                       b0, nb);
}

/* inp (B, C, H, W), weight (F, C/groups, kh, kw), bias (F), out (B, F, OH, OW). */
void dtk_conv2d_forward(float *out, float *work, const float *inp, const float *weight,
                        const float *bias, const struct dtk_conv_dims *d)
{
    const int T = conv_threads(d);
    struct conv_job j = {.d = d, .k = conv_blocking(d, d->B, T), .slot = conv_slot_floats(d, d->B),
                         .out = out, .work = work, .inp = inp, .weight = weight, .bias = bias};
    dtk_parallel((d->B + j.k.nb - 1) / j.k.nb, T, conv_forward_task, &j);
}

/* Backward of samples [b0, b0 + nb) (one block) with the scratch at work: dinp rows of the
 * block are written; dweight and dbias (may be NULL) are added to. */
static void conv_backward_block(float *dinp, float *dweight, float *dbias, float *work,
                                const float *dout, const float *inp, const float *weight,
                                const struct dtk_conv_dims *d, struct conv_block k, int b0,
                                int nb)
{
    const int G = d->groups > 0 ? d->groups : 1;
    const long P = (long)d->OH * d->OW, img = (long)d->C * d->H * d->W;
    const long K = (long)d->C * d->kh * d->kw;
    const int Fg = d->F / G, Kg = (int)(K / G);
    const bool pointwise = conv_is_pointwise(d);
    const long Nmax = (long)k.nb * k.rows * d->OW;
    float *col = work, *dcol = work + K * Nmax, *dtmp = dcol + K * Nmax;
    for (int oh0 = 0; oh0 < d->OH; oh0 += k.rows) {
        int rows = d->OH - oh0 < k.rows ? d->OH - oh0 : k.rows;
        long n = (long)rows * d->OW, N = nb * n;
        /* dout of the block as an (F, N) operand with leading dimension ldd */
        const float *dsrc = dtmp;
        long ldd = N;
        if (nb == 1) {
            dsrc = dout + b0 * (long)d->F * P + oh0 * (long)d->OW;
            ldd = P;
            if (dbias && oh0 == 0) {
                DTK_PARALLEL_FOR(P * d->F >= DTK_PAR_MIN)
                for (int f = 0; f < d->F; f++)
                    dbias[f] += sum_row(NULL, dout + (b0 * (long)d->F + f) * P, P);
            }
        } else { /* gather (nb, F, P) -> (F, nb, P), summing the bias gradient on the way */
            DTK_PARALLEL_FOR(N * d->F >= DTK_PAR_MIN)
            for (int f = 0; f < d->F; f++)
                for (int bi = 0; bi < nb; bi++) {
                    float s = sum_row(dtmp + f * N + bi * P,
                                      dout + ((b0 + bi) * (long)d->F + f) * P, P);
                    if (dbias)
                        dbias[f] += s;
                }
        }
        const bool direct = nb == 1 && pointwise;
        const long ldx = direct ? P : N;
        if (dweight) {
            const float *src = col;
            if (direct)
                src = inp + b0 * img + oh0 * (long)d->OW;
            else
                conv_unfold(col, inp, d, b0, nb, oh0, rows);
            /* dW_g (Fg, Kg) += dout_g (Fg, N) col_g^T (N, Kg) */
            for (int g = 0; g < G; g++)
                dtk_sgemm(false, true, Fg, Kg, (int)N, 1.0f, dsrc + (long)g * Fg * ldd,
                          (int)ldd, src + (long)g * Kg * ldx, (int)ldx, 1.0f,
                          dweight + (long)g * Fg * Kg, Kg);
        }
        if (dinp) {
            /* dcol_g (Kg, N) = W_g^T (Kg, Fg) dout_g (Fg, N); a 1x1 convolution's col2im is
             * the identity, so it accumulates straight into dinp */
            float *dst = direct ? dinp + b0 * img + oh0 * (long)d->OW : dcol;
            for (int g = 0; g < G; g++)
                dtk_sgemm(true, false, Kg, (int)N, Fg, 1.0f, weight + (long)g * Fg * Kg, Kg,
                          dsrc + (long)g * Fg * ldd, (int)ldd, direct ? 1.0f : 0.0f,
                          dst + (long)g * Kg * ldx, (int)ldx);
            if (!direct)
                conv_fold(dinp, dcol, d, b0, nb, oh0, rows);
        }
    }
}

/* Backward of block i with thread t's scratch, its weight and bias gradients added to dw, db. */
static void conv_backward_one(const struct conv_job *j, long i, int t, float *dw, float *db)
{
    const struct dtk_conv_dims *d = j->d;
    int b0 = (int)i * j->k.nb, nb = d->B - b0 < j->k.nb ? d->B - b0 : j->k.nb;
    conv_backward_block(j->dinp, dw, db, j->work + t * j->slot, j->dout, j->inp, j->weight, d,
                        j->k, b0, nb);
}

static void conv_backward_task(void *ctx, long i, int t)
{
    const struct conv_job *j = ctx;
    conv_backward_one(j, i, t, j->dweight, j->dbias);
}

/* Task s of T sums blocks s, s + T, s + 2T, ... into sums s: which blocks go into which sum
 * does not depend on which thread is free first, so the gradients are the same run after run
 * (the blocks are dealt into a multiple of T of near-equal size: the stride balances). */
static void conv_backward_strided(void *ctx, long s, int t)
{
    const struct conv_job *j = ctx;
    const long ng = conv_grad_floats(j->d), nw = ng - j->d->F, T = j->tasks;
    const long blocks = (j->d->B + j->k.nb - 1) / j->k.nb;
    float *gw = j->sums + s * ng;
    for (long i = s; i < blocks; i += T)
        conv_backward_one(j, i, t, j->dweight ? gw : NULL, j->dbias ? gw + nw : NULL);
}

void dtk_conv2d_backward(float *dinp, float *dweight, float *dbias, float *work,
                         const float *dout, const float *inp, const float *weight,
                         const struct dtk_conv_dims *d)
{
    const int T = conv_threads(d);
    struct conv_job j = {.d = d, .k = conv_blocking(d, d->B, T), .slot = conv_slot_floats(d, d->B),
                         .work = work, .inp = inp, .weight = weight, .dinp = dinp,
                         .dweight = dweight, .dbias = dbias, .dout = dout, .tasks = T};
    const long blocks = (d->B + j.k.nb - 1) / j.k.nb;
    if (T < 2 || blocks < 2) { /* one thread accumulates straight into the gradients */
        dtk_parallel(blocks, 1, conv_backward_task, &j);
        return;
    }
    /* each task sums its blocks' weight and bias gradients apart; they are added to the
     * gradients in task order */
    const long ng = conv_grad_floats(d), nw = ng - d->F;
    j.sums = work + conv_slots(d) * j.slot;
    memset(j.sums, 0, (size_t)(T * ng) * sizeof(float));
    dtk_parallel(T, T, conv_backward_strided, &j);
    for (int t = 0; t < T; t++) {
        const float *gw = j.sums + t * ng;
        if (dweight)
            for (long i = 0; i < nw; i++)
                dweight[i] += gw[i];
        if (dbias)
            for (int f = 0; f < d->F; f++)
                dbias[f] += gw[nw + f];
    }
}

/* ---- conv2d_transpose: the "image" of the unfolding is the output (F, OH, OW) and the
 * unfolded columns are the input positions (H*W). */

long dtk_convt_workspace_floats(const struct dtk_conv_dims *d)
{
    return (long)d->F * d->kh * d->kw * d->H * d->W;
}

/* inp (B, C, H, W), weight (C, F, kh, kw), bias (F), out (B, F, OH, OW). */
void dtk_convt_forward(float *out, float *work, const float *inp, const float *weight,
                       const float *bias, const struct dtk_conv_dims *d)
{
    const long S = (long)d->H * d->W, P = (long)d->OH * d->OW;
    const int K = d->F * d->kh * d->kw;
    for (int b = 0; b < d->B; b++) {
        float *o = out + (long)b * d->F * P;
        /* col (K, S) = W^T (K, C) inp_b (C, S) */
        dtk_sgemm(true, false, K, (int)S, d->C, 1.0f, weight, K,
                  inp + (long)b * d->C * S, (int)S, 0.0f, work, (int)S);
        memset(o, 0, (size_t)(d->F * P) * sizeof(float));
        dtk_col2im(o, work, S, d->F, d->OH, d->OW, d->kh, d->kw, d->sh, d->sw, d->pad_t,
                   d->pad_l, d->H, d->W);
        if (bias)
            for (int f = 0; f < d->F; f++)
                for (long p = 0; p < P; p++)
                    o[f * P + p] += bias[f];
    }
}

void dtk_convt_backward(float *dinp, float *dweight, float *dbias, float *work,
                        const float *dout, const float *inp, const float *weight,
                        const struct dtk_conv_dims *d)
{
    const long S = (long)d->H * d->W, P = (long)d->OH * d->OW;
    const int K = d->F * d->kh * d->kw;
    for (int b = 0; b < d->B; b++) {
        const float *g = dout + (long)b * d->F * P;
        if (dbias)
            for (int f = 0; f < d->F; f++) {
                float s = 0.0f;
                for (long p = 0; p < P; p++)
                    s += g[f * P + p];
                dbias[f] += s;
            }
        /* dcol (K, S) = im2col(dout_b) */
        dtk_im2col(work, S, g, d->F, d->OH, d->OW, d->kh, d->kw, d->sh, d->sw, d->pad_t,
                   d->pad_l, d->H, d->W);
        if (dinp) /* dinp_b (C, S) += W (C, K) dcol (K, S) */
            dtk_sgemm(false, false, d->C, (int)S, K, 1.0f, weight,
                      K, work, (int)S, 1.0f, dinp + (long)b * d->C * S, (int)S);
        if (dweight) /* dW (C, K) += inp_b (C, S) dcol^T (S, K) */
            dtk_sgemm(false, true, d->C, K, (int)S, 1.0f,
                      inp + (long)b * d->C * S, (int)S, work, (int)S, 1.0f, dweight, K);
    }
}
