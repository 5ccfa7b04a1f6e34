/* 2-byte floats of mixed precision (bfloat16, IEEE binary16) and their conversions to and
 * from float32, rounding to nearest even as hardware casts do: NaN stays NaN (quiet), values
 * beyond the largest finite one become inf, fp16 keeps its subnormals. Debian 12's OpenBLAS
 * has no bf16 GEMM (cblas_sbgemm is not exported), so kernels convert to float32, compute
 * with float32 accumulation and round their results back. */
#ifndef DTK_HALF_H
#define DTK_HALF_H

#include <stdbool.h>
#include <stdint.h>

#include "dt/plan.h"

uint16_t dtk_f32_to_bf16(float f);
float dtk_bf16_to_f32(uint16_t h);
uint16_t dtk_f32_to_f16(float f);
float dtk_f16_to_f32(uint16_t h);

/* n elements of a 2-byte dtype (DT_TYPE_BF16 or DT_TYPE_F16) to float32 and back. */
void dtk_half_to_f32(enum dt_dtype t, const uint16_t *in, float *out, long n);
void dtk_f32_to_half(enum dt_dtype t, const float *in, uint16_t *out, long n);
/* Adds n elements of src into dst (both 2-byte), in float32, rounding once per element:
 * the sum a reduction of 2-byte gradients computes at each hop. */
void dtk_half_add(enum dt_dtype t, uint16_t *dst, const uint16_t *src, long n);
/* dst[i] = max(dst[i], src[i]) for n elements of dtype t (float32, bf16 or fp16): the MAX
 * reductions (the vocabulary-parallel loss's largest logit, the loss scaler's overflow flag). */
void dtk_max_into(enum dt_dtype t, void *dst, const void *src, long n);

/* Whether any of n 2-byte floats is inf or NaN (the loss scaler's overflow check). */
bool dtk_half_nonfinite(enum dt_dtype t, const uint16_t *h, long n);
/* The same for n elements of dtype t (float32, bf16 or fp16), and +inf written into the
 * first (--overflow-at's injected overflow). */
bool dtk_nonfinite(enum dt_dtype t, const void *p, long n);
void dtk_store_inf(enum dt_dtype t, void *p);

#endif
