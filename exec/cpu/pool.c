/* Max, average and global average pooling over NCHW planes. */
#include "layers.h"

#include <float.h>
#include <string.h>
#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "parallel.h"

/* The common 2x2, stride 2, unpadded case has forms without data-dependent branches (a max
 * of random activations mispredicts about half the time): four windows at a time with SSE2
 * compares and masks, the same choices as the scalar form (strict >, so the first maximum in
 * raster order wins, and a NaN never does). They rely on every window lying inside the image
 * (2 OH <= H and 2 OW <= W). */
static bool is_2x2(const struct dtk_conv_dims *d)
{
    return d->kh == 2 && d->kw == 2 && d->sh == 2 && d->sw == 2 && d->pad_t == 0 &&
           d->pad_l == 0 && d->pad_b == 0 && d->pad_r == 0;
}

/* A max pooling's arrays, for ranges of planes run on the pool. */
struct pool_job {
    float *out;
    int *argmax;
    const float *inp;
    const struct dtk_conv_dims *d;
};

#ifdef __SSE2__
/* Four 2x2 windows over columns c0..c0+7 of rows r0 and r1 (pointers at c0): their maxima and
 * the plane index of each maximum (k0: that of the first window's top left cell). A true
 * compare mask is -1, so k - mask adds 1 where the right column won. */
static inline void window4(const float *r0, const float *r1, int k0, int W, __m128 *mx,
                           __m128i *arg)
{
    __m128 a0 = _mm_loadu_ps(r0), a1 = _mm_loadu_ps(r0 + 4);
    __m128 b0 = _mm_loadu_ps(r1), b1 = _mm_loadu_ps(r1 + 4);
    __m128 v0 = _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0));
    __m128 v1 = _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 v2 = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0));
    __m128 v3 = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 g1 = _mm_cmpgt_ps(v1, v0), g3 = _mm_cmpgt_ps(v3, v2);
    __m128 m01 = _mm_or_ps(_mm_and_ps(g1, v1), _mm_andnot_ps(g1, v0));
    __m128 m23 = _mm_or_ps(_mm_and_ps(g3, v3), _mm_andnot_ps(g3, v2));
    __m128 g = _mm_cmpgt_ps(m23, m01);
    *mx = _mm_or_ps(_mm_and_ps(g, m23), _mm_andnot_ps(g, m01));
    __m128i k = _mm_add_epi32(_mm_set1_epi32(k0), _mm_set_epi32(6, 4, 2, 0));
    __m128i i01 = _mm_sub_epi32(k, _mm_castps_si128(g1));
    __m128i i23 = _mm_sub_epi32(_mm_add_epi32(k, _mm_set1_epi32(W)), _mm_castps_si128(g3));
    __m128i gi = _mm_castps_si128(g);
    *arg = _mm_or_si128(_mm_and_si128(gi, i23), _mm_andnot_si128(gi, i01));
}
#endif

/* One window the same way, with the scalar (_ss) forms. */
static inline void window1(const float *r0, const float *r1, int k0, int W, float *out,
                           int *arg)
{
    __m128 v0 = _mm_load_ss(r0), v1 = _mm_load_ss(r0 + 1);
    __m128 v2 = _mm_load_ss(r1), v3 = _mm_load_ss(r1 + 1);
    __m128 g1 = _mm_cmpgt_ss(v1, v0), g3 = _mm_cmpgt_ss(v3, v2);
    __m128 m01 = _mm_or_ps(_mm_and_ps(g1, v1), _mm_andnot_ps(g1, v0));
    __m128 m23 = _mm_or_ps(_mm_and_ps(g3, v3), _mm_andnot_ps(g3, v2));
    __m128 g = _mm_cmpgt_ss(m23, m01);
    _mm_store_ss(out, _mm_or_ps(_mm_and_ps(g, m23), _mm_andnot_ps(g, m01)));
    int i01 = k0 - _mm_cvtsi128_si32(_mm_castps_si128(g1));
    int i23 = k0 + W - _mm_cvtsi128_si32(_mm_castps_si128(g3));
    int gm = _mm_cvtsi128_si32(_mm_castps_si128(g));
    *arg = (gm & i23) | (~gm & i01);
}

/* Planes [lo, hi) of the 2x2 pooling, four windows at a time, then one at a time. */
static void maxpool_2x2(void *ctx, long lo, long hi)
{
    const struct pool_job *job = ctx;
    const struct dtk_conv_dims *d = job->d;
    const long HW = (long)d->H * d->W, P = (long)d->OH * d->OW;
    const int W = d->W, OW = d->OW;
    for (long bc = lo; bc < hi; bc++) {
        const float *x = job->inp + bc * HW;
        float *o = job->out + bc * P;
        int *a = job->argmax + bc * P;
        for (int oh = 0; oh < d->OH; oh++) {
            const float *r0 = x + 2L * oh * W, *r1 = r0 + W;
            float *orow = o + (long)oh * OW;
            int *arow = a + (long)oh * OW;
            int ow = 0;
#ifdef __SSE2__
            __m128 mx;
            __m128i arg;
            for (; ow + 4 <= OW; ow += 4) { /* columns 2ow..2ow+7: 2(ow + 4) <= 2 OW <= W */
                window4(r0 + 2 * ow, r1 + 2 * ow, 2 * oh * W + 2 * ow, W, &mx, &arg);
                _mm_storeu_ps(orow + ow, mx);
                _mm_storeu_si128((__m128i *)(arow + ow), arg);
            }
            for (; ow < OW; ow++)
                window1(r0 + 2 * ow, r1 + 2 * ow, 2 * oh * W + 2 * ow, W, orow + ow, arow + ow);
#else
            for (; ow < OW; ow++) {
                int j = 2 * ow, k0 = 2 * oh * W + j;
                float v0 = r0[j], v1 = r0[j + 1], v2 = r1[j], v3 = r1[j + 1];
                int g1 = v1 > v0;
                float m01 = g1 ? v1 : v0;
                int i01 = g1 ? k0 + 1 : k0;
                int g3 = v3 > v2;
                float m23 = g3 ? v3 : v2;
                int i23 = g3 ? k0 + W + 1 : k0 + W;
                int g = m23 > m01;
                orow[ow] = g ? m23 : m01;
                arow[ow] = g ? i23 : i01;
            }
#endif
        }
    }
}

/* inp (B, C, H, W), out and argmax (B, C, OH, OW). */
void dtk_maxpool_forward(float *out, int *argmax, const float *inp, const struct dtk_conv_dims *d)
{
    const long HW = (long)d->H * d->W, P = (long)d->OH * d->OW;
    if (is_2x2(d)) {
        struct pool_job j = {out, argmax, inp, d};
        dtk_parallel_range((long)d->B * d->C, DTK_PAR_MIN / HW + 1, maxpool_2x2, &j);
        return;
    }
    DTK_PARALLEL_FOR((long)d->B * d->C * d->H * d->W >= DTK_PAR_MIN)
    for (long bc = 0; bc < (long)d->B * d->C; bc++) {
        const float *x = inp + bc * HW;
        float *o = out + bc * P;
        int *a = argmax + bc * P;
        for (int oh = 0; oh < d->OH; oh++) {
            int h0 = oh * d->sh - d->pad_t;
            for (int ow = 0; ow < d->OW; ow++) {
                int w0 = ow * d->sw - d->pad_l;
                float best = -FLT_MAX;
                int arg = -1;
                for (int i = h0 < 0 ? 0 : h0; i < h0 + d->kh && i < d->H; i++)
                    for (int j = w0 < 0 ? 0 : w0; j < w0 + d->kw && j < d->W; j++) {
                        float v = x[i * d->W + j];
                        if (arg < 0 || v > best) {
                            best = v;
                            arg = i * d->W + j;
                        }
                    }
                /* A window entirely in the padding (impossible with valid/same padding) gives 0. */
                o[oh * d->OW + ow] = arg < 0 ? 0.0f : best;
                a[oh * d->OW + ow] = arg;
            }
        }
    }
}

/* Planes [lo, hi) of the backward: the gradient goes to each window's maximum. */
static void maxpool_bwd(void *ctx, long lo, long hi)
{
    const struct pool_job *j = ctx;
    const struct dtk_conv_dims *d = j->d;
    const long HW = (long)d->H * d->W, P = (long)d->OH * d->OW;
    for (long bc = lo; bc < hi; bc++) {
        float *dx = j->out + bc * HW;
        const float *g = j->inp + bc * P;
        const int *a = j->argmax + bc * P;
        for (long p = 0; p < P; p++)
            if (a[p] >= 0)
                dx[a[p]] += g[p];
    }
}

/* The same writing whole planes: each is zeroed (while it is in cache) then scattered to. */
static void maxpool_bwd_set(void *ctx, long lo, long hi)
{
    const struct pool_job *j = ctx;
    const long HW = (long)j->d->H * j->d->W;
    for (long bc = lo; bc < hi; bc++) {
        memset(j->out + bc * HW, 0, (size_t)HW * sizeof(float));
        maxpool_bwd(ctx, bc, bc + 1);
    }
}

/* The 2x2 form of the _set backward: every input cell is written once, with its window's
 * gradient where it is the window's maximum and 0 elsewhere (and 0 in a last odd row or
 * column, which no window covers). Planes of fewer than 8 windows a row (the seed-002 CNN's
 * 3x3) have too little to vectorize: they are zeroed in one go and scattered to. */
static void maxpool_2x2_bwd_set(void *ctx, long lo, long hi)
{
    const struct pool_job *job = ctx;
    const struct dtk_conv_dims *d = job->d;
    const long HW = (long)d->H * d->W, P = (long)d->OH * d->OW;
    const int W = d->W, OW = d->OW;
    if (OW < 8) {
        memset(job->out + lo * HW, 0, (size_t)((hi - lo) * HW) * sizeof(float));
        maxpool_bwd(ctx, lo, hi);
        return;
    }
    for (long bc = lo; bc < hi; bc++) {
        float *dx = job->out + bc * HW;
        const float *g = job->inp + bc * P;
        const int *a = job->argmax + bc * P;
        for (int oh = 0; oh < d->OH; oh++) {
            float *r0 = dx + 2L * oh * W, *r1 = r0 + W;
            const float *grow = g + (long)oh * OW;
            const int *arow = a + (long)oh * OW;
            int ow = 0;
#ifdef __SSE2__
            const __m128i step = _mm_set_epi32(6, 4, 2, 0), one = _mm_set1_epi32(1);
            const __m128i vW = _mm_set1_epi32(W);
            for (; ow + 4 <= OW; ow += 4) {
                __m128 gv = _mm_loadu_ps(grow + ow);
                __m128i av = _mm_loadu_si128((const __m128i *)(arow + ow));
                __m128i k00 = _mm_add_epi32(_mm_set1_epi32(2 * oh * W + 2 * ow), step);
                __m128i k10 = _mm_add_epi32(k00, vW);
                __m128 v00 = _mm_and_ps(gv, _mm_castsi128_ps(_mm_cmpeq_epi32(av, k00)));
                __m128 v01 = _mm_and_ps(
                    gv, _mm_castsi128_ps(_mm_cmpeq_epi32(av, _mm_add_epi32(k00, one))));
                __m128 v10 = _mm_and_ps(gv, _mm_castsi128_ps(_mm_cmpeq_epi32(av, k10)));
                __m128 v11 = _mm_and_ps(
                    gv, _mm_castsi128_ps(_mm_cmpeq_epi32(av, _mm_add_epi32(k10, one))));
                /* row 2oh: v00[0] v01[0] v00[1] v01[1] ...; row 2oh + 1 likewise */
                _mm_storeu_ps(r0 + 2 * ow, _mm_unpacklo_ps(v00, v01));
                _mm_storeu_ps(r0 + 2 * ow + 4, _mm_unpackhi_ps(v00, v01));
                _mm_storeu_ps(r1 + 2 * ow, _mm_unpacklo_ps(v10, v11));
                _mm_storeu_ps(r1 + 2 * ow + 4, _mm_unpackhi_ps(v10, v11));
            }
#endif
            for (; ow < OW; ow++) { /* the cells of the last windows, zeroed, then the max */
                r0[2 * ow] = r0[2 * ow + 1] = r1[2 * ow] = r1[2 * ow + 1] = 0.0f;
                dx[arow[ow]] = grow[ow];
            }
            for (int c = 2 * OW; c < W; c++) /* a last odd column */
                r0[c] = r1[c] = 0.0f;
        }
        if (2 * d->OH < d->H) /* a last odd row */
            memset(dx + 2L * d->OH * W, 0, (size_t)(d->H - 2 * d->OH) * W * sizeof(float));
    }
}

void dtk_maxpool_backward_set(float *dinp, const float *dout, const int *argmax,
                              const struct dtk_conv_dims *d)
{
    const long HW = (long)d->H * d->W;
    struct pool_job j = {dinp, (int *)argmax, dout, d}; /* argmax is only read */
    dtk_parallel_range((long)d->B * d->C, DTK_PAR_MIN / HW + 1,
                       is_2x2(d) ? maxpool_2x2_bwd_set : maxpool_bwd_set, &j);
}

void dtk_maxpool_backward(float *dinp, const float *dout, const int *argmax,
                          const struct dtk_conv_dims *d)
{
    const long HW = (long)d->H * d->W;
    struct pool_job j = {dinp, (int *)argmax, dout, d}; /* argmax is only read */
    dtk_parallel_range((long)d->B * d->C, DTK_PAR_MIN / HW + 1, maxpool_bwd, &j);
}

/* Window [i0, i1) x [j0, j1) of output (oh, ow) clipped to the image. */
static void window(const struct dtk_conv_dims *d, int oh, int ow, int *i0, int *i1, int *j0,
                   int *j1)
{
    int h0 = oh * d->sh - d->pad_t, w0 = ow * d->sw - d->pad_l;
    *i0 = h0 < 0 ? 0 : h0;
    *i1 = h0 + d->kh < d->H ? h0 + d->kh : d->H;
    *j0 = w0 < 0 ? 0 : w0;
    *j1 = w0 + d->kw < d->W ? w0 + d->kw : d->W;
}

void dtk_avgpool_forward(float *out, const float *inp, const struct dtk_conv_dims *d)
{
    const long HW = (long)d->H * d->W, P = (long)d->OH * d->OW;
    DTK_PARALLEL_FOR((long)d->B * d->C * d->H * d->W >= DTK_PAR_MIN)
    for (long bc = 0; bc < (long)d->B * d->C; bc++) {
        const float *x = inp + bc * HW;
        float *o = out + bc * P;
        for (int oh = 0; oh < d->OH; oh++)
            for (int ow = 0; ow < d->OW; ow++) {
                int i0, i1, j0, j1;
                window(d, oh, ow, &i0, &i1, &j0, &j1);
                float s = 0.0f;
                for (int i = i0; i < i1; i++)
                    for (int j = j0; j < j1; j++)
                        s += x[i * d->W + j];
                int cnt = (i1 - i0) * (j1 - j0);
                o[oh * d->OW + ow] = cnt > 0 ? s / (float)cnt : 0.0f;
            }
    }
}

void dtk_avgpool_backward(float *dinp, const float *dout, const struct dtk_conv_dims *d)
{
    const long HW = (long)d->H * d->W, P = (long)d->OH * d->OW;
    DTK_PARALLEL_FOR((long)d->B * d->C * d->H * d->W >= DTK_PAR_MIN)
    for (long bc = 0; bc < (long)d->B * d->C; bc++) {
        float *dx = dinp + bc * HW;
        const float *g = dout + bc * P;
        for (int oh = 0; oh < d->OH; oh++)
            for (int ow = 0; ow < d->OW; ow++) {
                int i0, i1, j0, j1;
                window(d, oh, ow, &i0, &i1, &j0, &j1);
                int cnt = (i1 - i0) * (j1 - j0);
                if (cnt <= 0)
                    continue;
                float share = g[oh * d->OW + ow] / (float)cnt;
                for (int i = i0; i < i1; i++)
                    for (int j = j0; j < j1; j++)
                        dx[i * d->W + j] += share;
            }
    }
}

/* inp (B, C, S), out (B, C). */
void dtk_globalpool_forward(float *out, const float *inp, int B, int C, int S)
{
    DTK_PARALLEL_FOR((long)B * C * S >= DTK_PAR_MIN)
    for (long bc = 0; bc < (long)B * C; bc++) {
        const float *x = inp + bc * S;
        float s = 0.0f;
        for (int i = 0; i < S; i++)
            s += x[i];
        out[bc] = s / (float)S;
    }
}

void dtk_globalpool_backward(float *dinp, const float *dout, int B, int C, int S)
{
    DTK_PARALLEL_FOR((long)B * C * S >= DTK_PAR_MIN)
    for (long bc = 0; bc < (long)B * C; bc++) {
        float share = dout[bc] / (float)S;
        float *dx = dinp + bc * S;
        for (int i = 0; i < S; i++)
            dx[i] += share;
    }
}
