/* im2col / col2im with contiguous inner copies for unit stride. */
#include "im2col.h"

#include <string.h>

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

void dtk_im2col(float *col, long ld, const float *img, int C, int H, int W, int kh, int kw,
                int sh, int sw, int pad_t, int pad_l, int OH, int OW)
{
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
                        memset(dst, 0, (size_t)OW * sizeof(float));
                        continue;
                    }
                    /* input index of column ow: base + ow*sw, >= 0 for ow in [lo, hi) */
                    long base = (long)ih * W + j - pad_l;
                    for (int ow = 0; ow < lo; ow++)
                        dst[ow] = 0.0f;
                    if (sw == 1 && hi > lo) {
                        memcpy(dst + lo, plane + base + lo, (size_t)(hi - lo) * sizeof(float));
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
                    if (sw == 1) {
                        for (int ow = lo; ow < hi; ow++)
                            plane[base + ow] += src[ow];
                    } else {
                        for (int ow = lo; ow < hi; ow++)
                            plane[base + (long)ow * sw] += src[ow];
                    }
                }
            }
        }
    }
}
