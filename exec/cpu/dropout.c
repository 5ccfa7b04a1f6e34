/* Inverted dropout: the scaling happens in training so that evaluation is the identity. */
#include "layers.h"

#include <string.h>

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

void dtk_dropout_backward(float *dinp, const float *dout, const float *mask, long n)
{
    for (long i = 0; i < n; i++)
        dinp[i] += dout[i] * mask[i];
}
