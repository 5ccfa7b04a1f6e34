/* im2col / col2im with contiguous inner copies for unit stride. */
#include "im2col.h"

#include <stdbool.h>
#include <string.h>

#include "parallel.h"

/* GCC turns a copy or zeroing loop into a call of memcpy or memset (loop distribution), which
 * for the few floats of a row costs more than the copy; glibc keeps its own loops inline the
 * same way. */
#if defined(__GNUC__) && !defined(__clang__)
#define INLINE_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define INLINE_LOOPS
#endif

/* Row copy and row add in blocks of 8 then 4 over restrict parameters: GCC vectorizes the
 * fixed-length inner loops at -O2, where a plain loop or a memcpy call of a few floats is
 * slow. */
INLINE_LOOPS static inline void copy_row(float *restrict dst, const float *restrict src, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            dst[i + k] = src[i + k];
    if (i + 4 <= n) {
        for (int k = 0; k < 4; k++)
            dst[i + k] = src[i + k];
        i += 4;
    }
    for (; i < n; i++)
        dst[i] = src[i];
}

static inline void add_row(float *restrict dst, const float *restrict src, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            dst[i + k] += src[i + k];
    if (i + 4 <= n) {
        for (int k = 0; k < 4; k++)
            dst[i + k] += src[i + k];
        i += 4;
    }
    for (; i < n; i++)
        dst[i] += src[i];
}

/* Stride 1 with every row read inside the image (no padding; a band's top offset pad_t <= 0):
 * each output row of a tap is one contiguous run of the input, copied without bounds tests. */
static bool inside_s1(int H, int W, int kh, int kw, int sh, int sw, int pad_t, int pad_l, int OH,
                      int OW)
{
    return sh == 1 && sw == 1 && pad_l == 0 && pad_t <= 0 && OW - 1 + kw <= W &&
           OH - 1 + kh - pad_t <= H;
}

INLINE_LOOPS static void im2col_s1(float *col, long ld, const float *img, int C, int H, int W,
                                   int kh, int kw, int top, int OH, int OW)
{
    for (int c = 0; c < C; c++)
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++) {
                const float *src = img + ((long)c * H + top + i) * W + j;
                float *dst = col + ((long)(c * kh + i) * kw + j) * ld;
                for (int oh = 0; oh < OH; oh++)
                    copy_row(dst + (long)oh * OW, src + (long)oh * W, OW);
            }
}

static void col2im_s1(float *img, const float *col, long ld, int C, int H, int W, int kh, int kw,
                      int top, int OH, int OW)
{
    for (int c = 0; c < C; c++)
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++) {
                float *dst = img + ((long)c * H + top + i) * W + j;
                const float *src = col + ((long)(c * kh + i) * kw + j) * ld;
                for (int oh = 0; oh < OH; oh++)
                    add_row(dst + (long)oh * W, src + (long)oh * OW, OW);
            }
}

/* The range [lo, hi) of output columns ow whose input column ow*sw - pad_l + j is in [0, W). */
static void valid_range(int *lo, int *hi, int W, int sw, int pad_l, int j, int OW)
{
    int off = j - pad_l; /* iw = ow*sw + off */
    int l = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int h = W - off <= 0 ? 0 : (W - off - 1) / sw + 1;
    if (h > OW)
        h = OW;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

INLINE_LOOPS void dtk_im2col(float *col, long ld, const float *img, int C, int H, int W, int kh,
                             int kw, int sh, int sw, int pad_t, int pad_l, int OH, int OW)
{
    if (inside_s1(H, W, kh, kw, sh, sw, pad_t, pad_l, OH, OW)) {
        im2col_s1(col, ld, img, C, H, W, kh, kw, -pad_t, OH, OW);
        return;
    }
    for (int c = 0; c < C; c++) {
        const float *plane = img + (long)c * H * W;
        for (int i = 0; i < kh; i++) {
            for (int j = 0; j < kw; j++) {
                float *row = col + ((long)(c * kh + i) * kw + j) * ld;
                int lo, hi;
                valid_range(&lo, &hi, W, sw, pad_l, j, OW);
                for (int oh = 0; oh < OH; oh++) {
                    float *dst = row + (long)oh * OW;
                    int ih = oh * sh - pad_t + i;
                    if (ih < 0 || ih >= H) {
                        for (int ow = 0; ow < OW; ow++)
                            dst[ow] = 0.0f;
                        continue;
                    }
                    /* input index of column ow: base + ow*sw, >= 0 for ow in [lo, hi) */
                    long base = (long)ih * W + j - pad_l;
                    for (int ow = 0; ow < lo; ow++)
                        dst[ow] = 0.0f;
                    if (sw == 1 && hi > lo) {
                        copy_row(dst + lo, plane + base + lo, hi - lo);
                    } else {
                        for (int ow = lo; ow < hi; ow++)
                            dst[ow] = plane[base + (long)ow * sw];
                    }
                    for (int ow = hi; ow < OW; ow++)
                        dst[ow] = 0.0f;
                }
            }
        }
    }
}

void dtk_col2im(float *img, const float *col, long ld, int C, int H, int W, int kh, int kw,
                int sh, int sw, int pad_t, int pad_l, int OH, int OW)
{
    if (inside_s1(H, W, kh, kw, sh, sw, pad_t, pad_l, OH, OW)) {
        col2im_s1(img, col, ld, C, H, W, kh, kw, -pad_t, OH, OW);
        return;
    }
    for (int c = 0; c < C; c++) {
        float *plane = img + (long)c * H * W;
        for (int i = 0; i < kh; i++) {
            for (int j = 0; j < kw; j++) {
                const float *row = col + ((long)(c * kh + i) * kw + j) * ld;
                int lo, hi;
                valid_range(&lo, &hi, W, sw, pad_l, j, OW);
                for (int oh = 0; oh < OH; oh++) {
                    int ih = oh * sh - pad_t + i;
                    if (ih < 0 || ih >= H)
                        continue;
                    const float *src = row + (long)oh * OW;
                    long base = (long)ih * W + j - pad_l;
                    if (sw == 1 && hi > lo) {
                        add_row(plane + base + lo, src + lo, hi - lo);
                    } else {
                        for (int ow = lo; ow < hi; ow++)
                            plane[base + (long)ow * sw] += src[ow];
                    }
                }
            }
        }
    }
}

/* Outputs up to this many pixels use the offset table (on the stack), unless their rows are
 * at least ROW_MIN wide: a row of 8 is one vector copy, cheaper than 8 table lookups. */
#ifndef SMALL_P
#define SMALL_P 64
#endif
#ifndef ROW_MIN
#define ROW_MIN 8
#endif

/* off[p] = input index of output pixel p for kernel tap (i, j), or -1 in the padding. */
static bool tap_offsets(int *off, int H, int W, int i, int j, int sh, int sw, int pad_t,
                        int pad_l, int OH, int OW)
{
    bool padded = false;
    for (int oh = 0; oh < OH; oh++) {
        int ih = oh * sh - pad_t + i;
        for (int ow = 0; ow < OW; ow++) {
            int iw = ow * sw - pad_l + j;
            bool in = ih >= 0 && ih < H && iw >= 0 && iw < W;
            off[oh * OW + ow] = in ? ih * W + iw : -1;
            padded |= !in;
        }
    }
    return padded;
}

INLINE_LOOPS void dtk_im2col_batch(float *col, long ld, const float *img, long img_stride, int nb,
                                   int C, int H, int W, int kh, int kw, int sh, int sw, int pad_t,
                                   int pad_l, int OH, int OW)
{
    const int P = OH * OW;
    const bool par = (long)nb * C * kh * kw * P >= DTK_PAR_MIN;
    (void)par; /* used only by OpenMP */
    if (P > SMALL_P || OW >= ROW_MIN) {
        DTK_PARALLEL_FOR(par)
        for (int b = 0; b < nb; b++)
            dtk_im2col(col + (long)b * P, ld, img + b * img_stride, C, H, W, kh, kw, sh, sw,
                       pad_t, pad_l, OH, OW);
        return;
    }
    int off[SMALL_P];
    const long HW = (long)H * W;
    for (int i = 0; i < kh; i++)
        for (int j = 0; j < kw; j++) {
            bool padded = tap_offsets(off, H, W, i, j, sh, sw, pad_t, pad_l, OH, OW);
            DTK_PARALLEL_FOR(par)
            for (int c = 0; c < C; c++) {
                float *row = col + ((long)(c * kh + i) * kw + j) * ld;
                for (int b = 0; b < nb; b++) {
                    const float *src = img + b * img_stride + c * HW;
                    float *dst = row + (long)b * P;
                    if (padded)
                        for (int p = 0; p < P; p++)
                            dst[p] = off[p] >= 0 ? src[off[p]] : 0.0f;
                    else
                        for (int p = 0; p < P; p++)
                            dst[p] = src[off[p]];
                }
            }
        }
}

void dtk_col2im_batch(float *img, long img_stride, const float *col, long ld, int nb, int C, int H,
                      int W, int kh, int kw, int sh, int sw, int pad_t, int pad_l, int OH, int OW)
{
    const int P = OH * OW;
    const bool par = (long)nb * C * kh * kw * P >= DTK_PAR_MIN;
    (void)par; /* used only by OpenMP */
    if (P > SMALL_P || OW >= ROW_MIN) {
        DTK_PARALLEL_FOR(par)
        for (int b = 0; b < nb; b++)
            dtk_col2im(img + b * img_stride, col + (long)b * P, ld, C, H, W, kh, kw, sh, sw,
                       pad_t, pad_l, OH, OW);
        return;
    }
    int off[SMALL_P];
    const long HW = (long)H * W;
    for (int i = 0; i < kh; i++)
        for (int j = 0; j < kw; j++) {
            tap_offsets(off, H, W, i, j, sh, sw, pad_t, pad_l, OH, OW);
            DTK_PARALLEL_FOR(par)
            for (int c = 0; c < C; c++) {
                const float *row = col + ((long)(c * kh + i) * kw + j) * ld;
                for (int b = 0; b < nb; b++) {
                    float *dst = img + b * img_stride + c * HW;
                    const float *src = row + (long)b * P;
                    /* one tap maps distinct output pixels to distinct input pixels */
                    for (int p = 0; p < P; p++)
                        if (off[p] >= 0)
                            dst[off[p]] += src[p];
                }
            }
        }
}
