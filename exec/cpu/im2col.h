/* Unfolding of an image (C, H, W) into columns for convolution by GEMM, and its adjoint.
 * col has K = C*kh*kw rows, row (c*kh + i)*kw + j, and OH*OW used columns per image starting at
 * col[0]; ld is the row stride, so several images can sit side by side in one matrix. */
#ifndef DTK_IM2COL_H
#define DTK_IM2COL_H

/* col[k][p] = img[c][oh*sh - pad_t + i][ow*sw - pad_l + j], or 0 outside the image. */
void dtk_im2col(float *col, long ld, const float *img, int C, int H, int W, int kh, int kw,
                int sh, int sw, int pad_t, int pad_l, int OH, int OW);
/* The adjoint: img[...] += col[k][p] for every k, p that im2col would have read from. */
void dtk_col2im(float *img, const float *col, long ld, int C, int H, int W, int kh, int kw,
                int sh, int sw, int pad_t, int pad_l, int OH, int OW);

/* The same for nb images img + b * img_stride placed side by side: image b takes columns
 * [b*OH*OW, (b+1)*OH*OW) of col (ld >= nb*OH*OW). Small outputs (the late layers of a CNN, where
 * a row of the output is a handful of pixels) go through a table of source offsets shared by
 * all channels and images instead of row segments. */
void dtk_im2col_batch(float *col, long ld, const float *img, long img_stride, int nb, int C, int H,
                      int W, int kh, int kw, int sh, int sw, int pad_t, int pad_l, int OH, int OW);
void dtk_col2im_batch(float *img, long img_stride, const float *col, long ld, int nb, int C, int H,
                      int W, int kh, int kw, int sh, int sw, int pad_t, int pad_l, int OH, int OW);

#endif
