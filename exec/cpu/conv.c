/* 2-D convolution and its transpose on im2col + cblas_sgemm.
 *
 * Forward: a chunk of nb samples is unfolded into col (K, nb*P), K = C*kh*kw and P = OH*OW,
 * then each group does one GEMM  tmp_g (F/g, nb*P) = W_g (F/g, K/g) col_g (K/g, nb*P).
 * Folding samples into N matters for the small late feature maps of a CNN (P = 121 or 9 in the
 * seed-002 model), where a per-sample GEMM would be thin and slow; the chunk is sized so that
 * nb*P is about DTK_CONV_TARGET_N columns. When one sample alone is wide enough (nb = 1) the
 * GEMM writes straight into the NCHW output. Backward reuses the same unfolding:
 * dW_g += dtmp_g col_g^T and dcol_g = W_g^T dtmp_g, folded back by col2im. */
#include "layers.h"

#include <cblas.h>
#include <string.h>

#include "im2col.h"

/* Columns per GEMM; measured with exec/bench_kernels (see README): wide enough to amortise
 * OpenBLAS' packing, small enough that the unfolded chunk stays mostly in cache. */
#define DTK_CONV_TARGET_N 2048

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

static int conv_chunk(const struct dtk_conv_dims *d, int B)
{
    long P = (long)d->OH * d->OW;
    long nb = (DTK_CONV_TARGET_N + P - 1) / P;
    if (nb > B)
        nb = B;
    return nb < 1 ? 1 : (int)nb;
}

static bool conv_is_pointwise(const struct dtk_conv_dims *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->pad_t == 0 &&
           d->pad_l == 0 && d->pad_b == 0 && d->pad_r == 0;
}

long dtk_conv2d_workspace_floats(const struct dtk_conv_dims *d)
{
    long K = (long)d->C * d->kh * d->kw;
    long N = (long)conv_chunk(d, d->B) * d->OH * d->OW;
    /* backward: col + dcol (K x N each) + dtmp (F x N); forward needs col + tmp. */
    return 2 * K * N + (long)d->F * N;
}

/* Unfolds samples [b0, b0 + nb) of inp into col (K, nb*P). */
static void conv_unfold(float *col, const float *inp, const struct dtk_conv_dims *d, int b0,
                        int nb)
{
    long P = (long)d->OH * d->OW, N = nb * P, img = (long)d->C * d->H * d->W;
    for (int bi = 0; bi < nb; bi++)
        dtk_im2col(col + bi * P, N, inp + (b0 + bi) * img, d->C, d->H, d->W, d->kh, d->kw,
                   d->sh, d->sw, d->pad_t, d->pad_l, d->OH, d->OW);
}

/* inp (B, C, H, W), weight (F, C/groups, kh, kw), bias (F), out (B, F, OH, OW). */
void dtk_conv2d_forward(float *out, float *work, const float *inp, const float *weight,
                        const float *bias, const struct dtk_conv_dims *d)
{
    const int G = d->groups > 0 ? d->groups : 1;
    const long P = (long)d->OH * d->OW, img = (long)d->C * d->H * d->W;
    const int Fg = d->F / G, Kg = d->C / G * d->kh * d->kw;
    const int nbmax = conv_chunk(d, d->B);
    const bool pointwise = conv_is_pointwise(d);
    float *col = work;
    float *tmp = work + (long)d->C * d->kh * d->kw * nbmax * P;

    for (int b0 = 0; b0 < d->B; b0 += nbmax) {
        int nb = d->B - b0 < nbmax ? d->B - b0 : nbmax;
        long N = nb * P;
        const float *src = col;
        if (nb == 1 && pointwise)
            src = inp + b0 * img; /* a 1x1 convolution's unfolding is the image itself */
        else
            conv_unfold(col, inp, d, b0, nb);
        float *dst = nb == 1 ? out + b0 * (long)d->F * P : tmp;
        for (int g = 0; g < G; g++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Fg, (int)N, Kg, 1.0f,
                        weight + (long)g * Fg * Kg, Kg, src + (long)g * Kg * N, (int)N, 0.0f,
                        dst + (long)g * Fg * N, (int)N);
        /* (F, nb, P) -> (nb, F, P), adding the bias on the way. */
        for (int bi = 0; bi < nb; bi++) {
            for (int f = 0; f < d->F; f++) {
                float *o = out + ((b0 + bi) * (long)d->F + f) * P;
                if (nb > 1)
                    memcpy(o, tmp + f * N + bi * P, (size_t)P * sizeof(float));
                if (bias) {
                    float bf = bias[f];
                    for (long p = 0; p < P; p++)
                        o[p] += bf;
                }
            }
        }
    }
}

void dtk_conv2d_backward(float *dinp, float *dweight, float *dbias, float *work,
                         const float *dout, const float *inp, const float *weight,
                         const struct dtk_conv_dims *d)
{
    const int G = d->groups > 0 ? d->groups : 1;
    const long P = (long)d->OH * d->OW, img = (long)d->C * d->H * d->W;
    const long K = (long)d->C * d->kh * d->kw;
    const int Fg = d->F / G, Kg = (int)(K / G);
    const int nbmax = conv_chunk(d, d->B);
    const bool pointwise = conv_is_pointwise(d);
    float *col = work;
    float *dcol = work + K * nbmax * P;
    float *dtmp = dcol + K * nbmax * P;

    if (dbias) {
        for (int b = 0; b < d->B; b++)
            for (int f = 0; f < d->F; f++) {
                const float *g = dout + ((long)b * d->F + f) * P;
                float s = 0.0f;
                for (long p = 0; p < P; p++)
                    s += g[p];
                dbias[f] += s;
            }
    }
    for (int b0 = 0; b0 < d->B; b0 += nbmax) {
        int nb = d->B - b0 < nbmax ? d->B - b0 : nbmax;
        long N = nb * P;
        const float *dsrc = dtmp;
        if (nb == 1) {
            dsrc = dout + b0 * (long)d->F * P;
        } else {
            for (int bi = 0; bi < nb; bi++)
                for (int f = 0; f < d->F; f++)
                    memcpy(dtmp + f * N + bi * P, dout + ((b0 + bi) * (long)d->F + f) * P,
                           (size_t)P * sizeof(float));
        }
        if (dweight) {
            const float *src = col;
            if (nb == 1 && pointwise)
                src = inp + b0 * img;
            else
                conv_unfold(col, inp, d, b0, nb);
            for (int g = 0; g < G; g++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Fg, Kg, (int)N, 1.0f,
                            dsrc + (long)g * Fg * N, (int)N, src + (long)g * Kg * N, (int)N,
                            1.0f, dweight + (long)g * Fg * Kg, Kg);
        }
        if (dinp) {
            if (nb == 1 && pointwise) {
                /* col2im of a 1x1 convolution is the identity: accumulate in place. */
                for (int g = 0; g < G; g++)
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Kg, (int)N, Fg, 1.0f,
                                weight + (long)g * Fg * Kg, Kg, dsrc + (long)g * Fg * N, (int)N,
                                1.0f, dinp + b0 * img + (long)g * Kg * N, (int)N);
                continue;
            }
            for (int g = 0; g < G; g++)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Kg, (int)N, Fg, 1.0f,
                            weight + (long)g * Fg * Kg, Kg, dsrc + (long)g * Fg * N, (int)N,
                            0.0f, dcol + (long)g * Kg * N, (int)N);
            for (int bi = 0; bi < nb; bi++)
                dtk_col2im(dinp + (b0 + bi) * img, dcol + bi * P, N, d->C, d->H, d->W, d->kh,
                           d->kw, d->sh, d->sw, d->pad_t, d->pad_l, d->OH, d->OW);
        }
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
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, (int)S, d->C, 1.0f, weight, K,
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d->C, (int)S, K, 1.0f, weight,
                        K, work, (int)S, 1.0f, dinp + (long)b * d->C * S, (int)S);
        if (dweight) /* dW (C, K) += inp_b (C, S) dcol^T (S, K) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d->C, K, (int)S, 1.0f,
                        inp + (long)b * d->C * S, (int)S, work, (int)S, 1.0f, dweight, K);
    }
}
