/* bf16 / fp16 <-> fp32 with round-to-nearest-even (see half.h). */
#include "half.h"

#include <math.h>
#include <string.h>

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t dtk_f32_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN: keep it one, quiet */
    u += 0x7fffu + ((u >> 16) & 1u);          /* ties to even; carries into inf */
    return (uint16_t)(u >> 16);
}

float dtk_bf16_to_f32(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

/* |f| below fp16's smallest normal (2^-14): a multiple of 2^-24, rounded to even. */
static uint16_t f16_subnormal(uint32_t ax)
{
    if (ax <= 0x33000000u) /* up to 2^-25 (a tie with 0, which is even) */
        return 0;
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* |f| = m 2^(e-150) = (m >> shift) 2^-24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)q; /* 0x400 when it rounds up to the smallest normal */
}

uint16_t dtk_f32_to_f16(float f)
{
    uint32_t u = bits_of(f), ax = u & 0x7fffffffu;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (ax > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax < 0x38800000u)
        return (uint16_t)(sign | f16_subnormal(ax));
    uint32_t r = ax - 0x38000000u; /* rebias the exponent from 127 to 15 */
    r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    return (uint16_t)(sign | (r >= 0x7c00u ? 0x7c00u : r));
}

float dtk_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0)
        return (sign ? -1.0f : 1.0f) * ldexpf((float)m, -24);
    if (e == 31)
        return float_of(sign | 0x7f800000u | (m << 13));
    return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

void dtk_half_to_f32(enum dt_dtype t, const uint16_t *in, float *out, long n)
{
    if (t == DT_TYPE_BF16)
        for (long i = 0; i < n; i++)
            out[i] = dtk_bf16_to_f32(in[i]);
    else
        for (long i = 0; i < n; i++)
            out[i] = dtk_f16_to_f32(in[i]);
}

void dtk_f32_to_half(enum dt_dtype t, const float *in, uint16_t *out, long n)
{
    if (t == DT_TYPE_BF16)
        for (long i = 0; i < n; i++)
            out[i] = dtk_f32_to_bf16(in[i]);
    else
        for (long i = 0; i < n; i++)
            out[i] = dtk_f32_to_f16(in[i]);
}

void dtk_half_add(enum dt_dtype t, uint16_t *dst, const uint16_t *src, long n)
{
    if (t == DT_TYPE_BF16)
        for (long i = 0; i < n; i++)
            dst[i] = dtk_f32_to_bf16(dtk_bf16_to_f32(dst[i]) + dtk_bf16_to_f32(src[i]));
    else
        for (long i = 0; i < n; i++)
            dst[i] = dtk_f32_to_f16(dtk_f16_to_f32(dst[i]) + dtk_f16_to_f32(src[i]));
}

void dtk_max_into(enum dt_dtype t, void *dst, const void *src, long n)
{
    if (t == DT_TYPE_F32) {
        float *d = dst;
        const float *f = src;
        for (long i = 0; i < n; i++)
            d[i] = f[i] > d[i] ? f[i] : d[i];
        return;
    }
    uint16_t *d = dst;
    const uint16_t *h = src;
    for (long i = 0; i < n; i++) {
        float a = t == DT_TYPE_BF16 ? dtk_bf16_to_f32(d[i]) : dtk_f16_to_f32(d[i]);
        float b = t == DT_TYPE_BF16 ? dtk_bf16_to_f32(h[i]) : dtk_f16_to_f32(h[i]);
        if (b > a)
            d[i] = h[i];
    }
}

bool dtk_half_nonfinite(enum dt_dtype t, const uint16_t *h, long n)
{
    uint16_t e = t == DT_TYPE_BF16 ? 0x7f80u : 0x7c00u; /* all-ones exponent */
    for (long i = 0; i < n; i++)
        if ((h[i] & e) == e)
            return true;
    return false;
}

bool dtk_nonfinite(enum dt_dtype t, const void *p, long n)
{
    if (t != DT_TYPE_F32)
        return dtk_half_nonfinite(t, p, n);
    const float *f = p;
    for (long i = 0; i < n; i++)
        if (!isfinite(f[i]))
            return true;
    return false;
}

void dtk_store_inf(enum dt_dtype t, void *p)
{
    if (t == DT_TYPE_F32)
        *(float *)p = INFINITY;
    else
        *(uint16_t *)p = t == DT_TYPE_BF16 ? dtk_f32_to_bf16(INFINITY) : dtk_f32_to_f16(INFINITY);
}
