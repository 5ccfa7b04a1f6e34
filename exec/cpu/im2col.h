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

#endif
