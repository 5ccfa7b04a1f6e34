/* Inverted dropout: the scaling happens in training so that evaluation is the identity. */
#include "layers.h"

#include <string.h>

#include "parallel.h"

void dtk_dropout_forward(float *out, float *mask, const float *inp, long n, float rate,
                         struct dtk_rng *rng)
{
    if (rate <= 0.0f) {
        for (long i = 0; i < n; i++)
            mask[i] = 1.0f;
        memmove(out, inp, (size_t)n * sizeof(float));
        return;
    }
    const float keep = 1.0f / (1.0f - rate);
    for (long i = 0; i < n; i++) {
        mask[i] = dtk_rng_uniform(rng) < rate ? 0.0f : keep;
        out[i] = inp[i] * mask[i];
    }
}

static void dropout_bwd(float *restrict dx, const float *restrict g, const float *restrict m,
                        long i, long n)
{
    for (; i + 8 <= n; i += 8) /* blocks of 8: vectorized at -O2 (see activation.c) */
        for (int k = 0; k < 8; k++)
            dx[i + k] += g[i + k] * m[i + k];
    for (; i < n; i++)
        dx[i] += g[i] * m[i];
}

void dtk_dropout_backward(float *restrict dx, const float *restrict g, const float *restrict m,
                          long n)
{
    DTK_PARALLEL_FOR(n >= DTK_PAR_MIN)
    for (long c = 0; c < n; c += DTK_PAR_CHUNK)
        dropout_bwd(dx, g, m, c, c + DTK_PAR_CHUNK < n ? c + DTK_PAR_CHUNK : n);
}
